"""check_rope_config on configs built with transformers' own config classes: posembed's
frequencies equal transformers' rope init functions, per-pair treatments, both spellings."""

from __future__ import annotations

import json

import pytest

from posembed.interop.rope_check.check import check_rope_config, format_report, report_json

transformers = pytest.importorskip("transformers")

BASE = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, intermediate_size=64, vocab_size=100)
LONGROPE = {
    "rope_type": "longrope", "short_factor": [1.0 + i / 20 for i in range(8)],
    "long_factor": [1.0 + i for i in range(8)], "original_max_position_embeddings": 256,
}  # fmt: skip
LLAMA_ROPE = {
    "default": (256, None),
    "linear": (256, {"rope_type": "linear", "factor": 4.0}),
    "dynamic": (256, {"rope_type": "dynamic", "factor": 4.0}),
    "yarn": (1024, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}),
    "longrope": (1024, LONGROPE),
    "llama3": (
        2048,
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 256,
        },
    ),  # fmt: skip
}


def llama(rope_type: str, **extra):
    max_pos, scaling = LLAMA_ROPE[rope_type]
    theta = 500000.0 if rope_type == "llama3" else 10000.0
    scaling = None if scaling is None else dict(scaling)  # transformers writes rope_theta into the dict it is given
    return transformers.LlamaConfig(
        **BASE, max_position_embeddings=max_pos, rope_scaling=scaling, rope_theta=theta, **extra
    )


def _assert_equal_to_transformers(report):
    for layer in report.layers:
        assert layer.comparisons, layer.comparison_note
        assert all(c.equal for c in layer.comparisons), layer.comparisons


@pytest.mark.parametrize("rope_type", list(LLAMA_ROPE))
def test_llama_every_rope_type_equals_transformers(rope_type):
    report = check_rope_config(llama(rope_type))
    _assert_equal_to_transformers(report)
    assert report.ok, format_report(report)
    assert report.spelling.startswith("rope_parameters")


@pytest.mark.parametrize(
    "config",
    [
        lambda: transformers.MistralConfig(**BASE, max_position_embeddings=256, head_dim=16, rope_theta=1e6),
        lambda: transformers.Qwen2Config(**BASE, max_position_embeddings=256, rope_theta=1e6),
        lambda: transformers.Phi3Config(
            **BASE,
            max_position_embeddings=1024,
            original_max_position_embeddings=256,
            rope_scaling={k: v for k, v in LONGROPE.items() if k != "original_max_position_embeddings"},
        ),  # fmt: skip
        lambda: transformers.GemmaConfig(**BASE, max_position_embeddings=256, head_dim=32),
        lambda: transformers.GPTNeoXConfig(**BASE, max_position_embeddings=256),
        lambda: transformers.ModernBertConfig(**BASE, max_position_embeddings=256),
        lambda: transformers.Gemma3TextConfig(**BASE, max_position_embeddings=256, head_dim=16),
    ],
    ids=["mistral", "qwen2", "phi3_longrope", "gemma", "gpt_neox", "modernbert", "gemma3"],
)
def test_families_equal_transformers_and_clean(config):
    report = check_rope_config(config())
    _assert_equal_to_transformers(report)
    assert report.ok, format_report(report)


def test_per_pair_treatments_llama3_and_yarn():
    layer = check_rope_config(llama("llama3")).layers[0]
    treatments = [row.treatment for row in layer.pairs]
    assert treatments[0] == "keep" and treatments[-1] == "interpolate"
    for row in layer.pairs:  # llama3: kept below original / high_freq_factor, interpolated above original / low
        if row.wavelength < 256 / 4.0:
            assert row.treatment == "keep"
        elif row.wavelength > 256 / 1.0:
            assert row.treatment == "interpolate" and row.ratio == pytest.approx(8.0)
    yarn = check_rope_config(llama("yarn")).layers[0]
    assert yarn.attention_factor == pytest.approx(0.1 * __import__("math").log(4.0) + 1)
    assert {"keep", "interpolate"} <= {row.treatment for row in yarn.pairs}
    assert yarn.effective_context == 1024 and yarn.trained_context == 256


