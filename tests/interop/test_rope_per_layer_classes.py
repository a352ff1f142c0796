"""Olmo3, Gemma 3n, T5Gemma 2 and NeoMME always nest their RoPE parameters by layer type, as transformers 5.23 does.

Their config classes (``convert_rope_params_to_dict``) build one dict per layer type whatever the config states:

- Gemma 3n and T5Gemma 2 (text, decoder) as Gemma 3: a 4.x ``rope_scaling`` into full attention over
  ``rope_type: "default"``, ``rope_theta`` for full and ``rope_local_base_freq`` for sliding attention, else
  1e6 / 1e4; flat ``rope_parameters`` are ignored; Gemma 3n makes every fifth layer full attention;
- Olmo3 likewise, but the full layers take the top-level ``rope_theta`` and the sliding ones always the class
  default 5e5; every fourth layer is full attention;
- NeoMME: the top-level ``rope_theta`` for every layer type, else 1e6 / 1e4, and a partial factor per layer
  type (0.25 / 1); every sixth layer and the last are full attention; flat parameters are refused.

A top-level ``partial_rotary_factor`` is ignored by all of them. Each case is compared with the model's own
rotary embedding (every layer type it builds).
"""

import copy

import pytest

from posembed.interop.rope.settings import layer_pattern, read_rope_settings
from posembed.interop.rope_check.check import check_rope_config
from posembed.interop.rope_check.stated import stated_of
from tests.interop.transformers_rope import assert_posembed_is_the_model, built

transformers = pytest.importorskip("transformers")

SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 6, "head_dim": 16,
         "intermediate_size": 64, "vocab_size": 100, "pad_token_id": 0, "max_position_embeddings": 4096}  # fmt: skip
#: what each class needs beside the shape to be built small
CLASSES = {
    "olmo3": {},
    "gemma3n_text": {"num_kv_shared_layers": 0, "laurel_rank": 4, "hidden_size_per_layer_input": 4,
                     "vocab_size_per_layer_input": 100, "altup_num_inputs": 2},
    "t5gemma2_text": {},
    "t5gemma2_decoder": {},
    "neomme": {"embedding_rank": 8, "embedding_dim": 8, "patch_size": 4},
}  # fmt: skip
LINEAR = {"rope_type": "linear", "factor": 2.0}
#: how a config states RoPE -> its fields
CASES = {
    "bare": {},
    "top_theta": {"rope_theta": 2e5},
    "local_theta": {"rope_local_base_freq": 3e4},
    "v4_scaling": {"rope_theta": 2e5, "rope_scaling": LINEAR},
    "v4_old_type_key": {"rope_scaling": {"type": "linear", "factor": 2.0}},
    "v5_flat": {"rope_parameters": {"rope_type": "default", "rope_theta": 3e5}},
    "v5_full_only": {"rope_parameters": {"full_attention": {**LINEAR, "rope_theta": 3e5}}},
    "v5_nested_and_top_theta": {"rope_theta": 2e5, "rope_parameters": {"full_attention": {"rope_type": "default"},
                                                                       "sliding_attention": {"rope_type": "default"}}},
    "top_partial": {"partial_rotary_factor": 0.5},
}  # fmt: skip
#: NeoMME's class refuses parameters that are not nested by layer type
REFUSED = {("neomme", "v4_scaling"), ("neomme", "v4_old_type_key"), ("neomme", "v5_flat")}


def _raw(model_type: str, case: str) -> dict:
    return {"model_type": model_type, **SHAPE, **CLASSES[model_type], **copy.deepcopy(CASES[case])}


@pytest.mark.parametrize(("model_type", "case"), [(m, c) for m in CLASSES for c in CASES if (m, c) not in REFUSED])
def test_per_layer_classes_are_the_model(model_type, case):
    settings = assert_posembed_is_the_model(_raw(model_type, case))
    assert {s.layer_type for s in settings} == {"full_attention", "sliding_attention"}


def test_olmo3_sliding_layers_never_read_rope_theta():
    raw = _raw("olmo3", "top_theta")
    settings = {s.layer_type: s for s in read_rope_settings(copy.deepcopy(raw))}
    given = {layer: stated_of(raw, s).theta_given for layer, s in settings.items()}
    assert (settings["full_attention"].theta, given["full_attention"]) == (2e5, True)
    assert (settings["sliding_attention"].theta, given["sliding_attention"]) == (5e5, False)
    (trap,) = [t for t in check_rope_config(raw, compare=False).traps if t.code == "theta_missing"]
    assert trap.layer_type == "sliding_attention"
    assert "rope_theta=200000 is not read for sliding_attention" in trap.message and "default 500000" in trap.message


def test_neomme_fills_in_a_partial_factor_per_layer_type():
    settings = {s.layer_type: s for s in read_rope_settings(_raw("neomme", "top_partial"))}
    assert {layer: (s.partial_rotary_factor, s.rotary_dim, s.theta) for layer, s in settings.items()} == {
        "full_attention": (0.25, 4, 1e6), "sliding_attention": (1.0, 16, 1e4)}  # fmt: skip


@pytest.mark.parametrize("model_type", CLASSES)
def test_default_layer_types_are_the_classes(model_type):
    for layers in (6, 11):
        raw = {**_raw(model_type, "bare"), "num_hidden_layers": layers}
        assert layer_pattern(raw, layers) == built(raw)[0].layer_types, (model_type, layers)


@pytest.mark.parametrize(("model_type", "head_dim"), [("gemma3n_text", 256), ("t5gemma2_text", 256), ("neomme", 64)])
def test_per_layer_classes_without_head_dim_take_the_class_default(model_type, head_dim):
    raw = _raw(model_type, "bare")
    del raw["head_dim"]
    settings = assert_posembed_is_the_model(raw)
    assert {s.head_dim for s in settings} == {head_dim}


@pytest.mark.parametrize("model_type", ["gemma3_text", "modernbert"])
def test_gemma3_and_modernbert_ignore_a_top_level_partial_factor(model_type):
    raw = {"model_type": model_type, **SHAPE, "partial_rotary_factor": 0.5, "cls_token_id": 1, "sep_token_id": 2}
    assert {s.rotary_dim for s in assert_posembed_is_the_model(raw)} == {16}
