"""Each RoPE trap fires on a config that has it and not on a clean one."""

from __future__ import annotations

import pytest

from posembed.interop.rope_check import check_rope_config

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
    return transformers.LlamaConfig(**BASE, max_position_embeddings=max_pos, rope_scaling=scaling, rope_theta=theta, **extra)


def raw_llama(**fields) -> dict:
    return {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 1024, **fields}


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
    good = {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8, "original_max_position_embeddings": 256}
    report = check_rope_config(llama(scaling=good), compare=False)
    assert any(t.code == "longrope_switch" and "actual length" in t.message for t in report.traps)
    bad = raw_llama(rope_theta=1e4, rope_scaling={**good, "long_factor": [2.0] * 5})
    assert {"longrope_factors", "unbuildable"} <= codes(bad, "error")
    assert "original_inconsistent" in codes(raw_llama(rope_theta=1e4, rope_scaling={**good, "factor": 2.0}))


def test_llama3_bounds():
    bad = raw_llama(max_position_embeddings=2048, rope_theta=5e5, rope_scaling={**LLAMA3, "low_freq_factor": 4.0, "high_freq_factor": 1.0})
    report = check_rope_config(bad, compare=False)
    assert {"llama3_bounds", "unbuildable"} <= {t.code for t in report.traps if t.severity == "error"}
    assert not report.ok
    note = [t for t in check_rope_config(llama(2048, scaling=LLAMA3, theta=5e5), compare=False).traps if t.code == "llama3_bounds"]
    assert note[0].severity == "note" and "256" in note[0].message and "64" in note[0].message


def test_theta_missing_or_lost():
    qwen_raw = {"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 256,
                "rope_scaling": None, "sliding_window": None, "rotary_dim": None, "partial_rotary_factor": None}  # fmt: skip
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
    two_types = transformers.Gemma3TextConfig(**{**BASE, "num_hidden_layers": 2}, head_dim=16,
                                              layer_types=["sliding_attention", "full_attention"])
    assert "theta_per_layer" in codes(two_types)
    assert "theta_per_layer" not in codes(transformers.Gemma3TextConfig(**BASE, head_dim=16))  # one layer: sliding only
    assert "theta_per_layer" not in codes(llama(256))
