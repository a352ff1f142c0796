"""Each RoPE trap fires on a config that has it and not on a clean one."""

from __future__ import annotations

import pytest

from posembed.interop.rope_check.check import check_rope_config

transformers = pytest.importorskip("transformers")

BASE = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, intermediate_size=64, vocab_size=100)
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 256}  # fmt: skip


def codes(config, severity: str | None = None) -> set[str]:
    report = check_rope_config(config, compare=False)
    return {t.code for t in report.traps if severity is None or t.severity == severity}


def llama(max_pos=1024, scaling=None, theta=10000.0, **extra):
    scaling = None if scaling is None else dict(scaling)  # transformers writes rope_theta into the dict it is given
    return transformers.LlamaConfig(
        **BASE, max_position_embeddings=max_pos, rope_scaling=scaling, rope_theta=theta, **extra
    )


def raw_llama(**fields) -> dict:
    return {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 1024,
        **fields,
    }


def test_clean_configs_have_no_warnings():
    for config in (
        llama(256),
        llama(scaling=YARN),
        llama(2048, scaling=LLAMA3, theta=500000.0),
        transformers.Qwen2Config(**BASE, rope_theta=1e6),
        transformers.ModernBertConfig(**BASE),
    ):
        assert not codes(config, "warning") and not codes(config, "error"), config


def test_original_missing_and_compounding():
    # 4.x dict: yarn with no original; max already = factor x 8192 -> the factor would compound
    raw = raw_llama(max_position_embeddings=32768, rope_theta=1e4, rope_scaling={"rope_type": "yarn", "factor": 4.0})
    report = check_rope_config(raw, compare=False)
    (trap,) = [t for t in report.traps if t.code == "original_missing"]
    assert trap.severity == "warning" and "compound" in trap.message and "131072" in trap.message
    assert "original_missing" not in codes(llama(scaling=YARN), "warning")


def test_original_equal_to_max_compounds():
    assert "factor_compounds" in codes(llama(256, scaling=YARN))
    assert "factor_compounds" not in codes(llama(1024, scaling=YARN))


def test_original_inconsistent():
    raw = raw_llama(rope_theta=1e4, original_max_position_embeddings=512, rope_scaling=YARN)
    assert "original_inconsistent" in codes(raw)
    assert "original_inconsistent" in codes(raw_llama(max_position_embeddings=128, rope_theta=1e4, rope_scaling=YARN))
    assert "original_inconsistent" not in codes(llama(scaling=YARN))


def test_yarn_attention_note_squared_and_mscale():
    note = [t for t in check_rope_config(llama(scaling=YARN), compare=False).traps if t.code == "yarn_attention"]
    assert note and "a^2" in note[0].message and "cos and sin" in note[0].message
    squared = (0.1 * __import__("math").log(4.0) + 1) ** 2
    assert "yarn_squared" in codes(llama(scaling={**YARN, "attention_factor": squared}), "warning")
    assert "yarn_squared" not in codes(llama(scaling={**YARN, "attention_factor": 1.2}))
    deepseek = llama(scaling={**YARN, "mscale": 0.707, "mscale_all_dim": 0.707})
    (trap,) = [t for t in check_rope_config(deepseek, compare=False).traps if t.code == "yarn_mscale"]
    assert "softmax scale" in trap.message and "= 1 " in trap.message
    assert "yarn_mscale" in codes(llama(scaling={**YARN, "mscale": 1.0}), "warning")
    assert "yarn_mscale" not in codes(llama(scaling=YARN))


def test_dynamic_formula_and_original_ignored():
    dynamic = {"rope_type": "dynamic", "factor": 4.0}
    report = check_rope_config(llama(256, scaling=dynamic), compare=False)
    assert any(t.code == "dynamic_formula" and "(s l / L) - (s - 1)" in t.message for t in report.traps)
    assert "dynamic_below_trained" not in {t.code for t in report.traps}
    raw = raw_llama(rope_theta=1e4, original_max_position_embeddings=256, rope_scaling=dynamic)
    assert "dynamic_original" in codes(raw, "warning")
    assert "dynamic_original" not in codes(llama(256, scaling=dynamic))


def test_longrope_switch_and_factor_lengths():
    good = {
        "rope_type": "longrope",
        "short_factor": [1.0] * 8,
        "long_factor": [2.0] * 8,
        "original_max_position_embeddings": 256,
    }
    report = check_rope_config(llama(scaling=good), compare=False)
    assert any(t.code == "longrope_switch" and "actual length" in t.message for t in report.traps)
    bad = raw_llama(rope_theta=1e4, rope_scaling={**good, "long_factor": [2.0] * 5})
    assert {"longrope_factors", "unbuildable"} <= codes(bad, "error")
    assert "original_inconsistent" in codes(raw_llama(rope_theta=1e4, rope_scaling={**good, "factor": 2.0}))


