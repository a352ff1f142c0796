"""Context-extension variants: exact numbers, reference parity, dynamic behaviour, errors."""

import math

import pytest
import torch

from posembed import (
    DynamicNTKRotary,
    LinearScalingRotary,
    Llama3Rotary,
    LongRoPERotary,
    NTKAwareRotary,
    RotaryEmbedding,
    YaRNRotary,
)
from posembed.schemes.base import SCHEMES
from posembed.schemes.rotary.rope import rope_inv_freq
from posembed.schemes.rotary.scaling import ProportionalRotary, ntk_base
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


def test_proportional_zero_frequencies_leave_pairs_unrotated():
    rope = ProportionalRotary(D, rope_fraction=0.25)
    assert torch.count_nonzero(rope.inv_freq) == 2
    q = torch.randn(1, 1, 6, D)
    q_rot, _ = rope(q, q)
    untouched = torch.cat([torch.arange(2, 8), torch.arange(10, 16)])
    assert torch.equal(q_rot[..., untouched], q[..., untouched])


def test_variants_extra_repr_and_meta_init():
    rope = Llama3Rotary(D, factor=4.0, original_max_len=16, max_len=8, device="meta")
    rope.to_empty(device="cpu")
    rope.reset_parameters()
    real = Llama3Rotary(D, factor=4.0, original_max_len=16, max_len=8)
    assert torch.equal(rope.inv_freq, real.inv_freq) and torch.equal(rope.cos_cached, real.cos_cached)
    assert "factor=4, original_max_len=16" in repr(real)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: LinearScalingRotary(D, factor=0.5), "factor must be a finite number >= 1.0, got 0.5"),
        (lambda: NTKAwareRotary(D, factor="2"), "factor must be a number"),
        (lambda: DynamicNTKRotary(D, factor=2.0, original_max_len=0), "original_max_len must be a positive int"),
        (
            lambda: Llama3Rotary(D, factor=8.0, original_max_len=8, low_freq_factor=4, high_freq_factor=1),
            "high_freq_factor=1 must be at least low_freq_factor=4",
        ),
        (
            lambda: Llama3Rotary(D, factor=8.0, original_max_len=8, low_freq_factor=0, high_freq_factor=4),
            "low_freq_factor must be greater than 0",
        ),
        (lambda: ProportionalRotary(D, rope_fraction=1.5), r"rope_fraction must be in \[0, 1\], got 1.5"),
        (lambda: LinearScalingRotary(7, factor=2.0), "head_dim must be even"),
    ],
)
def test_bad_variant_arguments(build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build()