def test_switch_points_and_pairs_at_target_length():
    dynamic = check_rope_config(llama("dynamic"), length=1024).layers[0]
    assert dynamic.switch_at == 256
    assert dynamic.pairs[0].treatment == "keep" and dynamic.pairs[-1].ratio > 1  # NTK: slow pairs stretched
    short = check_rope_config(llama("dynamic"), length=200).layers[0]
    assert all(row.treatment == "keep" for row in short.pairs)  # no change below the trained length
    longrope = check_rope_config(llama("longrope"), length=200).layers[0]
    assert longrope.switch_at == 256
    assert [row.ratio for row in longrope.pairs] == pytest.approx(LONGROPE["short_factor"], rel=1e-5)
    long = check_rope_config(llama("longrope"), length=300).layers[0]
    assert [row.ratio for row in long.pairs] == pytest.approx(LONGROPE["long_factor"], rel=1e-5)


def test_partial_rotary_and_layouts():
    neox = check_rope_config(transformers.GPTNeoXConfig(**BASE, max_position_embeddings=256)).layers[0]
    assert neox.settings.rotary_dim == 4 and neox.pairs[1].channels == (1, 3)
    gptj = check_rope_config(transformers.GPTJConfig(n_embd=64, n_head=4, n_layer=1, rotary_dim=8, vocab_size=100))
    layer = gptj.layers[0]
    assert layer.settings.layout == "interleaved" and layer.settings.rotary_dim == 8
    assert layer.pairs[1].channels == (2, 3)


def test_4x_spelling_from_a_folder_equals_5x(tmp_path):
    raw = {
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 1024,
        "rope_theta": 10000.0, "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256},
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(raw))
    from_folder = check_rope_config(tmp_path)
    assert from_folder.spelling.startswith("rope_scaling")
    assert from_folder.layers[0].settings.rope_type == "yarn"
    _assert_equal_to_transformers(from_folder)
    from_object = check_rope_config(llama("yarn"))
    assert [r.scaled_wavelength for r in from_folder.layers[0].pairs] == [
        r.scaled_wavelength for r in from_object.layers[0].pairs
    ]


def test_4x_per_layer_spellings():
    gemma3 = check_rope_config(
        {
            "model_type": "gemma3_text",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "head_dim": 16,
            "max_position_embeddings": 256,
            "rope_theta": 1e6,
            "rope_local_base_freq": 1e4,
        }
    )
    assert {layer.settings.layer_type: layer.settings.theta for layer in gemma3.layers} == {
        "full_attention": 1e6,
        "sliding_attention": 1e4,
    }
    modernbert = check_rope_config(
        {
            "model_type": "modernbert",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "max_position_embeddings": 256,
            "global_rope_theta": 160000.0,
            "local_rope_theta": 10000.0,
        }
    )
    assert {layer.settings.layer_type: layer.settings.theta for layer in modernbert.layers} == {
        "full_attention": 160000.0,
        "sliding_attention": 10000.0,
    }
    assert any(t.code == "theta_per_layer" for t in modernbert.traps)
    _assert_equal_to_transformers(gemma3)  # transformers 5 reads the 4.x per-layer fields the same way
    _assert_equal_to_transformers(modernbert)


def test_json_and_text_report():
    report = check_rope_config(llama("yarn"))
    data = json.loads(json.dumps(report_json(report)))
    assert data["ok"] is True and data["layers"][0]["comparisons"][0]["equal"] is True
    assert {"code", "severity", "layer_type", "message"} <= set(data["traps"][0])
    text = format_report(report)
    assert "YaRNRotary" in text and "interpolate" in text and "result: OK" in text


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from posembed.interop.rope_check.check_plot import plot_wavelengths

    path = plot_wavelengths(check_rope_config(llama("llama3")), tmp_path / "rope.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="has no RoPE"):
        check_rope_config(transformers.BertConfig())
    with pytest.raises(ValueError, match="not a checkpoint"):
        check_rope_config(tmp_path)
    with pytest.raises(FileNotFoundError):
        check_rope_config(tmp_path / "missing")
    with pytest.raises(ValueError, match="length"):
        check_rope_config(llama("default"), length=1)
