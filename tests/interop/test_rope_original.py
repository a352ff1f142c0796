"""The pre-training length (``original_max_position_embeddings``) posembed reads is the one
transformers builds the model with, wherever a config states it: in the RoPE parameters, at the top
level, both (different), or neither (Phi-3's class default, else ``max_position_embeddings``).

transformers 5.23 standardises the RoPE parameters when the config is constructed and again in the
rope init functions when the model is built; by then every config holds a top-level value as an
attribute, which overwrites the parameters' one on flat yarn / llama3 / longrope parameters (PhiMoE
copies the parameters' value onto the attribute first; parameters per layer type only ever take
``setdefault``). The reference here is the model's own rotary embedding and the config object it
leaves behind.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import sys

import pytest
import torch

from posembed.interop.rope.config import rotary_from_settings
from posembed.interop.rope.settings import ALL_LAYERS, read_rope_settings
from posembed.interop.rope_check.check import check_rope_config, format_report
from posembed.interop.rope_check.stated import stated_of

transformers = pytest.importorskip("transformers")

MAX_POS, STATED, TOP = 32768, 1024, 2048
SHAPE = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
         "max_position_embeddings": MAX_POS}  # fmt: skip
LONGROPE = {"type": "longrope", "factor": 8.0, "short_factor": [1.0 + i / 64 for i in range(32)],
            "long_factor": [1.0 + i / 4 for i in range(32)]}  # fmt: skip
YARN = {"rope_type": "yarn", "factor": 8.0}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}

#: family -> (config without any original_max_position_embeddings, where the RoPE parameters sit, the
#: layer type that scales, the model's rotary embedding class)
FAMILIES = {
    "phi3_longrope": ({"model_type": "phi3", **SHAPE, "rope_theta": 1e4, "rope_scaling": LONGROPE},
                      ("rope_scaling",), ALL_LAYERS, "Phi3RotaryEmbedding"),
    "llama_yarn": ({"model_type": "llama", **SHAPE, "rope_parameters": {**YARN, "rope_theta": 1e4}},
                   ("rope_parameters",), ALL_LAYERS, "LlamaRotaryEmbedding"),
    "llama_llama3": ({"model_type": "llama", **SHAPE, "rope_theta": 5e5, "rope_scaling": LLAMA3},
                     ("rope_scaling",), ALL_LAYERS, "LlamaRotaryEmbedding"),
    "phimoe_longrope": ({"model_type": "phimoe", **SHAPE, "rope_theta": 1e4,
                         "rope_scaling": {**LONGROPE, "short_mscale": 1.0, "long_mscale": 1.0}},
                        ("rope_scaling",), ALL_LAYERS, "PhimoeRotaryEmbedding"),
    "gemma3_nested_yarn": ({"model_type": "gemma3_text", **SHAPE, "head_dim": 64,
                            "layer_types": ["full_attention", "sliding_attention"],
                            "rope_parameters": {"full_attention": {**YARN, "rope_theta": 1e6},
                                                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
                           ("rope_parameters", "full_attention"), "full_attention", "Gemma3RotaryEmbedding"),
}  # fmt: skip
#: where the config states the length -> (in the parameters, at the top level)
PLACES = {"params": (STATED, None), "top": (None, TOP), "both": (STATED, TOP), "neither": (None, None)}
#: (family, place) -> (the length the model is built with, where posembed says it comes from)
EXPECTED = {
    ("phi3_longrope", "params"): (4096, "class default"),  # Phi3Config declares the field: its default wins
    ("phi3_longrope", "top"): (TOP, "top level"),
    ("phi3_longrope", "both"): (TOP, "top level"),
    ("phi3_longrope", "neither"): (4096, "class default"),
    ("phimoe_longrope", "params"): (STATED, "parameters"),  # PhiMoE copies the parameters' value onto the attribute
    ("phimoe_longrope", "top"): (MAX_POS, "max_position_embeddings"),
    ("phimoe_longrope", "both"): (STATED, "parameters"),
    ("phimoe_longrope", "neither"): (MAX_POS, "max_position_embeddings"),
    ("gemma3_nested_yarn", "params"): (STATED, "parameters"),  # per layer type: setdefault only
    ("gemma3_nested_yarn", "top"): (MAX_POS, "max_position_embeddings"),
    ("gemma3_nested_yarn", "both"): (STATED, "parameters"),
    ("gemma3_nested_yarn", "neither"): (MAX_POS, "max_position_embeddings"),
}  # fmt: skip
for _family in ("llama_yarn", "llama_llama3"):  # the top-level attribute wins once the model is built
    EXPECTED.update({(_family, "params"): (STATED, "parameters"), (_family, "top"): (TOP, "top level"),
                     (_family, "both"): (TOP, "top level"),
                     (_family, "neither"): (MAX_POS, "max_position_embeddings")})  # fmt: skip
CASES = [(family, place) for family in FAMILIES for place in PLACES]
#: families whose model cos/sin posembed's scheme reproduces (PhiMoE's forward keeps short_factor and multiplies by
#: short_mscale / long_mscale instead, which the check compares with; Gemma 3's takes a layer type)
SAME_COS_SIN = ("phi3_longrope", "llama_yarn", "llama_llama3")


def _config(family: str, place: str) -> dict:
    raw, path, _, _ = FAMILIES[family]
    raw = copy.deepcopy(raw)
    stated, top = PLACES[place]
    params = raw
    for key in path:
        params = params[key]
    if stated is not None:
        params["original_max_position_embeddings"] = stated
    if top is not None:
        raw["original_max_position_embeddings"] = top
    return raw


def _built(raw: dict):
    """transformers' config object after its model's rotary embedding is built (which edits it), and that embedding."""
    config = transformers.CONFIG_MAPPING[raw["model_type"]].from_dict(copy.deepcopy(raw))  # from_dict edits its dict
    family = next(name for name, spec in FAMILIES.items() if spec[0]["model_type"] == raw["model_type"])
    module = importlib.import_module(type(config).__module__.replace("configuration_", "modeling_"))
    return config, getattr(module, FAMILIES[family][3])(config)


def _settings(raw: dict, layer: str):
    (found,) = [s for s in read_rope_settings(raw) if s.layer_type == layer]
    return found


@pytest.mark.parametrize("family, place", CASES)
def test_settings_take_the_length_transformers_builds_the_model_with(family, place):
    raw = _config(family, place)
    config, _ = _built(raw)
    layer = FAMILIES[family][2]
    params = config.rope_parameters if layer == ALL_LAYERS else config.rope_parameters[layer]
    s = _settings(raw, layer)
    assert s.original_max_len == params["original_max_position_embeddings"]
    given = stated_of(raw, s)
    assert (s.original_max_len, given.original_source) == EXPECTED[family, place]
    assert given.original_given == (
        given.original_source in ("parameters", "top level")
    )  # not 1024 overwritten by 4096
    from_object = _settings(dict(config.to_dict()), layer)  # the object posembed is handed reads the same
    assert from_object.original_max_len == s.original_max_len


@pytest.mark.parametrize("family, place", CASES)
def test_check_agrees_with_transformers(family, place):
    raw = _config(family, place)
    report = check_rope_config(raw)
    assert raw == _config(family, place), "the check must not edit the config it is given"
    for layer in report.layers:
        assert layer.comparisons, layer.comparison_note
        if family == "phimoe_longrope":  # the check compares with PhiMoE's forward: short_factor at every length
            assert [c.seq_len for c in layer.comparisons][0] == layer.settings.original_max_len
            assert [c.transformers_attention_factor for c in layer.comparisons] == pytest.approx(
                [1.0, 1.0]
            )  # the mscales
            assert "mscale_forward" in {t.code for t in report.traps}  # posembed reads that forward: equal below
        assert all(c.equal for c in layer.comparisons), format_report(report)
    if family in SAME_COS_SIN:  # the model's own cos/sin at a length past every switch point
        scheme = rotary_from_settings(_settings(raw, ALL_LAYERS), angles="fp32")
        _, embedding = _built(raw)
        x = torch.zeros(1, 1, 64)
        positions = torch.arange(MAX_POS // 4)[None]
        cos, sin = embedding(x, positions)
        ours_cos, ours_sin = scheme.cos_sin(positions[0])  # (T, D/2): transformers repeats it over both halves
        torch.testing.assert_close(ours_cos.float(), cos[0, :, :32].float(), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(ours_sin.float(), sin[0, :, :32].float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", ["phi3_longrope", "llama_yarn", "llama_llama3"])
def test_the_two_lengths_give_different_frequencies(family):
    """The conflicting values matter: a scheme built from the other one differs (so the tests above can fail)."""
    s = _settings(_config(family, "both"), ALL_LAYERS)
    other = dataclasses.replace(s, original_max_len=STATED)
    positions = torch.arange(3 * TOP)
    assert not torch.allclose(
        rotary_from_settings(s).cos_sin(positions)[0], rotary_from_settings(other).cos_sin(positions)[0]
    )


def test_llama_top_level_wins_only_once_the_model_is_built():
    """The transformers behaviour the rule rests on: LlamaConfig keeps the parameters' value until the
    rope init function standardises again, with the top-level attribute set."""
    raw = _config("llama_yarn", "both")
    config = transformers.LlamaConfig.from_dict(copy.deepcopy(raw))
    assert config.rope_parameters["original_max_position_embeddings"] == STATED
    assert config.original_max_position_embeddings == TOP
    transformers.models.llama.modeling_llama.LlamaRotaryEmbedding(config)
    assert config.rope_parameters["original_max_position_embeddings"] == TOP


def test_traps_name_the_length_transformers_uses():
    def trap(family, place, code):
        report = check_rope_config(_config(family, place), compare=False)
        return [t for t in report.traps if t.code == code and "LongRoPE factor" not in t.message]

    (conflict,) = trap("phi3_longrope", "both", "original_inconsistent")
    assert f"builds the model with the top-level {TOP}" in conflict.message
    (conflict,) = trap("llama_yarn", "both", "original_inconsistent")
    assert f"builds the model with the top-level {TOP}" in conflict.message
    (conflict,) = trap("phimoe_longrope", "both", "original_inconsistent")
    assert f"reads the RoPE parameters' {STATED} and ignores the top-level one" in conflict.message
    (missing,) = trap("phi3_longrope", "neither", "original_missing")
    assert "phi3 config class fills in its default 4096" in missing.message
    (overwritten,) = trap("phi3_longrope", "params", "original_inconsistent")
    assert f"is {STATED} in the RoPE parameters" in overwritten.message and "its default 4096" in overwritten.message
    assert not trap("phi3_longrope", "params", "original_missing")
    same = _config("phi3_longrope", "neither")
    same["rope_scaling"]["original_max_position_embeddings"] = 4096  # the parameters' value is the one used
    assert stated_of(same, _settings(same, ALL_LAYERS)).original_given
    assert not {"original_missing", "original_inconsistent"} & {
        t.code for t in check_rope_config(same, compare=False).traps if "LongRoPE factor" not in t.message
    }
    (missing,) = trap("gemma3_nested_yarn", "top", "original_missing")
    assert f"ignores the top-level {TOP} for parameters per layer type" in missing.message
    assert f"max_position_embeddings={MAX_POS}" in missing.message
    assert not trap("llama_yarn", "top", "original_missing")  # the top-level value is the one used
    (switch,) = trap("phi3_longrope", "both", "longrope_switch")
    assert f"at most {TOP} " in switch.message


def test_without_transformers_no_class_default_is_known(monkeypatch):
    """Without transformers the dict is read as written: Phi-3's declared default 4096 is not known, the top-level
    length wins on flat parameters, else the parameters', else max_position_embeddings."""
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    expected = {"params": (STATED, "parameters"), "top": (TOP, "top level"), "both": (TOP, "top level"),
                "neither": (MAX_POS, "max_position_embeddings")}  # fmt: skip
    for place, found in expected.items():
        raw = _config("phi3_longrope", place)
        s = _settings(raw, ALL_LAYERS)
        assert (s.original_max_len, stated_of(raw, s).original_source, s.known) == (*found, False), place
