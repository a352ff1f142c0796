"""Exact phases: every sinusoid and every rotary variant within 1e-6 of float64 up to position 2**24.

The reference is the float64 angle ``float64(p) * float64(w)`` of the SAME float32 frequencies
``w`` the module holds, its cos/sin rounded to float32; scaling factors folded in afterwards.
"""

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from posembed import (
    DynamicNTKRotary,
    LinearScalingRotary,
    Llama3Rotary,
    LongRoPERotary,
    NTKAwareRotary,
    ProportionalRotary,
    RotaryEmbedding,
    ScaledSinusoidal,
    Sinusoidal,
    Sinusoidal2D,
    Sinusoidal3D,
    XPos,
    YaRNRotary,
)  # fmt: skip
from posembed.schemes.phases import cos_sin
from posembed.schemes.rotary.rotation import rotate_reference
from posembed.schemes.rotary.scaling import dynamic_ntk_inv_freq
from tests.helpers import max_abs_diff

LIMIT = 2**24
LARGE = (10_000, 100_000, 1_000_000, LIMIT - 1)
ATOL = 1e-6


def _reference(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    angle = positions.double()[..., None] * inv_freq.float().double()
    return angle.cos().float(), angle.sin().float()


def _positions(position: int, count: int = 5) -> torch.Tensor:
    low = max(0, min(position, LIMIT - count))
    return torch.arange(low, low + count)


@settings(max_examples=30, deadline=None)
@given(position=st.integers(0, LIMIT - 1), dim=st.sampled_from([2, 16, 64, 128]), base=st.sampled_from([1e4, 5e5]))
@example(position=10_000, dim=64, base=1e4)
@example(position=100_000, dim=64, base=1e4)
@example(position=1_000_000, dim=128, base=1e4)
@example(position=LIMIT - 1, dim=128, base=1e4)
def test_exact_cos_sin_within_1e6_of_float64(position, dim, base):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    positions = _positions(position)
    cos, sin = cos_sin(positions, inv_freq)
    ref_cos, ref_sin = _reference(positions, inv_freq)
    assert cos.dtype == sin.dtype == torch.float32
    assert max(max_abs_diff(cos, ref_cos), max_abs_diff(sin, ref_sin)) <= 2.5e-7  # the documented bound


def test_fp32_angles_are_the_float32_product_and_drift():
    inv_freq = 1.0 / (1e4 ** (torch.arange(0, 64, 2).float() / 64))
    positions = torch.tensor([100_000, 1_000_000])
    angle = positions.float()[:, None] * inv_freq
    cos, sin = cos_sin(positions, inv_freq, "fp32")
    assert torch.equal(cos, angle.cos()) and torch.equal(sin, angle.sin())
    assert max_abs_diff(sin, _reference(positions, inv_freq)[1]) > 1e-3  # why "exact" is the default
    with pytest.raises(ValueError, match=r"angles must be one of \('exact', 'fp32'\), got angles='fp64'"):
        cos_sin(positions, inv_freq, "fp64")


# --- absolute sinusoids --------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(position=st.integers(0, LIMIT - 1), layout=st.sampled_from(["interleaved", "concat"]))
@example(position=10_000, layout="interleaved")
@example(position=100_000, layout="interleaved")
@example(position=1_000_000, layout="concat")
@example(position=LIMIT - 1, layout="interleaved")
def test_sinusoid_tables_are_exact(position, layout):
    positions = _positions(position)
    module = Sinusoidal(64, layout=layout)
    cos, sin = _reference(positions, module.inv_freq)
    expected = torch.cat((sin, cos), -1) if layout == "concat" else torch.stack((sin, cos), -1).flatten(-2)
    assert max_abs_diff(module(positions), expected) <= ATOL
    scaled = ScaledSinusoidal(64, layout=layout)
    assert max_abs_diff(scaled(positions), expected * scaled.scale) <= ATOL
    cached = Sinusoidal(64, layout=layout, max_len=8)
    assert max_abs_diff(cached(positions), expected) <= ATOL


@pytest.mark.parametrize("cls, n", [(Sinusoidal2D, 2), (Sinusoidal3D, 3)])
def test_grid_sinusoids_are_exact_at_large_coordinates(cls, n):
    module = cls(48)
    coordinates = torch.tensor([[p] * n for p in LARGE])  # (4, n)
    expected = []
    for axis in range(n):
        cos, sin = _reference(coordinates[:, axis], module.axis.inv_freq)
        expected.append(torch.stack((sin, cos), -1).flatten(-2))
    assert max_abs_diff(module(coordinates), torch.cat(expected, -1)[:, :48]) <= ATOL


def test_neighbours_at_2_pow_24_differ():
    """Neighbouring positions at the top of the float32 integers give different rows (and past it)."""
    positions = torch.tensor([LIMIT - 2, LIMIT - 1])
    for table in (Sinusoidal(64)(positions), Sinusoidal2D(64)(positions[:, None].expand(2, 2))):
        assert max_abs_diff(table[0], table[1]) > 1e-3
    cos, _ = RotaryEmbedding(128).cos_sin(positions)
    assert max_abs_diff(cos[0], cos[1]) > 1e-3
    beyond = torch.tensor([LIMIT, LIMIT + 1])  # one float32 number: the float32 product collapses them
    assert torch.equal(*Sinusoidal(64, angles="fp32")(beyond))
    assert max_abs_diff(*Sinusoidal(64)(beyond)) > 1e-3


# --- rotary variants -----------------------------------------------------------------------------

ROTARY = {
    "rope": lambda: RotaryEmbedding(128),
    "rope_cached": lambda: RotaryEmbedding(128, max_len=16),
    "linear": lambda: LinearScalingRotary(128, factor=4.0),
    "ntk": lambda: NTKAwareRotary(128, factor=4.0),
    "yarn": lambda: YaRNRotary(128, factor=16.0, original_max_len=4096),
    "llama3": lambda: Llama3Rotary(128, factor=8.0, original_max_len=8192, base=500000.0),
    "proportional": lambda: ProportionalRotary(128, rope_fraction=0.5, factor=2.0),
    "longrope": lambda: LongRoPERotary(
        8, short_factor=[1.0, 1.5, 2.0, 3.0], long_factor=[1.0, 2.0, 4.0, 8.0], original_max_len=4096, factor=8.0
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", sorted(ROTARY))
@pytest.mark.parametrize("position", LARGE)
def test_rotary_cos_sin_are_exact(name, position):
    rope = ROTARY[name]()
    positions = _positions(position)
    inv_freq = rope.long_inv_freq if name == "longrope" else rope.inv_freq  # beyond the original length
    cos, sin = _reference(positions, inv_freq)
    scale = rope.attention_scaling
    got_cos, got_sin = rope.cos_sin(positions)
    assert max(max_abs_diff(got_cos, cos * scale), max_abs_diff(got_sin, sin * scale)) <= ATOL * max(scale, 1.0)
    if rope.cache_size:
        cached_cos, _ = rope.cached_cos_sin(16)
        assert max_abs_diff(cached_cos, _reference(torch.arange(16), inv_freq)[0] * scale) <= ATOL


@pytest.mark.parametrize("position", LARGE)
def test_dynamic_ntk_cos_sin_are_exact(position):
    rope = DynamicNTKRotary(64, factor=2.0, original_max_len=4096)
    positions = _positions(position)
    inv_freq = dynamic_ntk_inv_freq(positions.max() + 1, rope.base, rope.factor, rope.original_max_len, 64)
    cos, sin = _reference(positions, inv_freq)
    got_cos, got_sin = rope.cos_sin(positions)
    assert max(max_abs_diff(got_cos, cos), max_abs_diff(got_sin, sin)) <= ATOL


@pytest.mark.parametrize("position", LARGE)
def test_rotated_queries_are_exact(position):
    """The whole forward of RoPE and xPos at large positions against a float64 rotation."""
    gen = torch.Generator().manual_seed(position % 1000)
    q = torch.randn(1, 2, 5, 16, generator=gen)
    positions = _positions(position)
    rope = RotaryEmbedding(16)
    cos, sin = _reference(positions, rope.inv_freq)
    expected = rotate_reference(q.double(), cos.double(), sin.double())
    assert max_abs_diff(rope(q, q, positions)[0], expected) <= 4 * ATOL

    xpos = XPos(16, scale_base=512)
    center = (2 * int(positions[0]) + positions.numel()) // 2  # (min + max + 1) // 2
    scale = xpos.zeta.double() ** ((positions.double() - center) / 512)[:, None]
    cos, sin = _reference(positions, xpos.inv_freq)
    expected = rotate_reference(q.double(), cos.double() * scale, sin.double() * scale, "interleaved")
    assert max_abs_diff(xpos(q, q, positions)[0], expected) <= 4 * ATOL


def test_exact_angles_stay_within_the_fp32_error_of_transformers_at_small_positions():
    """Against transformers' fp32 product the difference is that product's own rounding error."""
    rope, legacy = RotaryEmbedding(64), RotaryEmbedding(64, angles="fp32")
    positions = torch.arange(4096)
    bound = 0.5 * 2.0**-23 * 4096 * 2  # half an ulp of the largest angle (< 4096 rad), plus cos's own ulp
    assert max_abs_diff(rope.cos_sin(positions)[0], legacy.cos_sin(positions)[0]) <= bound
    assert math.isclose(float(rope.cos_sin(torch.tensor([0]))[0][0, 0]), 1.0)
