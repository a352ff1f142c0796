"""A config that leaves a RoPE field out is read with what its transformers config class fills in.

transformers 5.23's config classes fill in their own ``default_theta`` (Cohere 5e5, GPT-OSS 1.5e5, PhiMoE 1e6, ...)
and ``partial_rotary_factor`` (GLM, Phi, GPT-NeoX), and give a config that states no RoPE field at all their
whole RoPE parameters (GPT-OSS: yarn; Laguna: one set per layer type). posembed's settings, its scheme, ``rope
check`` and the ``theta_missing`` trap follow them; each case is compared with the model's own rotary embedding.
"""

import copy
import sys

import pytest

from posembed.interop.rope.settings import ALL_LAYERS, has_rope, layer_parameters, layer_settings, read_rope_settings
from posembed.interop.rope_check.check import check_rope_config
from posembed.interop.rope_check.stated import stated_of
from tests.interop.transformers_rope import assert_posembed_is_the_model

transformers = pytest.importorskip("transformers")

SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 3, "head_dim": 16,
         "intermediate_size": 64, "vocab_size": 100, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
         "max_position_embeddings": 4096}  # fmt: skip
#: model type -> the rope_theta its config class fills in (transformers 5.23)
CLASS_DEFAULTS = {
    "llama": 1e4, "qwen2": 1e4, "mistral": 1e4, "mixtral": 1e6, "phimoe": 1e6, "cohere": 5e5, "gpt_oss": 1.5e5,
    "smollm3": 2e6, "helium": 1e5, "llama4_text": 5e5, "ernie4_5": 5e5, "apertus": 1.2e7,
}  # fmt: skip
#: the RoPE parameters without a theta, in both spellings
SPELLINGS = {
    "v5": {"rope_parameters": {"rope_type": "default"}},
    "v4": {"rope_scaling": {"type": "linear", "factor": 2.0}},
}
#: PhiMoE's class refuses a linear rope_scaling (it wants its own short / long mscale)
OMITTED = [(m, s) for m in CLASS_DEFAULTS for s in SPELLINGS if (m, s) != ("phimoe", "v4")]


@pytest.mark.parametrize(("model_type", "spelling"), OMITTED)
def test_an_omitted_theta_is_the_class_default(model_type, spelling):
    raw = {"model_type": model_type, **SHAPE, **copy.deepcopy(SPELLINGS[spelling])}
    (settings,) = assert_posembed_is_the_model(raw)
    assert (settings.theta, stated_of(raw, settings).theta_given) == (CLASS_DEFAULTS[model_type], False)


@pytest.mark.parametrize(
    ("model_type", "partial"), [("glm4", 0.5), ("phi", 0.5), ("stablelm", 0.25), ("gpt_neox", 0.25)]
)
def test_an_omitted_partial_rotary_factor_is_the_class_default(model_type, partial):
    raw = {"model_type": model_type, **SHAPE, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}
    (settings,) = assert_posembed_is_the_model(raw)
    assert (settings.partial_rotary_factor, settings.rotary_dim) == (partial, int(16 * partial))


#: model type -> {layer type: rope_type} its class gives a config with no RoPE field (and the theta of one)
BARE = {
    "llama": ({ALL_LAYERS: "default"}, 1e4), "qwen2": ({ALL_LAYERS: "default"}, 1e4),
    "mixtral": ({ALL_LAYERS: "default"}, 1e6), "gpt_oss": ({ALL_LAYERS: "yarn"}, 1.5e5),
    "ministral3": ({ALL_LAYERS: "yarn"}, 1e6), "apertus": ({ALL_LAYERS: "llama3"}, 1.2e7),
    "phi": ({ALL_LAYERS: "default"}, 1e4),
    "laguna": ({"full_attention": "default", "sliding_attention": "default"}, 5e5),
}  # fmt: skip