def test_llama3_bounds():
    bad = raw_llama(
        max_position_embeddings=2048,
        rope_theta=5e5,
        rope_scaling={**LLAMA3, "low_freq_factor": 4.0, "high_freq_factor": 1.0},
    )
    report = check_rope_config(bad, compare=False)
    assert {"llama3_bounds", "unbuildable"} <= {t.code for t in report.traps if t.severity == "error"}
    assert not report.ok
    note = [
        t
        for t in check_rope_config(llama(2048, scaling=LLAMA3, theta=5e5), compare=False).traps
        if t.code == "llama3_bounds"
    ]
    assert note[0].severity == "note" and "256" in note[0].message and "64" in note[0].message


def test_theta_missing_or_lost():
    qwen_raw = {
        "model_type": "qwen2",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": 256,
        "rope_scaling": None,
        "sliding_window": None,
        "rotary_dim": None,
        "partial_rotary_factor": None,
    }
    qwen_raw["rope_scaling"] = {"rope_type": "default"}
    assert "theta_missing" in codes(qwen_raw, "warning")  # Qwen2 uses 1e6, loaders fall back to 1e4
    assert "theta_missing" in codes(raw_llama(rope_scaling={"rope_type": "linear", "factor": 2.0}), "note")
    assert "theta_family" in codes(llama(2048, scaling=LLAMA3, theta=10000.0), "warning")  # Llama 3 is 500 000
    assert "theta_family" in codes(transformers.Qwen2Config(**BASE), "warning")
    assert not codes(transformers.Qwen2Config(**BASE, rope_theta=1e6)) & {"theta_family", "theta_missing"}


def test_partial_rotary_and_head_dim():
    neox = transformers.GPTNeoXConfig(**BASE, max_position_embeddings=256)
    (trap,) = [t for t in check_rope_config(neox, compare=False).traps if t.code == "partial_rotary"]
    assert "(i, i + r/2)" in trap.message and trap.severity == "note"
    odd = transformers.GPTNeoXConfig(**BASE, max_position_embeddings=256, rotary_pct=0.3)
    assert "partial_rotary" in codes(odd, "warning")  # 0.3 x 16 = 4.8 is truncated
    assert "partial_rotary" not in codes(llama(256))
    assert "head_dim" in codes(transformers.GemmaConfig(**BASE, head_dim=32))
    assert "head_dim" not in codes(transformers.GemmaConfig(**BASE, head_dim=16))


def test_theta_per_layer_type():
    two_types = transformers.Gemma3TextConfig(
        **{**BASE, "num_hidden_layers": 2}, head_dim=16, layer_types=["sliding_attention", "full_attention"]
    )
    assert "theta_per_layer" in codes(two_types)
    assert "theta_per_layer" not in codes(transformers.Gemma3TextConfig(**BASE, head_dim=16))  # one layer: sliding only
    assert "theta_per_layer" not in codes(llama(256))


def _model(raw: dict):
    """transformers' own Llama rotary embedding for the config dict ``raw`` (built from a copy)."""
    import copy

    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return LlamaRotaryEmbedding(transformers.LlamaConfig.from_dict(copy.deepcopy(raw)))


def _plain(theta: float = 10000.0, dim: int = 16):
    import torch

    return 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)


@pytest.mark.parametrize(
    "fields, how",
    [
        ({"rope_theta": 1e4, "rope_scaling": {"factor": 4.0}}, "name no rope_type"),  # 4.x spelling
        ({"rope_parameters": {"rope_theta": 1e4, "factor": 4.0}}, "name no rope_type"),  # 5.x spelling
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "factor": 8}}, "rope_type is 'default'"),
    ],
    ids=["scaling", "parameters", "named_default"],
)
def test_a_factor_nothing_reads_is_a_warning(fields, how):
    raw = raw_llama(**fields)
    import torch

    torch.testing.assert_close(_model(raw).inv_freq, _plain(), rtol=1e-6, atol=0)  # transformers: plain RoPE
    report = check_rope_config(raw)
    (trap,) = [t for t in report.traps if t.code == "factor_unread"]
    assert trap.severity == "warning" and how in trap.message and "reads no factor" in trap.message
    assert not report.ok and report.layers[0].comparisons[0].equal  # posembed builds what transformers builds
    assert report.layers[0].effective_context == 1024  # nothing extended


def test_a_factor_that_is_read_or_one_is_no_warning():
    assert "factor_unread" not in codes(raw_llama(rope_parameters={"rope_theta": 1e4, "factor": 1.0}))
    for scaling in ({"rope_type": "linear", "factor": 4.0}, {"rope_type": "dynamic", "factor": 4.0}, YARN):
        assert "factor_unread" not in codes(raw_llama(rope_theta=1e4, rope_scaling=scaling)), scaling


