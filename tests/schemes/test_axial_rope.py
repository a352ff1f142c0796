"""Axial RoPE: full-tensor parity with rotary-embedding-torch's axial frequencies, and the N-D invariances."""

from __future__ import annotations

import pytest
import torch

from posembed.schemes.base import Kind
from posembed.schemes.rotary.axial import AxialRotary, axial_cos_sin, axis_coordinates
from posembed.schemes.rotary.rope import RotaryEmbedding
from tests.helpers import assert_close

rotary_embedding_torch = pytest.importorskip("rotary_embedding_torch")


def _grid(*sizes: int) -> torch.Tensor:
    """Row-major coordinates of a grid ``sizes``, ``(prod(sizes), A)``."""
    return torch.cartesian_prod(*[torch.arange(n) for n in sizes]).reshape(-1, len(sizes))


def _reference(axis_dim: int, sizes: tuple[int, ...], x: torch.Tensor, **kwargs) -> torch.Tensor:
    """rotary-embedding-torch: ``apply_rotary_emb(get_axial_freqs(*sizes))`` on ``x`` ``(B, H, T, D)``."""
    ref = rotary_embedding_torch.RotaryEmbedding(dim=axis_dim, **kwargs)
    freqs = ref.get_axial_freqs(*sizes).reshape(-1, axis_dim * len(sizes))  # (T, A * axis_dim)
    return rotary_embedding_torch.apply_rotary_emb(freqs, x)


@pytest.mark.parametrize(
    "sizes, head_dim, axis_dim",
    [((3, 5), 16, 8), ((2, 3, 4), 24, 8), ((4, 4), 20, 6)],  # image, video, partial (8 of 20 channels pass through)
    ids=["image", "video", "partial"],
)
@pytest.mark.parametrize("angles", ["fp32", "exact"])
def test_lang_frequencies_equal_rotary_embedding_torch(sizes, head_dim, axis_dim, angles):
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, _grid(*sizes).shape[0], head_dim), torch.randn(2, 3, _grid(*sizes).shape[0], head_dim)
    rope = AxialRotary(head_dim, num_axes=len(sizes), axis_dim=axis_dim, angles=angles)
    q_rot, k_rot = rope(q, k, _grid(*sizes))
    assert_close(q_rot, _reference(axis_dim, sizes, q))
    assert_close(k_rot, _reference(axis_dim, sizes, k))
    if angles == "fp32":  # the same float32 angles: cos/sin bit for bit (the rotation rounds within 1 ulp)
        ref = rotary_embedding_torch.RotaryEmbedding(dim=axis_dim)
        freqs = ref.get_axial_freqs(*sizes).reshape(-1, axis_dim * len(sizes))[:, ::2]  # (T, pairs): one per pair
        cos, sin = rope.cos_sin(_grid(*sizes))
        assert torch.equal(cos, freqs.cos()) and torch.equal(sin, freqs.sin())


def test_pixel_frequencies_equal_rotary_embedding_torch():
    """``freqs_for='pixel'``: coordinates are ``linspace(-1, 1)`` per axis, frequencies
    ``linspace(1, max_freq/2) * pi``."""
    torch.manual_seed(1)
    sizes, head_dim, axis_dim = (4, 6), 16, 8
    coords = torch.cartesian_prod(torch.linspace(-1, 1, sizes[0]), torch.linspace(-1, 1, sizes[1]))  # (24, 2)
    q = torch.randn(1, 2, coords.shape[0], head_dim)
    rope = AxialRotary(head_dim, axis_dim=axis_dim, frequencies="pixel", max_freq=64.0, angles="fp32")
    q_rot, _ = rope(q, q, coords)
    assert_close(q_rot, _reference(axis_dim, sizes, q, freqs_for="pixel", max_freq=64.0))
    # exact angles: the float64 product of the same float32 coordinates and frequencies (angles reach 32 pi,
    # where the float32 product of the reference is off by ~4e-6 rad)
    exact, _ = AxialRotary(head_dim, axis_dim=axis_dim, frequencies="pixel", max_freq=64.0)(q, q, coords)
    ref = rotary_embedding_torch.RotaryEmbedding(dim=axis_dim, freqs_for="pixel", max_freq=64.0).double()
    freqs = ref.get_axial_freqs(*sizes).reshape(-1, 2 * axis_dim)  # float64 angles
    assert_close(exact, rotary_embedding_torch.apply_rotary_emb(freqs, q.double()).float())


def test_theta_and_default_axis_dim():
    rope = AxialRotary(12, num_axes=3, base=100.0)  # 12 // 3 = 4 channels per axis
    assert (rope.axis_dim, rope.rotary_dim) == (4, 12)
    q = torch.randn(1, 1, 8, 12)
    assert_close(rope(q, q, _grid(2, 2, 2))[0], _reference(4, (2, 2, 2), q, theta=100.0))
    assert AxialRotary(10, num_axes=2).axis_dim == 4  # 10 // 2 = 5, rounded down to even


