"""Context-extension variants: exact numbers, reference parity, dynamic behaviour, errors."""

import math

import pytest
import torch

from posembed import (
    DynamicNTKRotary,
    Llama3Rotary,
    LinearScalingRotary,
    LongRoPERotary,
    NTKAwareRotary,
    RotaryEmbedding,
    YaRNRotary,
)
from posembed.schemes.base import SCHEMES
from posembed.schemes.rotary import rope_inv_freq
from posembed.schemes.rotary_scaling import ProportionalRotary, ntk_base, yarn_attention_factor
from tests.helpers import assert_close

D = 16


def test_names_registered():
    for name, cls in [
        ("rope_linear", LinearScalingRotary),
        ("rope_ntk", NTKAwareRotary),
        ("rope_dynamic_ntk", DynamicNTKRotary),
        ("rope_yarn", YaRNRotary),
        ("rope_llama3", Llama3Rotary),
        ("rope_longrope", LongRoPERotary),
        ("rope_proportional", ProportionalRotary),
    ]:
        assert SCHEMES[name] is cls


def test_ntk_base_exact_number():
    """base 1e4, D 128, s 4 -> 40 890 (REFERENCES.md)."""
    assert round(ntk_base(10000.0, 4.0, 128)) == 40890
    rope = NTKAwareRotary(128, factor=4.0)
    assert_close(rope.inv_freq, rope_inv_freq(128, 10000.0 * 4.0 ** (128 / 126)))


def test_ntk_matches_rotary_embedding_torch_theta_rescale():
    ret = pytest.importorskip("rotary_embedding_torch")
    reference = ret.RotaryEmbedding(dim=D, theta_rescale_factor=4.0)
    q = torch.randn(2, 3, 9, D)
    actual, _ = NTKAwareRotary(D, factor=4.0, layout="interleaved")(q, q)
    assert_close(actual, reference.rotate_queries_or_keys(q))


def test_linear_scaling_matches_rotary_embedding_torch_interpolation():
    ret = pytest.importorskip("rotary_embedding_torch")
    reference = ret.RotaryEmbedding(dim=D, interpolate_factor=4.0)
    q = torch.randn(2, 3, 9, D)
    actual, _ = LinearScalingRotary(D, factor=4.0, layout="interleaved")(q, q)
    assert_close(actual, reference.rotate_queries_or_keys(q))


def test_linear_scaling_is_position_interpolation():
    rope, plain = LinearScalingRotary(D, factor=4.0), RotaryEmbedding(D)
    q = torch.randn(1, 2, 8, D)
    scaled, _ = rope(q, q, torch.arange(8) * 4)
    assert_close(scaled, plain(q, q, torch.arange(8))[0])


def test_dynamic_ntk_equals_plain_within_original_length_and_formula_beyond():
    rope = DynamicNTKRotary(D, factor=2.0, original_max_len=32)
    plain = RotaryEmbedding(D)
    q = torch.randn(1, 2, 32, D)
    assert torch.equal(rope(q, q)[0], plain(q, q)[0])
    length = 80
    scaled_base = 10000.0 * ((2.0 * length / 32) - 1.0) ** (D / (D - 2))
    expected = RotaryEmbedding(D, base=scaled_base)
    q = torch.randn(1, 2, length, D)
    assert_close(rope(q, q)[0], expected(q, q)[0])
    # recomputed per call: the same positions in a longer call get other frequencies
    short = rope.cos_sin(torch.arange(40))[0]
    longer = rope.cos_sin(torch.arange(80))[0][:40]
    assert not torch.allclose(short, longer)


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


def test_llama3_bands():
    rope = Llama3Rotary(128, factor=8.0, original_max_len=8192, base=500000.0)
    plain = rope_inv_freq(128, 500000.0)
    wavelen = 2 * math.pi / plain
    high = wavelen < 8192 / 4.0
    low = wavelen > 8192 / 1.0
    assert high.any() and low.any() and (~high & ~low).any()
    assert torch.equal(rope.inv_freq[high], plain[high])
    assert_close(rope.inv_freq[low], plain[low] / 8.0)
    medium = ~high & ~low
    assert torch.all(rope.inv_freq[medium] < plain[medium]) and torch.all(rope.inv_freq[medium] > plain[medium] / 8)


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


def test_proportional_zero_frequencies_leave_pairs_unrotated():
    rope = ProportionalRotary(D, rope_fraction=0.25)
    assert torch.count_nonzero(rope.inv_freq) == 2
    q = torch.randn(1, 1, 6, D)
    q_rot, _ = rope(q, q)
    untouched = torch.cat([torch.arange(2, 8), torch.arange(10, 16)])
    assert torch.equal(q_rot[..., untouched], q[..., untouched])


def test_variants_extra_repr_and_meta_init():
    rope = YaRNRotary(D, factor=4.0, original_max_len=16, max_len=8, device="meta")
    rope.to_empty(device="cpu")
    rope.reset_parameters()
    real = YaRNRotary(D, factor=4.0, original_max_len=16, max_len=8)
    assert torch.equal(rope.inv_freq, real.inv_freq) and torch.equal(rope.cos_cached, real.cos_cached)
    long = LongRoPERotary(D, short_factor=[1.0] * 8, long_factor=[2.0] * 8, original_max_len=8).to(torch.float16)
    assert long.long_inv_freq.dtype == torch.float32
    assert_close(long.long_inv_freq, rope_inv_freq(D) / 2)
    assert "factor=4, original_max_len=16" in repr(real) and "attention_scaling=1.13863" in repr(real)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: LinearScalingRotary(D, factor=0.5), "factor must be a finite number >= 1.0, got 0.5"),
        (lambda: NTKAwareRotary(D, factor="2"), "factor must be a number"),
        (lambda: DynamicNTKRotary(D, factor=2.0, original_max_len=0), "original_max_len must be a positive int"),
        (lambda: YaRNRotary(D, factor=2.0, original_max_len=8, beta_fast=1, beta_slow=2), "beta_fast=1 must be"),
        (lambda: Llama3Rotary(D, factor=8.0, original_max_len=8, low_freq_factor=4, high_freq_factor=1),
         "high_freq_factor=1 must be greater than low_freq_factor=4"),
        (lambda: LongRoPERotary(D, short_factor=[1.0], long_factor=[1.0] * 8, original_max_len=8),
         "short_factor has 1 values; expected rotary_dim / 2 = 8"),
        (lambda: ProportionalRotary(D, rope_fraction=1.5), r"rope_fraction must be in \[0, 1\], got 1.5"),
        (lambda: LinearScalingRotary(7, factor=2.0), "head_dim must be even"),
    ],
)
def test_bad_variant_arguments(build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build()
