"""2-D / 3-D sinusoidal positions: parity with positional-encodings, axis blocks, errors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from positional_encodings.torch_encodings import PositionalEncoding2D, PositionalEncoding3D

from posembed import Sinusoidal, Sinusoidal2D, Sinusoidal3D
from posembed.schemes.absolute.sinusoidal import sinusoid_inv_freq
from posembed.schemes.absolute.sinusoidal_nd import axis_width, grid_coordinates, sinusoidal_nd_table
from tests.helpers import assert_close

FREQ_RTOL = 4 * 2.0**-23  # see test_sinusoidal.py: reference fp32 frequencies vs ours


def angle_atol(max_position: int) -> float:
    return max_position * FREQ_RTOL + 1e-6


# widths divisible by 2n, and widths the reference rounds up then cuts (2-D: 6, 10; 3-D: 64, 256, 10);
# 2-D dim 2 and 3-D dim 8 (an axis without channels) are refused: test_widths_that_leave_an_axis_empty
@pytest.mark.parametrize("dim", [64, 384, 6, 10])
def test_grid_matches_positional_encodings_2d(dim):
    reference = PositionalEncoding2D(dim)
    expected = reference(torch.zeros(1, 17, 23, dim))[0]  # (h, w, C)
    module = Sinusoidal2D(dim)
    assert reference.channels == module.axis.dim == axis_width(dim, 2)
    assert_close(sinusoid_inv_freq(module.axis.dim), reference.inv_freq, atol=0, rtol=FREQ_RTOL)
    assert_close(module.grid(17, 23), expected, atol=angle_atol(22), rtol=0)
    coordinates = grid_coordinates(17, 23)
    same_freq = sinusoidal_nd_table(coordinates, dim, inv_freq=reference.inv_freq, angles="fp32").reshape(17, 23, dim)
    assert_close(same_freq, expected, atol=0, rtol=0)


@pytest.mark.parametrize("dim", [96, 64, 256, 10, 12])
def test_grid_matches_positional_encodings_3d(dim):
    reference = PositionalEncoding3D(dim)
    expected = reference(torch.zeros(1, 5, 7, 9, dim))[0]  # (h, w, d, C)
    module = Sinusoidal3D(dim)
    assert reference.channels == module.axis.dim == axis_width(dim, 3)
    assert_close(module.grid(5, 7, 9), expected, atol=angle_atol(8), rtol=0)
    same_freq = sinusoidal_nd_table(grid_coordinates(5, 7, 9), dim, inv_freq=reference.inv_freq, angles="fp32")
    assert_close(same_freq.reshape(5, 7, 9, dim), expected, atol=0, rtol=0)


def test_each_axis_block_is_the_1d_sinusoid_of_its_coordinate():
    coordinates = torch.tensor([[3, 40, 7], [0, 1, 1000]])
    out = Sinusoidal3D(48, layout="concat")(coordinates)
    axis = Sinusoidal(16, layout="concat")
    for a in range(3):
        assert torch.equal(out[:, 16 * a : 16 * (a + 1)], axis(coordinates[:, a]))


def test_grid_coordinates_are_row_major():
    coordinates = grid_coordinates(2, 3, 4)
    assert coordinates.shape == (24, 3)
    assert coordinates[5].tolist() == [0, 1, 1]
    assert torch.equal(coordinates, torch.cartesian_prod(torch.arange(2), torch.arange(3), torch.arange(4)))


@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 3), length=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_batched_coordinates_equal_stacked_rows_and_any_order(batch, length, seed):
    generator = torch.Generator().manual_seed(seed)
    coordinates = torch.randint(0, 500, (batch, length, 2), generator=generator)
    module = Sinusoidal2D(32)
    out = module(coordinates)
    assert out.shape == (batch, length, 32)
    assert torch.equal(out, torch.stack([module(row) for row in coordinates]))
    order = torch.randperm(length, generator=generator)
    assert torch.equal(module(coordinates[0, order]), out[0, order])


def test_grid_cells_equal_explicit_coordinates():
    module = Sinusoidal2D(16)
    grid = module.grid(6, 7)
    assert torch.equal(grid[2, 5], module(torch.tensor([[2, 5]]))[0])
    assert (grid[2, 5] - grid[5, 2]).abs().max() > 0.1  # rows and columns are told apart


def test_dtype_follows_argument_with_fp32_math():
    coordinates = torch.tensor([[10000, 3], [7, 10001]])
    fp32 = Sinusoidal2D(64)(coordinates)
    assert torch.equal(Sinusoidal2D(64, dtype=torch.bfloat16)(coordinates), fp32.to(torch.bfloat16))
    moved = Sinusoidal3D(12).to(torch.bfloat16)
    assert moved.axis.inv_freq.dtype == torch.float32 and moved.grid(2, 2, 2).dtype == torch.bfloat16
    assert dict(moved.state_dict()) == {}


def test_compiled_equals_eager_without_graph_breaks():
    module = Sinusoidal2D(16)
    coordinates = torch.randint(0, 50, (2, 5, 2))
    compiled = torch.compile(module, backend="aot_eager", fullgraph=True)
    assert_close(compiled(coordinates), module(coordinates))


def test_repr_and_registry():
    assert "dim=10, axis_width=6" in repr(Sinusoidal2D(10))
    assert (Sinusoidal2D.name, Sinusoidal3D.name) == ("sinusoidal_2d", "sinusoidal_3d")
    assert Sinusoidal3D(6).kind.value == "absolute"


@pytest.mark.parametrize(("cls", "n"), [(Sinusoidal2D, 2), (Sinusoidal3D, 3)])
def test_bad_coordinates(cls, n):
    module = cls(12)
    with pytest.raises(ValueError, match=rf"\(T, {n}\) or \(B, T, {n}\).*\(4, {n + 1}\)"):
        module(torch.zeros(4, n + 1, dtype=torch.long))
    with pytest.raises(ValueError, match=rf"\(T, {n}\).*\(4,\)"):
        module(torch.zeros(4, dtype=torch.long))
    with pytest.raises(TypeError, match="float32"):
        module(torch.zeros(4, n))
    with pytest.raises(ValueError, match=r"-1.*>= 0"):
        module(torch.full((1, n), -1))
    with pytest.raises(ValueError, match=rf"takes {n} sizes, got \(3,\)"):
        module.grid(3)
    with pytest.raises(ValueError, match="size of axis 1 must be positive, got 0"):
        module.grid(*([2, 0, 2][:n]))


@pytest.mark.parametrize("cls", [Sinusoidal2D, Sinusoidal3D])
def test_bad_widths(cls):
    with pytest.raises(ValueError, match=r"even.*dim=9"):
        cls(9)
    with pytest.raises(ValueError, match=r"layout.*'rows'"):
        cls(8, layout="rows")


@pytest.mark.parametrize(
    ("cls", "dim", "smallest", "above"),
    [(Sinusoidal2D, 2, 4, 4), (Sinusoidal3D, 2, 6, 6), (Sinusoidal3D, 4, 6, 6), (Sinusoidal3D, 8, 6, 10)],
)
def test_widths_that_leave_an_axis_empty_are_refused(cls, dim, smallest, above):
    """positional-encodings gives the last axis no channels here (27 cells of a 3x3x3 grid -> 9 rows)."""
    message = (rf"dim={dim} leaves axis \d of \d without channels.*smallest width that gives every axis "
               rf"channels is {smallest}, the next one above {dim} is {above}")  # fmt: skip
    with pytest.raises(ValueError, match=message):
        cls(dim)
    with pytest.raises(ValueError, match="without channels"):
        sinusoidal_nd_table(torch.zeros(1, cls.num_axes, dtype=torch.long), dim)


@pytest.mark.parametrize("cls", [Sinusoidal2D, Sinusoidal3D])
def test_every_axis_gets_channels_or_the_constructor_refuses(cls):
    n = cls.num_axes
    for dim in range(2, 64, 2):
        try:
            module = cls(dim)
        except ValueError:
            continue
        width = module.axis.dim
        assert dim - (n - 1) * width >= 2, dim  # the last (cut) block keeps a sin/cos pair
        grid = module.grid(*([3] * n)).reshape(-1, dim)
        assert torch.unique(grid, dim=0).shape[0] == 3**n, dim  # every cell distinct
