"""Fixed sinusoidal positions (Vaswani et al. 2017) and their scaled variant (Hua et al. 2022).

``PE(pos, 2i) = sin(pos / base^(2i/C))``, ``PE(pos, 2i+1) = cos(pos / base^(2i/C))``.

Two channel layouts of the same numbers:

- ``"interleaved"`` (the paper, and the ``positional-encodings`` package):
  ``[sin w0 p, cos w0 p, sin w1 p, cos w1 p, ...]``;
- ``"concat"`` (x-transformers, tensor2tensor): ``[sin w0 p, sin w1 p, ..., cos w0 p, cos w1 p, ...]``.

There is no table limit: vectors are computed from the positions on the fly, with an optional
cache of the first ``max_len`` rows. The frequencies are float32; the angle ``p w`` is formed
exactly (float64, :mod:`posembed.schemes.phases`), so every value is within 2.5e-7 of the
float64 truth at every integer position up to ``2**24`` — the float32 product of the reference
libraries is off by 2e-3 at position 1e5 (d = 64) and cannot tell ``2**24 - 1`` from ``2**24 - 2``.
``angles="fp32"`` reproduces that product bit for bit, for parity. The dot product ``PE(x) . PE(x + k)`` depends
only on ``k`` and ``PE(x + k)`` is a fixed rotation of ``PE(x)``: the tests check both.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_index_tensor, check_positive_int, values_readable
from posembed.schemes.base import AbsoluteScheme
from posembed.schemes.fp32_buffers import Fp32Buffer
from posembed.schemes.phases import check_angles, cos_sin

__all__ = [
    "SINUSOID_LAYOUTS",
    "Sinusoidal",
    "ScaledSinusoidal",
    "sinusoid_inv_freq",
    "sinusoid_from_angles",
    "sinusoidal_table",
]

Layout = Literal["interleaved", "concat"]
#: the channel layouts every sinusoidal scheme accepts (RoPE's are ``rotation.ROPE_LAYOUTS``)
SINUSOID_LAYOUTS: tuple[str, ...] = ("interleaved", "concat")


def check_sinusoid_args(dim: object, base: object, layout: object) -> int:
    """Validate the arguments every sinusoidal scheme shares; return ``dim``."""
    dim = check_positive_int(dim, "dim")
    if dim % 2:
        raise ValueError(f"dim must be even (one sin and one cos channel per frequency), got dim={dim}")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1 or math.isinf(base):
        raise ValueError(f"base must be a finite number > 1, got base={base!r}")
    if layout not in SINUSOID_LAYOUTS:
        raise ValueError(f"layout must be one of {SINUSOID_LAYOUTS}, got layout={layout!r}")
    return dim


def sinusoid_inv_freq(dim: int, base: float = 10000.0, device: torch.device | str | None = None) -> Tensor:
    """The ``C/2`` angular frequencies ``w_i = base^(-2i/C)``, correctly rounded to fp32.

    Computed in float64 on the CPU, then rounded once (reference libraries compute them in fp32
    and differ from each other by an ulp here and there).

    >>> sinusoid_inv_freq(4)
    tensor([1.0000, 0.0100])
    """
    dim = check_sinusoid_args(dim, base, "interleaved")
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    return (1.0 / (float(base) ** exponents)).to(device=device, dtype=torch.float32)


def sinusoid_from_angles(angles: Tensor, layout: Layout = "interleaved") -> Tensor:
    """Sin and cos of ``angles`` ``(..., C/2)`` laid out as ``(..., C)``.

    >>> sinusoid_from_angles(torch.tensor([0.0, 0.0]), "concat")
    tensor([0., 0., 1., 1.])
    >>> sinusoid_from_angles(torch.tensor([0.0, 0.0]), "interleaved")
    tensor([0., 1., 0., 1.])
    """
    return _lay_out(angles.sin(), angles.cos(), layout)


def _lay_out(sin: Tensor, cos: Tensor, layout: str) -> Tensor:
    """``(..., C/2)`` sines and cosines as ``(..., C)`` channels in ``layout``."""
    if layout == "concat":
        return torch.cat((sin, cos), dim=-1)
    return torch.stack((sin, cos), dim=-1).flatten(-2)  # (..., C/2, 2) -> (..., C)


def sinusoidal_table(
    positions: Tensor,
    dim: int,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    *,
    inv_freq: Tensor | None = None,
    angles: str = "exact",
) -> Tensor:
    """Sinusoidal vectors of ``positions`` in fp32, whatever the positions' dtype.

    Args:
        positions: positions of any shape ``(...)``; integer or float (used as given).
        dim: channels C (even).
        base: the wavelength base (10000 in the paper).
        layout: ``"interleaved"`` or ``"concat"``.
        inv_freq: precomputed :func:`sinusoid_inv_freq` ``(C/2,)`` (recomputed when ``None``).
        angles: ``"exact"`` (float64 angles: within 2.5e-7 of the float64 truth at every
            integer position up to ``2**24``) or ``"fp32"`` (the float32 product of
            positional-encodings / x-transformers, bit for bit).

    Shape:
        ``(...)`` -> ``(..., C)`` float32.

    Example:
        >>> sinusoidal_table(torch.arange(2), 4)
        tensor([[0.0000, 1.0000, 0.0000, 1.0000],
                [0.8415, 0.5403, 0.0100, 0.9999]])
    """
    dim = check_sinusoid_args(dim, base, layout)
    if inv_freq is None:
        inv_freq = sinusoid_inv_freq(dim, base, device=positions.device)
    cos, sin = cos_sin(positions, inv_freq, check_angles(angles))  # (..., C/2) each
    return _lay_out(sin, cos, layout)


def check_position_ids(position_ids: Tensor) -> None:
    """Integer positions ``>= 0`` of shape ``(T,)`` or ``(B, T)``.

    Values are not read while compiling or on the meta device (see :func:`check_index_tensor`).
    """
    check_index_tensor(position_ids, "position_ids", None)
    if position_ids.dim() not in (1, 2):
        raise ValueError(f"position_ids must have shape (T,) or (B, T), got {tuple(position_ids.shape)}")


class Sinusoidal(AbsoluteScheme):
    """Fixed sinusoidal position vectors (Vaswani et al. 2017, "Attention Is All You Need").

    Args:
        dim: width C of each position vector (even).
        base: wavelength base; wavelengths run from ``2 pi`` to ``2 pi * base``.
        layout: ``"interleaved"`` (paper) or ``"concat"`` ([sin | cos], x-transformers).
        max_len: cache the first ``max_len`` rows at init; positions beyond it are computed
            (there is no length limit either way). ``None``: always compute.
        angles: ``"exact"`` (default; float64 angles, see the module docstring) or ``"fp32"``.
        device: where the frequency table (and cache) live.
        dtype: output dtype (default float32). The math is fp32 whatever this is; the result is
            rounded once at the end. ``module.to(dtype)`` changes the output dtype the same way
            without rounding the fp32 tables.

    Shape:
        - position_ids: ``(T,)`` or ``(B, T)`` integers ``>= 0``.
        - output: ``(T, C)`` or ``(B, T, C)``.

    Example:
        >>> pos = Sinusoidal(dim=4)
        >>> pos(torch.arange(2))
        tensor([[0.0000, 1.0000, 0.0000, 1.0000],
                [0.8415, 0.5403, 0.0100, 0.9999]])
        >>> Sinusoidal(dim=4, layout="concat")(torch.tensor([[1]]))
        tensor([[[0.8415, 0.0100, 0.5403, 0.9999]]])
    """

    name = "sinusoidal"
    paper = "Vaswani et al. 2017"
    extrapolates = False  # Press et al. 2022: perplexity explodes past the training length

    inv_freq = Fp32Buffer()  # (C/2,), float32 whatever the module's dtype
    table = Fp32Buffer()  # (max_len, C) or None, float32
    output_dtype: Tensor  # (0,), of the output dtype: a buffer that dtype casts move

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        layout: Layout = "interleaved",
        max_len: int | None = None,
        angles: str = "exact",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.dim = check_sinusoid_args(dim, base, layout)
        self.base = float(base)
        self.layout = layout
        self.angles = check_angles(angles)
        self.max_len = None if max_len is None else check_positive_int(max_len, "max_len")
        # an empty buffer of the output dtype: module.half() / .to(dtype) cast it, and forward follows it
        self.register_buffer(
            "output_dtype", torch.empty(0, device=device, dtype=dtype or torch.float32), persistent=False
        )
        self.inv_freq = torch.empty(0, device=device)
        self.table = None
        self.reset_parameters(device)

    def reset_parameters(self, device: torch.device | str | None = None) -> None:
        """(Re)build the fp32 frequency table and the optional cache (no learned parameters), e.g. after
        ``to_empty`` from the meta device (which leaves them uninitialised, as for any module)."""
        device = self.inv_freq.device if device is None else device
        self.inv_freq = sinusoid_inv_freq(self.dim, self.base, device=device)
        if self.max_len is not None:
            cached = torch.arange(self.max_len, device=self.inv_freq.device)
            self.table = self._compute(cached)

    @property
    def dtype(self) -> torch.dtype:
        """The output dtype: ``dtype=`` at construction, then whatever ``.half()`` / ``.to(dtype)`` made it
        (the tables stay float32)."""
        return self.output_dtype.dtype

    def forward(self, position_ids: Tensor) -> Tensor:
        check_position_ids(position_ids)
        if self.table is not None and _within(position_ids, self.table.shape[0]):
            out = nn.functional.embedding(position_ids.long(), self.table)
        else:
            out = self._compute(position_ids)
        return out.to(self.dtype)  # (T, C) or (B, T, C)

    def _compute(self, positions: Tensor) -> Tensor:
        return sinusoidal_table(positions, self.dim, self.base, self.layout, inv_freq=self.inv_freq, angles=self.angles)

    def extra_repr(self) -> str:
        cache = "" if self.max_len is None else f", max_len={self.max_len}"
        angles = "" if self.angles == "exact" else f", angles={self.angles!r}"
        return f"dim={self.dim}, base={self.base:g}, layout={self.layout!r}{cache}{angles}, dtype={self.dtype}"


def _within(position_ids: Tensor, length: int) -> bool:
    """True when every position has a cached row (one host sync; the eager path only)."""
    if not values_readable(position_ids):
        return False
    return position_ids.numel() == 0 or int(position_ids.max()) < length


class ScaledSinusoidal(AbsoluteScheme):
    """Sinusoidal positions times one learned scalar, initialised to ``C ** -0.5``.

    From Hua et al. 2022 ("Transformer Quality in Linear Time"), as x-transformers'
    ``ScaledSinusoidalEmbedding`` (which uses the ``"concat"`` layout: pass it for parity).
    The scale lets the model choose how loud position is relative to the token embedding.

    Args:
        dim: width C (even).
        base, layout, max_len, angles: as :class:`Sinusoidal`.
        device, dtype: of the scale parameter and of the output.

    Shape:
        - position_ids: ``(T,)`` or ``(B, T)`` integers ``>= 0``.
        - output: ``(T, C)`` or ``(B, T, C)``.

    Example:
        >>> pos = ScaledSinusoidal(dim=4)
        >>> pos.scale
        Parameter containing:
        tensor([0.5000], requires_grad=True)
        >>> pos(torch.arange(2))
        tensor([[0.0000, 0.5000, 0.0000, 0.5000],
                [0.4207, 0.2702, 0.0050, 0.5000]], grad_fn=<MulBackward0>)
    """

    name = "scaled_sinusoidal"
    paper = "Hua et al. 2022 (FLASH); Vaswani et al. 2017"
    extrapolates = False

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        layout: Layout = "interleaved",
        max_len: int | None = None,
        angles: str = "exact",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.sinusoidal = Sinusoidal(
            dim, base=base, layout=layout, max_len=max_len, angles=angles, device=device, dtype=dtype
        )
        self.dim = self.sinusoidal.dim
        self.scale = nn.Parameter(torch.empty(1, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.scale.fill_(self.dim**-0.5)

    def forward(self, position_ids: Tensor) -> Tensor:
        return self.sinusoidal(position_ids) * self.scale  # (T, C) or (B, T, C)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
