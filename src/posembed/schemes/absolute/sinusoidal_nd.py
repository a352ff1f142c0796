"""Sinusoidal positions on 2-D and 3-D grids (image patches, video, volumes).

Each axis gets its own block of channels holding the 1-D sinusoid of that coordinate
(:func:`~posembed.schemes.absolute.sinusoidal.sinusoidal_table`), in axis order:
``[PE(row) | PE(col)]`` for 2-D, ``[PE(x) | PE(y) | PE(z)]`` for 3-D. Every axis uses the same
frequencies. This is the layout of the ``positional-encodings`` package
(``PositionalEncoding2D`` / ``PositionalEncoding3D``), including how it
splits a width that ``2 * num_axes`` does not divide: each axis block is
``2 * ceil(C / (2 * num_axes))`` wide and the last block is cut so the total is ``C``.

Where posembed differs from ``positional-encodings`` (the tests check parity everywhere else):

- input: explicit integer coordinates ``(T, n)`` / ``(B, T, n)`` (any set of points, any
  order), not a feature tensor whose shape implies a full grid; :meth:`grid` gives the full grid;
- odd ``C`` is an error here (a sin without its cos); ``positional-encodings`` drops the last channel;
- a width that would leave an axis without channels (2-D: ``C = 2``; 3-D: ``C = 2, 4, 8``) is an
  error here; ``positional-encodings`` silently encodes that axis with nothing (a 3x3x3 grid at
  ``C = 8`` gives 9 distinct rows for 27 cells);
- the angles are exact (float64 products, :mod:`posembed.schemes.phases`): within 2.5e-7 of the
  float64 truth at every coordinate up to ``2**24`` (``angles="fp32"``: the reference's float32
  product, bit for bit);
- ``base`` and ``layout="concat"`` (``[sin | cos]`` within each axis block) are options here;
  ``positional-encodings`` is always ``base=10000``, interleaved;
- the frequencies are rounded once from float64 (``positional-encodings`` computes them in fp32,
  an ulp apart here and there: differences of order 1e-7 at small coordinates).
"""

from __future__ import annotations

import math
from typing import ClassVar

from torch import Tensor

from posembed._utils.checks import check_index_tensor
from posembed.schemes.absolute.sinusoidal import Layout, Sinusoidal, check_sinusoid_args, sinusoidal_table
from posembed.schemes.base import AbsoluteScheme
from posembed.schemes.positions import grid_coordinates  # re-exported: a grid's coordinates are position ids

__all__ = [
    "Sinusoidal2D", "Sinusoidal3D", "axis_width", "check_axis_channels", "grid_coordinates", "sinusoidal_nd_table",
]  # fmt: skip


def axis_width(dim: int, num_axes: int) -> int:
    """Channels given to each axis: ``2 * ceil(C / (2 * num_axes))`` (the last block is cut to fit C).

    >>> axis_width(64, 2), axis_width(64, 3), axis_width(768, 3)
    (32, 22, 256)
    """
    return 2 * math.ceil(dim / (2 * num_axes))


def _last_block(dim: int, num_axes: int) -> int:
    return dim - (num_axes - 1) * axis_width(dim, num_axes)


def check_axis_channels(dim: int, num_axes: int, name: str = "the grid sinusoid") -> int:
    """``dim`` if every axis gets at least one sin/cos pair, else a ``ValueError`` naming working widths.

    With blocks of ``axis_width(C, n)`` the last axis gets what is left of ``C``, which is nothing
    for 2-D ``C = 2`` and 3-D ``C = 2, 4, 8``: that axis would not be encoded at all.

    >>> check_axis_channels(10, 3)
    10
    >>> check_axis_channels(8, 3)  # doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: ... dim=8 leaves axis 2 of 3 without channels (blocks of 4: 4 + 4 + 0); ... is 6,
    the next one above 8 is 10
    """
    if _last_block(dim, num_axes) >= 2:
        return dim
    width = axis_width(dim, num_axes)
    blocks = [min(width, max(dim - axis * width, 0)) for axis in range(num_axes)]
    empty = blocks.index(0)
    above = next(c for c in range(dim + 2, dim + 4 * num_axes + 4, 2) if _last_block(c, num_axes) >= 2)
    raise ValueError(
        f"{name} with dim={dim} leaves axis {empty} of {num_axes} without channels (blocks of {width}: "
        f"{' + '.join(map(str, blocks))}); the smallest width that gives every axis channels is {2 * num_axes}, "
        f"the next one above {dim} is {above}"
    )


def sinusoidal_nd_table(
    coordinates: Tensor,
    dim: int,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    *,
    inv_freq: Tensor | None = None,
    angles: str = "exact",
) -> Tensor:
    """Sinusoidal vectors of n-D ``coordinates`` in fp32: one 1-D sinusoid block per axis.

    Args:
        coordinates: ``(..., n)`` coordinates, axis order matching the channel blocks.
        dim: total channels C (even; every axis must get channels, see :func:`check_axis_channels`).
        base, layout, angles: as :func:`~posembed.schemes.absolute.sinusoidal.sinusoidal_table`.
        inv_freq: precomputed frequencies of one axis block (``axis_width(C, n) / 2`` of them).

    Shape:
        ``(..., n)`` -> ``(..., C)`` float32.

    Example:
        >>> import torch
        >>> sinusoidal_nd_table(torch.tensor([0, 1]), 4)
        tensor([0.0000, 1.0000, 0.8415, 0.5403])
    """
    num_axes = coordinates.shape[-1]
    width = axis_width(check_axis_channels(check_sinusoid_args(dim, base, layout), num_axes), num_axes)
    blocks = sinusoidal_table(coordinates, width, base, layout, inv_freq=inv_freq, angles=angles)  # (..., n, width)
    return blocks.flatten(-2)[..., :dim]  # (..., C)