@pytest.mark.parametrize(
    "fields, field, layer",
    [
        ({"rope_theta": "1e4"}, "rope_theta", "*"),
        ({"rope_parameters": {"rope_type": "default", "rope_theta": "1e4"}}, "rope_parameters.rope_theta", "*"),
        ({"rope_theta": 1e4, "rope_scaling": {"rope_type": "linear", "factor": "4"}}, "rope_scaling.factor", "*"),
        (
            {"rope_theta": 1e4, "rope_scaling": {**YARN, "original_max_position_embeddings": "256"}},
            "rope_scaling.original_max_position_embeddings",
            "*",
        ),
        ({"rope_theta": 1e4, "max_position_embeddings": "1024"}, "max_position_embeddings", "*"),
    ],
    ids=["top_theta", "parameters_theta", "factor", "original", "max_position_embeddings"],
)
def test_a_number_written_as_a_string_is_an_error_naming_the_field(fields, field, layer):
    raw = raw_llama(**fields)
    with pytest.raises(Exception) as refused:  # transformers' config class or its rope init: no conversion
        _model(raw)
    assert "str" in str(refused.value) or "expected int" in str(refused.value)
    report = check_rope_config(raw)
    (trap,) = [t for t in report.traps if t.code == "not_a_number"]
    assert trap.severity == "error" and trap.layer_type == layer
    assert trap.message.startswith(f"{field} is '") and "not a number" in trap.message
    assert not report.ok
    clean = check_rope_config(raw_llama(rope_theta=1e4, rope_scaling=fields.get("rope_scaling")), compare=False)
    assert [r.wavelength for r in report.layers[0].pairs] == [
        r.wavelength for r in clean.layers[0].pairs
    ]  # read as meant


def test_the_theta_string_says_what_to_write():
    report = check_rope_config(raw_llama(rope_theta="1e4"))
    (trap,) = [t for t in report.traps if t.code == "not_a_number"]
    assert "write 10000.0 without quotes" in trap.message and "YAML 1.1" in trap.message and "1.0e+04" in trap.message
    assert "TypeError" in report.layers[0].comparison_note  # its own comparison: transformers' init failed


def test_a_per_layer_theta_string_names_its_layer():
    raw = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16,
           "max_position_embeddings": 256, "layer_types": ["sliding_attention", "full_attention"],
           "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                               "sliding_attention": {"rope_type": "default", "rope_theta": "1e4"}}}  # fmt: skip
    (trap,) = [t for t in check_rope_config(raw, compare=False).traps if t.code == "not_a_number"]
    assert trap.layer_type == "sliding_attention" and trap.message.startswith(
        "rope_parameters.sliding_attention.rope_theta"
    )
    assert {t.code for t in check_rope_config(raw_llama(rope_theta=10000), compare=False).traps}.isdisjoint(
        {"not_a_number"}
    )


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"rope_theta": 1e4, "rope_scaling": {"rope_type": "linear", "factor": "four"}},
            "rope_scaling.factor must be a number, got 'four'",
        ),
        (
            {"rope_theta": 1e4, "rope_scaling": {**YARN, "original_max_position_embeddings": "256.5"}},
            "rope_scaling.original_max_position_embeddings must be an integer, got '256.5'",
        ),
        (
            {"rope_theta": 1e4, "rope_scaling": {"rope_type": "linear", "factor": True}},
            "rope_scaling.factor must be a number, got True",
        ),
        (
            {"rope_theta": 1e4, "max_position_embeddings": "inf"},
            "max_position_embeddings must be an integer, got 'inf'",
        ),
        (
            {
                "rope_theta": 1e4,
                "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 7 + [None], "long_factor": [1.0] * 8},
            },
            "rope_scaling.short_factor[7] must be a number, got None",
        ),
        (
            {"rope_theta": "1e4", "rope_scaling": {"rope_type": "linear", "factor": "x"}},
            "rope_scaling.factor must be a number, got 'x'",
        ),
    ],
    ids=["word", "fractional_length", "bool", "infinite_length", "none_in_a_list", "after_a_readable_theta"],
)
def test_a_field_no_number_can_be_read_from_is_refused(fields, message):
    with pytest.raises(ValueError) as refused:
        check_rope_config(raw_llama(**fields), compare=False)
    assert str(refused.value) == message


def test_a_theta_no_number_can_be_read_from_is_left_to_the_reader():
    """A bool theta reads as a number there (True: 1), so it is an error trap, not a refusal."""
    (trap,) = [
        t for t in check_rope_config(raw_llama(rope_theta=True), compare=False).traps if t.code == "not_a_number"
    ]
    assert trap.message == ("rope_theta is True, a bool, not a number: transformers does not convert it, so its config "
                            "class or its rope init fails on it; write it as a number")  # fmt: skip


