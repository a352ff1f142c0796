"""The config classes' own RoPE rules of transformers 5.23, against the model's own rotary embedding.

Each family builds the transformers config from the dict (``from_dict``, which edits the dict it is
given: deep copies here), then the model's rotary embedding, and compares every layer type it builds
(inv_freq, attention scaling and the cos / sin of ``forward`` past every switch point) with posembed's
settings and scheme:

- ModernBERT and Gemma 3 always nest their parameters: a 4.x ``rope_scaling`` goes into every layer
  type (ModernBERT) or full attention only (Gemma 3), over ``rope_type: "default"`` (an old ``type``
  key never counts), each layer type's theta from the class's own fields and defaults;
- Phi-3 (and Phi-4-multimodal) read the old rope types ``su`` / ``yarn`` as longrope;
- only the keys the config's layer types name are per layer type (none for a class without
  ``layer_types``); other dicts are ignored;
- PhiMoE's forward uses short_factor at every length and short_mscale / long_mscale: the check compares
  with that forward, and says where posembed's LongRoPE differs.
"""

from __future__ import annotations

import copy
import sys

import pytest
import torch

from posembed.interop.rope.config import rotary_from_hf_config, rotary_from_settings
from posembed.interop.rope.settings import ALL_LAYERS, read_rope_settings
from posembed.interop.rope_check.check import check_rope_config, format_report
from posembed.interop.rope_check.stated import ignored_parameters, stated_of
from tests.interop.transformers_rope import assert_posembed_is_the_model, built

transformers = pytest.importorskip("transformers")

SHAPE = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 3,
    "intermediate_size": 64,
    "vocab_size": 100,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
LONGROPE = {"short_factor": [1.0 + i / 16 for i in range(8)], "long_factor": [2.0 + i for i in range(8)]}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
LINEAR = {"rope_type": "linear", "factor": 2.0}
MODERNBERT = {
    "model_type": "modernbert",
    **SHAPE,
    "cls_token_id": 1,
    "sep_token_id": 2,
    "max_position_embeddings": 4096,
}
GEMMA3 = {"model_type": "gemma3_text", **SHAPE, "head_dim": 16, "max_position_embeddings": 4096}
PHI3 = {"model_type": "phi3", **SHAPE, "max_position_embeddings": 131072, "rope_theta": 1e4}
LLAMA = {"model_type": "llama", **SHAPE, "max_position_embeddings": 4096}


def _assert_model(raw: dict, lengths: tuple[int, ...] = (64,)) -> None:
    """As :func:`assert_posembed_is_the_model`, with cos / sin at ``lengths`` (and no alias: some cases refuse it)."""
    assert_posembed_is_the_model(raw, lengths, alias=False)