def test_one_axis_is_interleaved_rope():
    q, k = torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    axial = AxialRotary(8, num_axes=1)
    plain = RotaryEmbedding(8, layout="interleaved")
    for a, b in zip(axial(q, k), plain(q, k)):
        assert_close(a, b)


def test_scores_depend_only_on_coordinate_differences():
    torch.manual_seed(2)
    rope = AxialRotary(16, num_axes=2)
    q, k = torch.randn(1, 2, 12, 16), torch.randn(1, 2, 12, 16)
    grid = _grid(3, 4)
    scores = lambda c: (lambda qr, kr: qr @ kr.transpose(-1, -2))(*rope(q, k, c))  # noqa: E731
    assert_close(scores(grid), scores(grid + torch.tensor([7, 100])), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(scores(grid), scores(grid.flip(-1)), atol=1e-3)  # the axes are not interchangeable


def test_position_forms_agree():
    rope = AxialRotary(8, num_axes=2)
    q, k = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    seq = torch.arange(5)
    diagonal = seq[:, None].expand(5, 2)
    expected = rope(q, k, diagonal)
    for ids in (None, seq, diagonal[None], diagonal[None].expand(2, 5, 2)):  # default, sequence, (1, T, A), (B, T, A)
        for got, want in zip(rope(q, k, ids), expected):
            assert torch.equal(got, want)
    per_row = torch.stack([_grid(1, 5)[:, [1, 0]], _grid(5, 1)])  # (2, 5, 2): a row, then a column
    q_rot, _ = rope(q, k, per_row)
    for b in range(2):
        assert torch.equal(q_rot[b : b + 1], rope(q[b : b + 1], k[b : b + 1], per_row[b])[0])


def test_cached_keys_equal_full():
    rope = AxialRotary(8, num_axes=2)
    grid = _grid(3, 3)
    q, k = torch.randn(1, 2, 9, 8), torch.randn(1, 2, 9, 8)
    q_full, k_full = rope(q, k, grid)
    q_last, k_all = rope(q[..., -2:, :], k, grid[-2:], k_position_ids=grid)
    assert torch.equal(q_last, q_full[..., -2:, :]) and torch.equal(k_all, k_full)


def test_dtypes_rotation_and_meta_init():
    rope = AxialRotary(8, num_axes=2)
    q = torch.randn(1, 2, 6, 8)
    q_half, _ = rope(q.half(), q.half(), _grid(2, 3))
    assert q_half.dtype == torch.float16
    assert_close(q_half, rope(q, q, _grid(2, 3))[0].half())
    assert_close(rope(q, q, _grid(2, 3))[0].norm(dim=-1), q.norm(dim=-1))
    assert rope.half().inv_freq.dtype == torch.float32  # .half() keeps the frequencies exact
    meta = AxialRotary(8, num_axes=2, device="meta").to_empty(device="cpu")
    meta.reset_parameters()
    assert torch.equal(meta.inv_freq, rope.inv_freq) and torch.equal(meta.axis_of, rope.axis_of)
    assert rope.kind is Kind.ROTARY and rope.state_dict() == {}


def test_cos_sin_pick_each_pair_axis():
    cos, sin = axial_cos_sin(torch.tensor([[1, 10]]), torch.tensor([0.5, 0.25, 0.5, 0.25]), torch.tensor([0, 0, 1, 1]))
    assert_close(sin, torch.tensor([[0.5, 0.25, 5.0, 2.5]]).sin())


def test_errors():
    with pytest.raises(ValueError, match="axis_dim=6 must be even with num_axes \\* axis_dim = 12 <= head_dim=8"):
        AxialRotary(8, axis_dim=6)
    with pytest.raises(ValueError, match="head_dim=2 is too small for num_axes=3"):
        AxialRotary(2, num_axes=3)
    with pytest.raises(ValueError, match="frequencies must be one of \\('lang', 'pixel'\\), got 'pix'"):
        AxialRotary(8, frequencies="pix")
    with pytest.raises(ValueError, match=r"position_ids has shape \(5, 3\); expected coordinates \(5, 2\)"):
        axis_coordinates(torch.zeros(5, 3), torch.zeros(1, 1, 5, 4), 2)
    rope = AxialRotary(8)
    with pytest.raises(ValueError, match="pass k_position_ids"):
        rope(torch.randn(1, 1, 2, 8), torch.randn(1, 1, 3, 8))
    with pytest.raises(ValueError, match="head_dim=8, but the attention layer has head_dim=4"):
        rope.check_attention(num_heads=2, head_dim=4, causal=True)
