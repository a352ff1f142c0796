"""YaRN: the attention factor, the NTK-by-parts ramp, meta-device init, errors (parity: test_rotary_config)."""

import math

import pytest
import torch

from posembed import YaRNRotary
from posembed.schemes.rotary import rope_inv_freq
from posembed.schemes.rotary_yarn import yarn_attention_factor
from tests.helpers import assert_close

D = 16


def test_yarn_attention_factor_and_ramp():
    assert yarn_attention_factor(4.0) == pytest.approx(0.1 * math.log(4.0) + 1)
    assert yarn_attention_factor(1.0) == 1.0
    assert yarn_attention_factor(4.0, mscale=1.0, mscale_all_dim=1.0) == 1.0
    rope = YaRNRotary(64, factor=8.0, original_max_len=4096)  # ramp over dims 10..23
    plain = rope_inv_freq(64)
    assert rope.attention_scaling == pytest.approx(0.1 * math.log(8.0) + 1)
    assert_close(rope.inv_freq[:10], plain[:10])  # fast dims: extrapolated (kept)
    assert_close(rope.inv_freq[24:], plain[24:] / 8.0)  # slow dims: interpolated
    assert torch.all(rope.inv_freq <= plain) and torch.all(rope.inv_freq >= plain / 8.0)
    overridden = YaRNRotary(64, factor=8.0, original_max_len=4096, attention_factor=1.5)
    assert overridden.attention_scaling == 1.5


def test_yarn_attention_factor_scales_logits_by_its_square():
    rope = YaRNRotary(D, factor=4.0, original_max_len=16)
    q = torch.randn(1, 1, 5, D)
    q_rot, k_rot = rope(q, q)
    ratio = q_rot.norm(dim=-1) / q.norm(dim=-1)
    assert_close(ratio, torch.full_like(ratio, rope.attention_scaling))


def test_meta_init_equals_real_init_and_repr():
    rope = YaRNRotary(D, factor=4.0, original_max_len=16, max_len=8, device="meta")
    rope.to_empty(device="cpu")
    rope.reset_parameters()
    real = YaRNRotary(D, factor=4.0, original_max_len=16, max_len=8)
    assert torch.equal(rope.inv_freq, real.inv_freq) and torch.equal(rope.cos_cached, real.cos_cached)
    assert "factor=4, original_max_len=16" in repr(real) and "attention_scaling=1.13863" in repr(real)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"beta_fast": 1, "beta_slow": 2}, ValueError, "beta_fast=1 must be"),
        ({"factor": 0.5}, ValueError, "factor must be a finite number >= 1.0, got 0.5"),
        ({"original_max_len": 0}, ValueError, "original_max_len must be a positive int"),
        ({"attention_factor": "x"}, TypeError, "attention_factor must be a number"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        YaRNRotary(D, **{"factor": 2.0, "original_max_len": 8, **kwargs})
