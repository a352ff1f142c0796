"""posembed.interop.rope.settings is the one reader of a config's RoPE: the scheme builder
(``rotary_from_hf_config``), the zoo and ``posembed rope check``
all see the same :class:`RopeSettings`, and a malformed config gets the same error from each.
"""

import json

import pytest

from posembed.interop.rope.config import rope_parameters, rotary_from_hf_config, rotary_from_settings
from posembed.interop.rope.settings import ALL_LAYERS, layer_parameters, layer_settings, read_rope_settings
from posembed.interop.rope_check.check import check_rope_config
from posembed.interop.rope_check.stated import stated_of
from posembed.interop.zoo import zoo_schemes

SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 3}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}  # fmt: skip
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
LONGROPE = {"rope_type": "longrope", "short_factor": [1.0 + i / 8 for i in range(8)],
            "long_factor": [2.0 + i for i in range(8)]}  # fmt: skip

#: name -> config dict; each spelling of the same model in both the 4.x and the 5.x form where both exist
CONFIGS = {
    "llama3_v5": {"model_type": "llama", **SHAPE, "max_position_embeddings": 131072,
                  "rope_parameters": {**LLAMA3, "rope_theta": 500000.0}},
    "llama3_v4": {"model_type": "llama", **SHAPE, "max_position_embeddings": 131072, "rope_theta": 500000.0,
                  "rope_scaling": dict(LLAMA3)},
    "yarn_v4_type": {"model_type": "qwen2", **SHAPE, "max_position_embeddings": 16384, "rope_theta": 1e6,
                     "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}},
    "yarn_v5": {"model_type": "qwen2", **SHAPE, "max_position_embeddings": 16384,
                "rope_parameters": {**YARN, "rope_theta": 1e6}},
    "longrope_phi3": {"model_type": "phi3", **SHAPE, "max_position_embeddings": 131072,
                      "original_max_position_embeddings": 4096, "rope_theta": 10000.0, "rope_scaling": LONGROPE},
    "dynamic": {"model_type": "llama", **SHAPE, "max_position_embeddings": 2048,
                "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}},
    "linear_v4": {"model_type": "llama", **SHAPE, "max_position_embeddings": 4096, "rope_theta": 10000.0,
                  "rope_scaling": {"type": "linear", "factor": 2.0}},
    "linear_top_theta": {"model_type": "llama", **SHAPE, "max_position_embeddings": 4096, "rope_theta": 5e5,
                         "rope_parameters": {"rope_type": "linear", "factor": 2.0}},
    "gemma3_v5": {"model_type": "gemma3_text", **SHAPE, "head_dim": 16, "max_position_embeddings": 4096,
                  "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
                  "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}},
    "gemma3_v4": {"model_type": "gemma3_text", **SHAPE, "head_dim": 16, "max_position_embeddings": 4096,
                  "sliding_window_pattern": 3, "rope_theta": 1e6, "rope_local_base_freq": 10000.0,
                  "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
    "modernbert_v4": {"model_type": "modernbert", **SHAPE, "max_position_embeddings": 8192,
                      "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0},
    "modernbert_v5": {"model_type": "modernbert", **SHAPE, "max_position_embeddings": 8192,
                      "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
                      "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    "gpt_neox_v4": {"model_type": "gpt_neox", **SHAPE, "max_position_embeddings": 2048, "rotary_pct": 0.25,
                    "rotary_emb_base": 10000},
}  # fmt: skip


def _layer_type(layer: str) -> str | None:
    return None if layer == ALL_LAYERS else layer


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_settings_are_the_models_own(name):
    """Each layer type's frequencies and attention factor (and cos / sin at lengths inside and past the trained
    context) are those of the model's own transformers rotary embedding, and rope check finds every comparison
    equal: the reader is checked against transformers, not against itself."""
    pytest.importorskip("transformers")
    from tests.interop.transformers_rope import assert_posembed_is_the_model

    settings = assert_posembed_is_the_model(CONFIGS[name], lengths=(8, 300))
    assert {s.layer_type for s in settings} == {
        layer.settings.layer_type for layer in check_rope_config(CONFIGS[name]).layers
    }


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_builder_check_and_zoo_see_the_same_settings(name, tmp_path):
    config = CONFIGS[name]
    (tmp_path / "config.json").write_text(json.dumps(config))
    report = check_rope_config(config, compare=False)  # the reader's consumers agree; transformers: the test above
    assert [layer.settings for layer in check_rope_config(tmp_path, compare=False).layers] == [
        layer.settings for layer in report.layers
    ]
    for layer in report.layers:
        settings = layer.settings
        for form in (config, tmp_path):
            assert layer_settings(form, _layer_type(settings.layer_type)) == settings, form
        scheme = rotary_from_hf_config(config, layer_type=_layer_type(settings.layer_type), layout=settings.layout)
        assert type(scheme).__name__ == layer.scheme
        assert (scheme.base, scheme.rotary_dim, scheme.layout) == (settings.theta, settings.rotary_dim, settings.layout)
        assert rope_parameters(config, _layer_type(settings.layer_type)) == settings.params
        built = rotary_from_settings(settings, layout=settings.layout)
        assert repr(built) == repr(scheme)
    if config["model_type"] in ("llama", "gemma3_text", "modernbert", "gpt_neox"):
        thetas = {layer.settings.layer_type: layer.settings.theta for layer in report.layers}
        bases = {scheme.base for scheme in zoo_schemes(config)}
        assert bases == set(thetas.values())


@pytest.mark.parametrize(
    ("old", "new"),
    [("llama3_v4", "llama3_v5"), ("gemma3_v4", "gemma3_v5"), ("modernbert_v4", "modernbert_v5")],
)
def test_both_spellings_read_alike(old, new):
    def by_layer(name):
        return {s.layer_type: s for s in read_rope_settings(CONFIGS[name])}

    assert by_layer(old) == by_layer(new)


def test_spellings_that_one_reader_alone_used_to_know():
    # top-level rope_theta beside 5.x rope_parameters: the check saw 10000, the builder 5e5 (transformers: 5e5)
    top = layer_settings(CONFIGS["linear_top_theta"])
    assert (top.theta, stated_of(CONFIGS["linear_top_theta"], top).theta_given) == (5e5, True)
    traps = check_rope_config(CONFIGS["linear_top_theta"], compare=False).traps
    assert "theta_missing" not in {t.code for t in traps}
    # GPT-NeoX 4.x: rotary_pct and rotary_emb_base, which the builder ignored
    neox = rotary_from_hf_config(CONFIGS["gpt_neox_v4"])
    assert (neox.rotary_dim, neox.head_dim) == (4, 16)
    # Gemma 3 4.x: the builder now sees the two layer types too
    with pytest.raises(
        ValueError, match=r"nested by layer type \(sliding_attention, full_attention\)"
    ):  # Gemma3TextConfig's order
        rotary_from_hf_config(CONFIGS["gemma3_v4"])
    assert rotary_from_hf_config(CONFIGS["gemma3_v4"], layer_type="sliding_attention").base == 10000.0


def test_agrees_with_transformers_where_a_reader_used_to_differ():
    pytest.importorskip("transformers")
    for name in ("linear_top_theta", "gpt_neox_v4"):
        report = check_rope_config(CONFIGS[name])
        assert report.layers[0].comparisons and all(c.equal for c in report.layers[0].comparisons), name


MALFORMED = {
    "parameters_not_a_dict": ({"rope_parameters": [10000.0, 2.0]},
                              "config.rope_parameters must be a dict, got list"),
    "scaling_not_a_dict": ({"rope_theta": 1e4, "rope_scaling": "linear"},
                           "config.rope_scaling must be a dict, got str"),
    "theta_not_a_number": ({"rope_parameters": {"rope_type": "default", "rope_theta": "fast"}},
                           "the rope_theta of the config must be a number, got 'fast'"),
    "top_theta_not_a_number": ({"rope_theta": [1e4]}, "the rope_theta of the config must be a number, got [10000.0]"),
    "layer_theta_not_a_number": ({"model_type": "gemma3_text", "layer_types": ["full_attention"],
                                  "rope_parameters": {"full_attention": {"rope_theta": "x"}}},
                                 "the rope_theta of layer type 'full_attention' must be a number, got 'x'"),
    "layer_falls_back_on_a_bad_top_theta": (  # Gemma3TextConfig gives full attention the top-level rope_theta
        {"model_type": "gemma3_text", "layer_types": ["full_attention"],
         "rope_parameters": {"full_attention": {"rope_theta": None}}, "rope_theta": "1e6x"},
        "the rope_theta of layer type 'full_attention' must be a number, got '1e6x'"),
    "sliding_theta_not_a_number": ({"model_type": "gemma3_text", "rope_theta": 1e6, "rope_local_base_freq": "local"},
                                   "the rope_theta of layer type 'sliding_attention' must be a number, got 'local'"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_config_gets_one_error_from_the_one_reader(name):
    fields, message = MALFORMED[name]
    config = {"model_type": "llama", **SHAPE, "max_position_embeddings": 64, **fields}
    with pytest.raises(ValueError) as reader:
        layer_parameters(config)
    assert str(reader.value).startswith(message)
    consumers = {
        "check": lambda: check_rope_config(config, compare=False),
        "builder": lambda: rotary_from_hf_config(config, layer_type=None),
        "rotary_from_hf_config": lambda: rotary_from_hf_config(config),
        "rope_parameters": lambda: rope_parameters(config),
        "zoo": lambda: zoo_schemes(config),
    }
    for consumer, call in consumers.items():
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value) == str(reader.value), consumer