class _SinusoidalND(AbsoluteScheme):
    """Shared body of :class:`Sinusoidal2D` and :class:`Sinusoidal3D` (``num_axes`` differs)."""

    num_axes: ClassVar[int]
    extrapolates = False

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        layout: Layout = "interleaved",
        angles: str = "exact",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.dim = check_axis_channels(check_sinusoid_args(dim, base, layout), self.num_axes, type(self).__name__)
        # one axis block: owns the fp32 frequencies and the output dtype (kept fp32 under .to(dtype))
        width = axis_width(self.dim, self.num_axes)
        self.axis = Sinusoidal(width, base=base, layout=layout, angles=angles, device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        self.axis.reset_parameters()

    def forward(self, coordinates: Tensor) -> Tensor:
        self._check_coordinates(coordinates)
        axis = self.axis
        out = sinusoidal_nd_table(
            coordinates, self.dim, axis.base, axis.layout, inv_freq=axis.inv_freq, angles=axis.angles
        )
        return out.to(axis.dtype)  # (T, C) or (B, T, C)

    def grid(self, *sizes: int) -> Tensor:
        """The encoding of every cell of a full grid, shape ``(*sizes, C)``."""
        if len(sizes) != self.num_axes:
            raise ValueError(f"{type(self).__name__}.grid takes {self.num_axes} sizes, got {sizes}")
        coordinates = grid_coordinates(*sizes, device=self.axis.inv_freq.device)  # (T, n)
        return self(coordinates).reshape(*sizes, self.dim)  # (*sizes, C)

    def _check_coordinates(self, coordinates: Tensor) -> None:
        check_index_tensor(coordinates, "coordinates", None)  # values not read while compiling / on meta
        n = self.num_axes
        if coordinates.dim() not in (2, 3) or coordinates.shape[-1] != n:
            raise ValueError(
                f"{type(self).__name__} takes coordinates of shape (T, {n}) or (B, T, {n}), "
                f"got {tuple(coordinates.shape)}; build a grid's with grid_coordinates(*sizes)"
            )

    def extra_repr(self) -> str:
        axis = self.axis
        return f"dim={self.dim}, axis_width={axis.dim}, base={axis.base:g}, layout={axis.layout!r}"


class Sinusoidal2D(_SinusoidalND):
    """Fixed sinusoidal positions of 2-D coordinates (row, column), e.g. image patches.

    Channels ``[PE_1D(row) | PE_1D(col)]``, each block ``2 * ceil(C / 4)`` wide (the second cut
    to fit C), the channel layout of ``positional_encodings.torch_encodings.PositionalEncoding2D``.
    The 2-D extension of the sinusoid is Wang & Liu 2020 ("Translating math formula images to
    LaTeX sequences using deep neural networks with sequence-level training", IJDAR).

    Args:
        dim: total width C (even, at least 4 so that both axes get channels).
        base: wavelength base of the 1-D sinusoid on each axis.
        layout: ``"interleaved"`` or ``"concat"`` within each axis block.
        angles, device, dtype: as :class:`~posembed.schemes.absolute.sinusoidal.Sinusoidal` (fp32 math).

    Shape:
        - coordinates: ``(T, 2)`` or ``(B, T, 2)`` integers ``>= 0``.
        - output: ``(T, C)`` or ``(B, T, C)``; :meth:`grid` ``(h, w)`` -> ``(h, w, C)``.

    Example:
        >>> import torch
        >>> pos = Sinusoidal2D(dim=8)
        >>> pos(torch.tensor([[0, 0], [2, 5]])).shape
        torch.Size([2, 8])
        >>> pos.grid(3, 4).shape
        torch.Size([3, 4, 8])
    """

    name = "sinusoidal_2d"
    paper = "Vaswani et al. 2017; Wang & Liu 2020 (2-D)"
    num_axes = 2


class Sinusoidal3D(_SinusoidalND):
    """Fixed sinusoidal positions of 3-D coordinates (x, y, z), e.g. video or volumes.

    Channels ``[PE_1D(x) | PE_1D(y) | PE_1D(z)]``, each block ``2 * ceil(C / 6)`` wide (the last
    cut to fit C), as ``positional_encodings.torch_encodings.PositionalEncoding3D``.

    Args:
        dim: total width C (even; 6, 10 or more so that every axis gets channels: 8 is refused).
        base: wavelength base of the 1-D sinusoid on each axis.
        layout: ``"interleaved"`` or ``"concat"`` within each axis block.
        angles, device, dtype: as :class:`~posembed.schemes.absolute.sinusoidal.Sinusoidal` (fp32 math).

    Shape:
        - coordinates: ``(T, 3)`` or ``(B, T, 3)`` integers ``>= 0``.
        - output: ``(T, C)`` or ``(B, T, C)``; :meth:`grid` ``(h, w, d)`` -> ``(h, w, d, C)``.

    Example:
        >>> pos = Sinusoidal3D(dim=12)
        >>> pos.grid(2, 3, 4).shape
        torch.Size([2, 3, 4, 12])
    """

    name = "sinusoidal_3d"
    paper = "Vaswani et al. 2017; positional-encodings (3-D)"
    num_axes = 3