@pytest.mark.parametrize("model_type", BARE)
def test_a_config_without_rope_fields_has_its_class_rope(model_type):
    """A bare Llama / Qwen2 config builds a rotary model in transformers: posembed reads the class's parameters."""
    raw = {"model_type": model_type, **SHAPE}
    if model_type == "laguna":  # both layer types in use (posembed does not know Laguna's default layer_types)
        raw["layer_types"] = ["full_attention", "sliding_attention", "sliding_attention"]
    assert has_rope(raw)
    settings = assert_posembed_is_the_model(raw)
    types, theta = BARE[model_type]
    assert {s.layer_type: s.rope_type for s in settings} == types
    assert settings[0].theta == theta and not any(stated_of(raw, s).theta_given for s in settings)


def test_a_bare_config_keeps_its_own_partial_rotary_factor_and_non_rotary_ones_stay_so():
    raw = {"model_type": "phi", **SHAPE, "partial_rotary_factor": 0.75}
    (settings,) = assert_posembed_is_the_model(raw)
    assert settings.rotary_dim == 12
    for model_type in ("bert", "gpt2", "not_a_model_type"):
        assert not has_rope({"model_type": model_type, **SHAPE}), model_type
    with pytest.raises(ValueError, match="has no RoPE"):
        read_rope_settings({"model_type": "bert", **SHAPE})


def _missing(raw: dict) -> list:
    return [t for t in check_rope_config(raw, compare=False).traps if t.code == "theta_missing"]


def test_theta_missing_names_what_transformers_fills_in():
    (phimoe,) = _missing({"model_type": "phimoe", **SHAPE, **SPELLINGS["v5"]})
    assert phimoe.severity == "note" and "phimoe config class fills in 1e+06" in phimoe.message
    assert "a loader without that class would take 10000" in phimoe.message
    (llama,) = _missing({"model_type": "llama", **SHAPE, **SPELLINGS["v4"]})
    assert "llama config class fills in 10000" in llama.message and "loader" not in llama.message
    (qwen,) = _missing({"model_type": "qwen2", **SHAPE, **SPELLINGS["v5"]})
    assert qwen.severity == "warning" and "fills in 10000, but qwen2 checkpoints are trained with 1e+06" in qwen.message
    (bare,) = _missing({"model_type": "gpt_oss", **SHAPE})
    assert "states no RoPE field" in bare.message and "rope_type 'yarn' at rope_theta 150000" in bare.message
    (remote,) = _missing({"model_type": "my_remote_model", **SHAPE, **SPELLINGS["v5"]})
    assert "the default 10000 applies" in remote.message
    for trap in (phimoe, llama, qwen, bare, remote):
        assert "fall back" not in trap.message


@pytest.mark.slow
def test_the_parameters_are_the_config_objects_for_every_class():
    """Every config class of transformers that holds RoPE parameters when built bare: posembed's parameters per layer
    type are that object's (its rope_type and the theta it fills in), for each layer type posembed reads."""
    checked = 0
    for model_type, config_class in transformers.CONFIG_MAPPING.items():
        try:
            made = config_class()
        except Exception:  # noqa: BLE001 - classes that need arguments are not asked
            continue
        params = getattr(made, "rope_parameters", None)
        if not isinstance(params, dict) or not params:
            continue
        for layer, ours in layer_parameters({"model_type": model_type}).items():
            theirs = params if layer == ALL_LAYERS else params[layer]
            assert (ours["rope_type"], ours["rope_theta"]) == (theirs["rope_type"], theirs["rope_theta"]), (
                model_type,
                layer,
            )
        checked += 1
    assert checked > 200


def test_without_transformers_the_dict_is_read_as_written(monkeypatch):
    phimoe = {"model_type": "phimoe", **SHAPE, **SPELLINGS["v5"]}
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    assert layer_settings(copy.deepcopy(phimoe)).theta == 1e4  # no class to fill in its 1e6
    assert layer_settings({"model_type": "llama", **SHAPE, **SPELLINGS["v5"]}).theta == 1e4
    assert not has_rope({"model_type": "llama", **SHAPE})  # a bare config: no class to ask
    assert "the default 10000 applies" in _missing({"model_type": "llama", **SHAPE, **SPELLINGS["v5"]})[0].message