SCALED = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    "longrope": {"rope_type": "longrope", "factor": 4.0, "short_factor": [1.0] * 8, "long_factor": [4.0] * 8},
}


@pytest.mark.parametrize("rope_type", sorted(SCALED))
def test_a_factor_on_an_unraised_or_extended_length_compounds_for_every_type(rope_type):
    # the config says it was trained at 1024 and max_position_embeddings is 1024 too, with factor 4
    compounded = raw_llama(rope_theta=1e4, rope_scaling={**SCALED[rope_type], "original_max_position_embeddings": 1024})
    report = check_rope_config(compounded, compare=False)
    (trap,) = [t for t in report.traps if t.code == "factor_compounds"]
    assert trap.severity == "warning" and "compounds" in trap.message and not report.ok
    raised = raw_llama(max_position_embeddings=4096, rope_theta=1e4,
                       rope_scaling={**SCALED[rope_type], "original_max_position_embeddings": 1024})  # fmt: skip
    assert "factor_compounds" not in codes(raised)


def test_linear_scales_the_positions_whatever_length_the_config_states():
    import torch

    # transformers' linear RoPE reads no length: the stated original is the trained one, and factor 4 stretches it
    for original in (256, 1024):
        raw = raw_llama(
            rope_theta=1e4,
            rope_scaling={"rope_type": "linear", "factor": 4.0, "original_max_position_embeddings": original},
        )
        torch.testing.assert_close(_model(raw).inv_freq, _plain() / 4, rtol=1e-6, atol=0)
        layer = check_rope_config(raw).layers[0]
        assert (layer.trained_context, layer.scaled_context, layer.configured_length) == (original, 4 * original, 1024)
        assert layer.effective_context == (1024 if 4 * original == 1024 else None)  # stated only where they agree


def test_dynamic_on_an_already_extended_length_compounds():
    import torch

    # trained at 256, max_position_embeddings already 4 x 256: dynamic NTK scales from max_position_embeddings anyway
    raw = raw_llama(
        rope_theta=1e4, rope_scaling={"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 256}
    )
    embedding = _model(raw)
    cos, sin = embedding(torch.zeros(1, 1, 16), torch.arange(1024)[None])
    angle = torch.atan2(sin[0, 1, :8], cos[0, 1, :8])
    torch.testing.assert_close(angle, _plain(), rtol=1e-5, atol=1e-7)  # unscaled at 1024 = 4 x the trained 256
    report = check_rope_config(raw)
    (trap,) = [t for t in report.traps if t.code == "factor_compounds"]
    assert (
        trap.severity == "warning"
        and "4 x 1024 = 4096" in trap.message
        and "max_position_embeddings=256" in trap.message
    )
    layer = report.layers[0]
    assert (layer.trained_context, layer.scaled_context, layer.effective_context) == (
        1024,
        4096,
        None,
    )  # grows with the sequence
    assert "factor_compounds" not in codes(
        raw_llama(rope_theta=1e4, rope_scaling={"rope_type": "dynamic", "factor": 4.0})
    )
    same = raw_llama(
        rope_theta=1e4, rope_scaling={"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 1024}
    )
    assert "factor_compounds" not in codes(same)  # trained at max_position_embeddings: what dynamic NTK expects


def test_llama3_equal_bounds_are_a_step_not_an_error():
    # Llama 4 Scout publishes low_freq_factor = high_freq_factor = 1: transformers builds a clean step
    import torch

    from posembed.schemes.rotary.scaling import Llama3Rotary, llama3_inv_freq

    equal = raw_llama(
        max_position_embeddings=2048,
        rope_theta=5e5,
        rope_scaling={**LLAMA3, "low_freq_factor": 1.0, "high_freq_factor": 1.0},
    )
    traps = [t for t in check_rope_config(equal, compare=False).traps if t.code == "llama3_bounds"]
    assert [t.severity for t in traps] == ["note"] and "a step" in traps[0].message
    inv = 1.0 / (5e5 ** (torch.arange(0, 64, 2).float() / 64))
    stepped = llama3_inv_freq(inv, 8.0, 1.0, 1.0, 256)
    long = 2 * torch.pi / inv > 256
    assert (
        torch.isfinite(stepped).all()
        and torch.equal(stepped[long], inv[long] / 8)
        and torch.equal(stepped[~long], inv[~long])
    )
    Llama3Rotary(64, factor=8.0, original_max_len=256, low_freq_factor=1.0, high_freq_factor=1.0)
    with pytest.raises(ValueError, match="high_freq_factor=1.0 must be at least low_freq_factor=2.0"):
        Llama3Rotary(64, factor=8.0, original_max_len=256, low_freq_factor=2.0, high_freq_factor=1.0)
