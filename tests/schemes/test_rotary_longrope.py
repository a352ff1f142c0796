"""LongRoPE: short/long factor switch, attention factor, fp32 buffers, errors (parity: test_rotary_config)."""

import math

import pytest
import torch

from posembed import LongRoPERotary, RotaryEmbedding
from posembed.schemes.rotary.longrope import longrope_attention_factor
from posembed.schemes.rotary.rope import rope_inv_freq
from tests.helpers import assert_close

D = 16


def test_longrope_switches_factors_at_original_length():
    short, long = [1.0] * (D // 2), [float(i + 1) for i in range(D // 2)]
    rope = LongRoPERotary(D, short_factor=short, long_factor=long, original_max_len=16, factor=4.0)
    assert rope.attention_scaling == pytest.approx(math.sqrt(1 + math.log(4.0) / math.log(16)))
    plain = RotaryEmbedding(D)
    scale = rope.attention_scaling
    assert_close(rope.cos_sin(torch.arange(16))[0], plain.cos_sin(torch.arange(16))[0] * scale)
    expected_long = rope_inv_freq(D) / torch.tensor(long)
    angles = torch.arange(17.0)[:, None] * expected_long
    assert_close(rope.cos_sin(torch.arange(17))[0], angles.cos() * scale)


def test_attention_factor_formula():
    assert longrope_attention_factor(1.0, 4096) == 1.0
    assert longrope_attention_factor(8.0, 4096) == pytest.approx(math.sqrt(1 + math.log(8.0) / math.log(4096)))


def test_long_frequencies_stay_fp32_under_a_dtype_cast():
    long = LongRoPERotary(D, short_factor=[1.0] * 8, long_factor=[2.0] * 8, original_max_len=8).to(torch.float16)
    assert long.long_inv_freq.dtype == torch.float32
    assert_close(long.long_inv_freq, rope_inv_freq(D) / 2)
    assert long.cache_size == 0  # the frequencies depend on the call: never cached


def test_bad_arguments():
    with pytest.raises(ValueError, match="short_factor has 1 values; expected rotary_dim / 2 = 8"):
        LongRoPERotary(D, short_factor=[1.0], long_factor=[1.0] * 8, original_max_len=8)
    with pytest.raises(ValueError, match="original_max_len must be a positive int"):
        LongRoPERotary(D, short_factor=[1.0] * 8, long_factor=[1.0] * 8, original_max_len=-1)