#: ModernBERT's and Gemma 3's config classes nest every spelling; each case: (config, {layer type: rope_type, theta})
PER_LAYER = {
    "modernbert_v4_scaling_both_layers": (
        {**MODERNBERT, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "rope_scaling": dict(LINEAR)},
        {"full_attention": ("linear", 160000.0), "sliding_attention": ("linear", 10000.0)}),
    "modernbert_v4_yarn_no_local_theta": (
        {**MODERNBERT, "global_rope_theta": 80000.0, "rope_scaling": dict(YARN)},
        {"full_attention": ("yarn", 80000.0), "sliding_attention": ("yarn", 10000.0)}),
    "modernbert_v4_class_default_thetas": (
        {**MODERNBERT, "rope_scaling": dict(LINEAR)},
        {"full_attention": ("linear", 160000.0), "sliding_attention": ("linear", 10000.0)}),
    "modernbert_v4_theta_inside_scaling": (
        {**MODERNBERT, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
         "rope_scaling": {**LINEAR, "rope_theta": 5e4}},
        {"full_attention": ("linear", 5e4), "sliding_attention": ("linear", 5e4)}),
    "modernbert_v4_top_level_theta_ignored": (
        {**MODERNBERT, "rope_theta": 5e4},
        {"full_attention": ("default", 160000.0), "sliding_attention": ("default", 10000.0)}),
    "modernbert_v4_old_type_key_ignored": (
        {**MODERNBERT, "global_rope_theta": 160000.0, "rope_scaling": {"type": "linear", "factor": 2.0}},
        {"full_attention": ("default", 160000.0), "sliding_attention": ("default", 10000.0)}),
    "modernbert_v5_one_layer_type_given": (
        {**MODERNBERT, "rope_parameters": {"full_attention": {**LINEAR, "rope_theta": 1e5}}},
        {"full_attention": ("linear", 1e5), "sliding_attention": ("default", 10000.0)}),
    "modernbert_decoder_v4_scaling": (
        {**MODERNBERT, "model_type": "modernbert-decoder", "global_rope_theta": 160000.0, "rope_scaling": dict(LINEAR)},
        {"full_attention": ("linear", 160000.0), "sliding_attention": ("linear", 10000.0)}),
    "gemma3_v4_no_local_theta": (
        {**GEMMA3, "layer_types": ["sliding_attention", "sliding_attention", "full_attention"], "rope_theta": 5e5,
         "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
        {"full_attention": ("linear", 5e5), "sliding_attention": ("default", 10000.0)}),
    "gemma3_v4_old_type_key_ignored": (
        {**GEMMA3, "layer_types": ["sliding_attention", "full_attention", "full_attention"], "rope_theta": 5e5,
         "rope_local_base_freq": 1e4, "rope_scaling": {"type": "linear", "factor": 8.0}},
        {"full_attention": ("default", 5e5), "sliding_attention": ("default", 10000.0)}),
    "gemma3_default_layer_types_all_sliding": (  # 3 layers, every 6th full: no full-attention layer to build
        {**GEMMA3, "rope_parameters": {"full_attention": {**LINEAR, "rope_theta": 1e6},
                                       "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
        {"sliding_attention": ("default", 10000.0)}),
    "gemma3_default_layer_types_pattern": (
        {**GEMMA3, "sliding_window_pattern": 3, "rope_scaling": dict(LINEAR)},
        {"full_attention": ("linear", 1e6), "sliding_attention": ("default", 10000.0)}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PER_LAYER))
def test_per_layer_classes_equal_the_model(name):
    raw, expected = PER_LAYER[name]
    settings = {s.layer_type: (s.rope_type, s.theta) for s in read_rope_settings(copy.deepcopy(raw))}
    assert settings == expected
    _assert_model(raw, lengths=(64, 4096))


def test_per_layer_class_traps():
    def traps(name):
        return {t.code: t for t in check_rope_config(PER_LAYER[name][0], compare=False).traps}

    ignored = traps("modernbert_v4_old_type_key_ignored")["type_ignored"]
    assert (
        "'type' ('linear') beside rope_type 'default'" in ignored.message
        and "merges a 4.x rope_scaling" in ignored.message
    )
    default = traps("modernbert_v4_class_default_thetas")["theta_missing"]
    assert default.severity == "note" and "fills in 160000 for full_attention" in default.message
    assert "type_ignored" not in traps("modernbert_v4_scaling_both_layers")


#: Phi-3's old rope type names -> longrope; each case: (rope parameters, where they sit)
PHI3_OLD = {
    "type_yarn": ({"type": "yarn", **LONGROPE, "factor": 32.0}, "rope_scaling"),
    "rope_type_yarn_no_factor": ({"rope_type": "yarn", **LONGROPE}, "rope_scaling"),
    "type_su_with_original": ({"type": "su", **LONGROPE, "original_max_position_embeddings": 2048}, "rope_scaling"),
    "v5_rope_type_yarn": ({"rope_type": "yarn", **LONGROPE, "rope_theta": 1e4}, "rope_parameters"),
    "type_su_top_level_wins": ({"type": "su", **LONGROPE, "original_max_position_embeddings": 2048}, "top"),
}


@pytest.mark.parametrize("name", sorted(PHI3_OLD))
def test_phi3_old_rope_types_are_longrope(name):
    params, where = PHI3_OLD[name]
    raw = {**PHI3, "rope_scaling" if where == "top" else where: copy.deepcopy(params)}
    if where == "top":
        raw["original_max_position_embeddings"] = 8192
    (s,) = read_rope_settings(copy.deepcopy(raw))
    config, _ = built(raw)
    assert (s.rope_type, s.original_max_len) == ("longrope", config.rope_parameters["original_max_position_embeddings"])
    assert config.rope_parameters["rope_type"] == "longrope"
    _assert_model(raw, lengths=(64, s.original_max_len + 1))
    (trap,) = [t for t in check_rope_config(raw, compare=False).traps if t.code == "renamed_longrope"]
    assert trap.severity == "note" and "renames it longrope" in trap.message


def test_phi3_su_without_original_cannot_be_loaded():
    """Phi3Config renames 'su' after standardising, which fills in the length for yarn/llama3/longrope only: the class
    refuses the config, so the check says transformers cannot load it and posembed reads the dict as written."""
    raw = {**PHI3, "original_max_position_embeddings": 4096, "rope_scaling": {"type": "su", **LONGROPE}}
    with pytest.raises(KeyError, match="original_max_position_embeddings"):
        built(raw)
    report = check_rope_config(raw)
    (trap,) = [t for t in report.traps if t.code == "config_refused"]
    assert trap.severity == "error" and "phi3 config class refuses this config (KeyError" in trap.message
    assert report.layers[0].settings.rope_type == "su" and not report.layers[0].settings.known
    assert report.layers[0].scheme is None and not report.ok
    with pytest.raises(ValueError, match="unknown rope_type 'su'"):
        rotary_from_hf_config(raw)


def test_phi4_multimodal_renames_too():
    raw = {**PHI3, "model_type": "phi4_multimodal", "rope_scaling": {"type": "yarn", **LONGROPE}}
    (s,) = read_rope_settings(raw)
    config, _ = built(raw)
    assert s.rope_type == config.rope_parameters["rope_type"] == "longrope"
    llama = {**LLAMA, "rope_scaling": {"type": "yarn", "factor": 4.0}}  # other families keep YaRN
    assert read_rope_settings(llama)[0].rope_type == "yarn" == built(llama)[0].rope_parameters["rope_type"]


#: which keys are per layer type; each case: (config, the layer types the model builds, the keys transformers ignores)
LAYER_TYPES = {
    "llama_nested_without_layer_types": (
        {**LLAMA, "rope_parameters": {"full_attention": {**LINEAR, "rope_theta": 1e6}}},
        {ALL_LAYERS}, ("full_attention",)),
    "llama_layer_types_not_a_field": (  # LlamaConfig sets layer_types only after standardising the parameters
        {**LLAMA, "layer_types": ["full_attention"] * 3, "rope_theta": 5e5,
         "rope_parameters": {"full_attention": {**LINEAR, "rope_theta": 1e6}}}, {ALL_LAYERS}, ("full_attention",)),
    "gemma3_layer_types_name_one": (
        {**GEMMA3, "layer_types": ["sliding_attention"] * 3,
         "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                             "full_attention": {**LINEAR, "rope_theta": 1e6}}}, {"sliding_attention"}, ()),
    "gemma3_flat_fields_beside_layer_types": (
        {**GEMMA3, "layer_types": ["sliding_attention", "full_attention", "full_attention"],
         "rope_parameters": {**LINEAR, "rope_theta": 1e5, "full_attention": {**LINEAR, "rope_theta": 1e6}}},
        {"sliding_attention", "full_attention"}, ("rope_type", "factor", "rope_theta")),
    "gemma3_extra_layer_type": (
        {**GEMMA3, "layer_types": ["sliding_attention", "full_attention", "full_attention"],
         "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                             "full_attention": {**LINEAR, "rope_theta": 1e6},
                             "chunked_attention": {"rope_theta": 3.0}}},
        {"sliding_attention", "full_attention"}, ("chunked_attention",)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LAYER_TYPES))
def test_only_the_configs_layer_types_are_per_layer(name):
    raw, layers, ignored = LAYER_TYPES[name]
    assert {s.layer_type for s in read_rope_settings(copy.deepcopy(raw))} == layers
    assert ignored_parameters(raw) == ignored
    _assert_model(raw, lengths=(64, 4096))
    traps = [t for t in check_rope_config(raw, compare=False).traps if t.code == "parameters_ignored"]
    assert [t.severity for t in traps] == (["warning"] if ignored else [])
    if layers == {ALL_LAYERS}:  # the builder refuses to build plain RoPE from what the config nests
        assert "ignores full_attention and builds default RoPE" in traps[0].message
        with pytest.raises(ValueError, match="nested by layer type \\(full_attention\\), but .*ignores those dicts"):
            rotary_from_hf_config(raw)


def test_unknown_model_types_take_every_dict_as_a_layer_type():
    nested = {"full_attention": {**LINEAR, "rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}}
    raw = {"hidden_size": 64, "num_attention_heads": 4, "rope_parameters": nested}
    assert {s.layer_type for s in read_rope_settings(raw)} == {"full_attention", "sliding_attention"}
    assert {s.layer_type for s in read_rope_settings({**raw, "layer_types": ["sliding_attention"]})} == {
        "sliding_attention"
    }
    with pytest.raises(ValueError, match="mixes per-layer-type dicts"):
        read_rope_settings({**raw, "rope_parameters": {**nested, "rope_theta": 1e4}})


def test_rope_type_labels_win():
    """A class's ``_rope_type_labels`` (LFM3) name its layer types, whatever ``layer_types`` says."""
    raw = {
        "model_type": "lfm3",
        **SHAPE,
        "layer_types": ["full_attention"] * 3,
        "rope_parameters": {"full_attention": {"rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}},
    }
    config = transformers.CONFIG_MAPPING["lfm3"].from_dict(copy.deepcopy(raw))
    assert config.nested_rope_parameter_keys(config.rope_parameters) == [s.layer_type for s in read_rope_settings(raw)]


#: PhiMoE: (short_mscale, long_mscale, long_factor) -> whether posembed equals the model at (short, long): its forward
#: folds in the mscales and keeps short_factor, which posembed reads from it (forward_mscale), so at both lengths
PHIMOE_SHORT = LONGROPE["short_factor"]
PHIMOE = {
    "phi35_moe_like": (1.2431631, 1.2431631, LONGROPE["long_factor"], (True, True)),
    "mscale_is_the_attention_factor_but_long_factors": (
        1.1902380714238083, 1.1902380714238083, LONGROPE["long_factor"], (True, True)),
    "no_difference": (1.1902380714238083, 1.1902380714238083, PHIMOE_SHORT, (True, True)),
    "mscales_differ": (1.1902380714238083, 1.3, PHIMOE_SHORT, (True, True)),
}  # fmt: skip


def _phimoe(short_mscale, long_mscale, long_factor) -> dict:
    return {"model_type": "phimoe", **SHAPE, "max_position_embeddings": 131072, "rope_theta": 1e4,
            "rope_scaling": {"rope_type": "longrope", "short_factor": PHIMOE_SHORT, "long_factor": long_factor,
                             "short_mscale": short_mscale, "long_mscale": long_mscale,
                             "original_max_position_embeddings": 4096}}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PHIMOE))
def test_phimoe_check_compares_with_the_models_forward(name):
    *scales, equal = PHIMOE[name]
    raw = _phimoe(*scales)
    _, embedding = built(raw)
    (s,) = read_rope_settings(raw)
    scheme = rotary_from_settings(s, angles="fp32")
    report = check_rope_config(raw)
    (layer,) = report.layers
    assert [c.seq_len for c in layer.comparisons] == [4096, 131072]  # the switch, and the effective context
    assert "Phimoe" in layer.comparison_note and "cos / sin" in layer.comparison_note
    for comparison, length, expected in zip(layer.comparisons, (4096, 131072), equal):
        positions = torch.arange(length)[None]
        cos, sin = embedding(torch.zeros(1, 1, 16), positions)  # (1, T, D): the model's own forward
        our_cos, our_sin = scheme.cos_sin(positions[0])
        same = torch.allclose(our_cos, cos[0, :, :8].float(), rtol=1e-5, atol=1e-5) and torch.allclose(
            our_sin, sin[0, :, :8].float(), rtol=1e-5, atol=1e-5)  # fmt: skip
        assert same == comparison.equal == expected, (length, format_report(report))
        model_scale = float(torch.hypot(cos[0, 1, :8].double(), sin[0, 1, :8].double()).mean())
        assert comparison.transformers_attention_factor == pytest.approx(model_scale, rel=1e-6)
        assert comparison.transformers_attention_factor == pytest.approx(scales[length > 4096], rel=1e-6)
    (trap,) = [t for t in report.traps if t.code == "mscale_forward"]
    assert trap.severity == "warning" and "always takes short_factor, never long_factor" in trap.message
    assert f"short_mscale={scales[0]}" in trap.message and "original_max_position_embeddings=4096" in trap.message
    assert not report.ok


def test_phimoe_default_rope_has_no_trap():
    raw = {"model_type": "phimoe", **SHAPE, "max_position_embeddings": 4096, "rope_theta": 1e4}
    report = check_rope_config(raw)
    assert "mscale_forward" not in {t.code for t in report.traps}
    assert report.layers[0].comparisons[0].equal


def test_without_transformers_the_dict_is_read_as_written(monkeypatch):
    """Without transformers no class is asked: ModernBERT's 4.x theta fields are still per layer type as written,
    Phi-3's old name stays (no class renames it), and every dict of a nested config is a layer type."""
    modernbert = PER_LAYER["modernbert_v4_scaling_both_layers"][0]
    phi3 = {**PHI3, "rope_scaling": {"type": "yarn", **LONGROPE}}
    nested = {**LLAMA, "rope_parameters": {"full_attention": {**LINEAR, "rope_theta": 1e6}}}
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    settings = {s.layer_type: (s.rope_type, s.theta, s.known) for s in read_rope_settings(copy.deepcopy(modernbert))}
    assert settings == {"full_attention": ("linear", 160000.0, False), "sliding_attention": ("linear", 10000.0, False)}
    (s,) = read_rope_settings(copy.deepcopy(phi3))
    assert s.rope_type == "yarn" and (s.original_max_len, stated_of(phi3, s).original_source) == (
        131072,
        "max_position_embeddings",
    )
    assert [s.layer_type for s in read_rope_settings(nested)] == ["full_attention"]
