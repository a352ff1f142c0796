"""Axial rotary embeddings: RoPE over ``A`` position axes (images ``(h, w)``, video ``(t, h, w)``).

The rotated channel pairs are split between the axes: pair ``j`` turns by ``x[axis(j)] * w_j``,
where ``x`` is the token's coordinate on each axis. One rule serves three schemes, which differ
only in their frequencies ``w`` and in which axis each pair follows:

- :class:`AxialRotary` (this module): each axis gets its own block of ``axis_dim`` channels with
  the frequencies of a 1-D RoPE of width ``axis_dim`` (``"lang"``) or rotary-embedding-torch's
  pixel frequencies ``linspace(1, max_freq / 2) * pi`` (``"pixel"``); blocks in axis order,
  interleaved pairs: rotary-embedding-torch's ``get_axial_freqs`` convention;
- :class:`~posembed.schemes.rotary.pixtral.PixtralRotary`: one head-wide RoPE whose even
  frequencies follow the height and odd ones the width (Pixtral);
- :class:`~posembed.schemes.rotary.mrope.MRoPE`: one head-wide RoPE cut into three sections that follow
  time, height and width (Qwen2-VL).

Positions are coordinates ``(T, A)`` or ``(B, T, A)``. A sequence ``(T,)`` (and the default
``None = arange(T)``) sits at coordinate ``p`` on every axis, as Qwen2-VL places text tokens, and so
do batched sequences ``(B, T)`` (transformers' text ``position_ids``); a 2-D tensor that could be
either (its shape is ``(T, A)``) is read as coordinates.

The maths is :func:`axial_cos_sin` (cos/sin through :func:`posembed.schemes.phases.cos_sin`, so
``angles="exact"`` / ``"fp32"`` mean what they mean for :class:`~posembed.schemes.rotary.rope.RotaryEmbedding`)
and the rotation is :func:`~posembed.schemes.rotary.rotation.apply_rotary`, the one dispatch point.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from posembed._utils.checks import check_number, check_positive_int
from posembed.schemes.base import RotaryScheme
from posembed.schemes.fp32_buffers import Fp32Buffer
from posembed.schemes.phases import check_angles, cos_sin
from posembed.schemes.rotary.checks import check_base, check_head_dim
from posembed.schemes.rotary.rope import rope_inv_freq
from posembed.schemes.rotary.rotation import ROPE_LAYOUTS, apply_rotary

__all__ = [
    "AXIAL_FREQUENCIES", "AXIAL_ORDERS", "AXIAL_SPANS", "AxialRotary", "SectionedRotary", "axial_cos_sin",
    "axial_frequencies", "axis_coordinates",
]  # fmt: skip

#: frequency families of :class:`AxialRotary` (rotary-embedding-torch's ``freqs_for``)
AXIAL_FREQUENCIES: tuple[str, ...] = ("lang", "pixel")
#: how the axes' frequencies sit among the pairs: each axis' block after the other, or dealt round robin
AXIAL_ORDERS: tuple[str, ...] = ("blocks", "interleaved")
#: what ``layout`` spans: the whole rotated width, or each axis' block on its own (Gemma 4's vision tower)
AXIAL_SPANS: tuple[str, ...] = ("head", "axis")


def axial_frequencies(
    axis_dim: int,
    num_axes: int,
    frequencies: str = "lang",
    *,
    base: float = 10000.0,
    max_freq: float = 10.0,
    axis_order: tuple[int, ...] | None = None,
    order: str = "blocks",
) -> tuple[Tensor, Tensor]:
    """``(inv_freq, axis_of)``: every axis' ``axis_dim / 2`` frequencies, in blocks (block ``b``
    following coordinate ``axis_order[b]``) or dealt round robin (``order="interleaved"``: pair ``j``
    has frequency ``j // A`` of block ``j % A``).

    ``"lang"``: ``base^(-2i / axis_dim)``; ``"pixel"``: ``linspace(1, max_freq / 2, axis_dim / 2) * pi``.

    Shape: two tensors ``(num_axes * axis_dim / 2,)``, float32 and long.

    >>> inv_freq, axis_of = axial_frequencies(4, 2, base=100.0)
    >>> inv_freq, axis_of
    (tensor([1.0000, 0.1000, 1.0000, 0.1000]), tensor([0, 0, 1, 1]))
    >>> axial_frequencies(4, 2, base=100.0, axis_order=(1, 0), order="interleaved")[1]
    tensor([1, 0, 1, 0])
    """
    if frequencies == "lang":
        one = rope_inv_freq(axis_dim, base)
    elif frequencies == "pixel":
        one = torch.linspace(1.0, max_freq / 2, axis_dim // 2) * math.pi
    else:
        raise ValueError(f"frequencies must be one of {AXIAL_FREQUENCIES}, got {frequencies!r}")
    axes = torch.tensor(range(num_axes) if axis_order is None else axis_order, dtype=torch.long)
    if order == "interleaved":
        return one.repeat_interleave(num_axes), axes.repeat(one.numel())
    if order != "blocks":
        raise ValueError(f"order must be one of {AXIAL_ORDERS}, got {order!r}")
    return one.repeat(num_axes), axes.repeat_interleave(one.numel())


def axis_coordinates(ids: Tensor | None, x: Tensor, num_axes: int, name: str = "position_ids") -> Tensor:
    """Coordinates ``(T, A)`` or ``(B, T, A)`` for ``x`` ``(B, H, T, D)``: checked, sequences spread.

    ``None`` is ``arange(T)``; a sequence ``(T,)`` (or ``(B, T)``, unless its shape is ``(T, A)``) puts
    position ``p`` at ``(p, ..., p)``.

    >>> axis_coordinates(torch.tensor([[0, 5]]), torch.zeros(1, 1, 2, 4), 3).shape
    torch.Size([1, 2, 3])
    >>> axis_coordinates(torch.tensor([0, 5]), torch.zeros(1, 1, 2, 4), 3)
    tensor([[0, 0, 0],
            [5, 5, 5]])
    """
    batch, length = x.shape[0], x.shape[-2]
    if ids is None:
        ids = torch.arange(length, device=x.device)
    if ids.dim() == 1 and ids.shape[0] == length:
        return ids[:, None].expand(length, num_axes)  # (T, A)
    if ids.dim() == 2 and ids.shape[-1] == length and ids.shape[0] in (1, batch) and ids.shape != (length, num_axes):
        return ids[..., None].expand(*ids.shape, num_axes)  # batched sequences (B, T) -> (B, T, A)
    fits = ids.dim() in (2, 3) and ids.shape[-2:] == (length, num_axes)
    if not fits or (ids.dim() == 3 and ids.shape[0] not in (1, batch)):
        raise ValueError(
            f"{name} has shape {tuple(ids.shape)}; expected coordinates ({length}, {num_axes}) or "
            f"({batch}, {length}, {num_axes}), or a sequence ({length},), for x of shape {tuple(x.shape)} (B, H, T, D)"
        )
    return ids


def axial_cos_sin(coords: Tensor, inv_freq: Tensor, axis_of: Tensor, angles: str = "exact") -> tuple[Tensor, Tensor]:
    """cos and sin of ``coords[..., axis_of[j]] * inv_freq[j]`` for every rotated pair ``j``, float32.

    Shape:
        coords ``(..., A)``; inv_freq and axis_of ``(F,)`` -> two tensors ``(..., F)``.

    >>> cos, sin = axial_cos_sin(torch.tensor([[2, 3]]), torch.tensor([1.0, 1.0]), torch.tensor([0, 1]))
    >>> torch.allclose(sin, torch.tensor([[2.0, 3.0]]).sin())
    True
    """
    every_axis = cos_sin(coords, inv_freq, angles)  # each (..., A, F)
    index = axis_of.to(coords.device).expand(*coords.shape[:-1], 1, axis_of.numel())  # (..., 1, F)
    return tuple(part.gather(-2, index).squeeze(-2) for part in every_axis)  # type: ignore[return-value]


def _check_axis_order(axis_order: object, num_axes: int) -> tuple[int, ...]:
    if axis_order is None:
        return tuple(range(num_axes))
    if not isinstance(axis_order, (tuple, list)) or sorted(axis_order) != list(range(num_axes)):
        raise ValueError(f"axis_order must be a permutation of range(num_axes={num_axes}); got {axis_order!r}")
    return tuple(axis_order)


class SectionedRotary(RotaryScheme):
    """RoPE over ``num_axes`` coordinates: pair ``j`` turns by ``coords[axis_of[j]] * inv_freq[j]``.

    The base of :class:`AxialRotary`, :class:`~posembed.schemes.rotary.pixtral.PixtralRotary` and
    :class:`~posembed.schemes.rotary.mrope.MRoPE`; they set ``head_dim``, ``rotary_dim`` and ``num_axes``
    and implement :meth:`_frequencies`. Buffers are float32 / long and non-persistent; ``inv_freq``
    is an :class:`~posembed.schemes.fp32_buffers.Fp32Buffer`, so ``.half()`` / ``.to(dtype)`` leave
    it float32 (bit for bit) and ``.to(device)`` moves it.

    Shape:
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``.
        - position_ids: ``(Tq, A)``, ``(B, Tq, A)``, or a sequence ``(Tq,)``; ``None`` is ``arange(Tq)``.
        - k_position_ids: the keys' (a cache); ``None`` means ``position_ids`` (``Tq == Tk``).
        - output: ``(q, k)`` rotated, same shapes and dtypes.
    """

    num_axes: int
    rotary_dim: int
    axis_of: Tensor  # (rotary_dim / 2,) long: the coordinate axis each pair turns with, a non-persistent buffer
    # float32 whatever the model's dtype: casts skip it (kept as int32 bits), .to(device) moves it
    inv_freq = Fp32Buffer()  # (rotary_dim / 2,)

    def __init__(self, *, layout: str, angles: str, device=None) -> None:
        super().__init__()
        if layout not in ROPE_LAYOUTS:
            raise ValueError(f"layout must be one of {ROPE_LAYOUTS}, got {layout!r}")
        self.layout = layout
        self.angles = check_angles(angles)
        inv_freq, axis_of = self._frequencies()
        self.inv_freq = inv_freq.to(device, torch.float32)
        self.register_buffer("axis_of", axis_of.to(device, torch.long), persistent=False)

    def _frequencies(self) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        """``(inv_freq, axis_of)``, both ``(rotary_dim / 2,)``."""
        raise NotImplementedError

    def reset_parameters(self) -> None:
        """Rebuild the frequencies (after ``to_empty`` from the meta device)."""
        inv_freq, axis_of = self._frequencies()
        with torch.no_grad():
            self.inv_freq.copy_(inv_freq)
            self.axis_of.copy_(axis_of)

    def cos_sin(self, coords: Tensor) -> tuple[Tensor, Tensor]:
        """cos and sin (float32) of coordinates ``(..., A)`` -> two tensors ``(..., rotary_dim / 2)``."""
        return axial_cos_sin(coords, self.inv_freq, self.axis_of, self.angles)

    def _rotate_qk(
        self, q: Tensor, k: Tensor, position_ids: Tensor | None, k_position_ids: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        q_coords = axis_coordinates(position_ids, q, self.num_axes)
        if k_position_ids is None and k.shape[-2] != q.shape[-2]:
            raise ValueError(f"k has length {k.shape[-2]} but q has length {q.shape[-2]}; pass k_position_ids")
        k_coords = q_coords
        if k_position_ids is not None:
            k_coords = axis_coordinates(k_position_ids, k, self.num_axes, "k_position_ids")
        q_cs = self.cos_sin(q_coords)  # (T, F) or (B, T, F)
        k_cs = q_cs if k_coords is q_coords else self.cos_sin(k_coords)
        return self._rotate(q, *q_cs), self._rotate(k, *k_cs)

    def _rotate(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        if cos.dim() == 3:  # (B, T, F) from per-row coordinates
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B, 1, T, F)
        return apply_rotary(x, cos, sin, self.layout)


class AxialRotary(SectionedRotary):
    """Axial RoPE: each of ``num_axes`` axes rotates its own block of ``axis_dim`` channels.

    Su et al. 2021 (RoFormer) per axis; the axial form of rotary-embedding-torch's
    ``get_axial_freqs`` (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer",
    its RoPE-Axial). Channels ``[a * axis_dim, (a + 1) * axis_dim)`` follow axis ``a``; the
    channels after ``num_axes * axis_dim`` pass through. With ``layout="interleaved"`` and
    ``angles="fp32"`` it is rotary-embedding-torch's ``apply_rotary_emb(get_axial_freqs(...))``.

    Args:
        head_dim: D, the per-head width of q and k.
        num_axes: A, coordinates per token (2 for images, 3 for video).
        axis_dim: channels per axis (even); ``None``: ``head_dim // num_axes`` rounded down to even.
        frequencies: ``"lang"`` (``base^(-2i / axis_dim)``, positions are integer indices) or
            ``"pixel"`` (``linspace(1, max_freq / 2) * pi``, positions are coordinates in [-1, 1]).
        base: the ``"lang"`` base (``theta``).
        max_freq: the ``"pixel"`` top frequency.
        layout: ``"interleaved"`` (rotary-embedding-torch) or ``"half"``.
        angles: ``"exact"`` (float64 angles) or ``"fp32"`` (the float32 product of the references).
        axis_order: the coordinate each block follows (a permutation of ``range(num_axes)``);
            ``None``: block ``a`` follows coordinate ``a``. Step3p7 and Inkling2 put the width's block
            first: ``(1, 0)`` with ``(row, column)`` coordinates.
        frequency_order: ``"blocks"`` (default) or ``"interleaved"``: the axes' frequencies dealt
            round robin, pair ``j`` turning by frequency ``j // A`` of block ``j % A`` (Kimi-K2.5's vision tower).
        layout_span: ``"head"`` (default): ``layout`` pairs channels across the rotated width
            (transformers' Qwen2-VL vision tower: ``"half"`` pairs ``(i, i + r / 2)``); ``"axis"``: each
            axis' block of ``axis_dim`` channels is rotated on its own (Gemma 4's vision tower).
        device: device of the buffers.

    The vision towers of transformers 5.24 (``rope_type="axial"``) are, with ``axis_dim = head_dim / 2``
    (``2 (head_dim // 6)`` for three axes): ``layout="half"`` (Qwen2-VL and most), ``layout="interleaved"``
    (SAM 2 video, EdgeTAM video, SAM 3), ``layout_span="axis"`` with ``"half"`` (Gemma 4), ``axis_order=(1, 0)``
    (Step3p7 ``"half"``, Inkling2 ``"interleaved"``), ``frequency_order="interleaved"`` with ``axis_order=(1, 0)``
    (Kimi-K2.5), ``num_axes=3`` (MiniMax-M3-VL); Pixtral's is :class:`~posembed.schemes.rotary.pixtral.PixtralRotary`.

    Shape:
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``.
        - position_ids: ``(Tq, A)``, ``(B, Tq, A)`` or a sequence ``(Tq,)``; ``None``: ``arange(Tq)``.
        - output: ``(q, k)`` rotated, same shapes and dtypes.

    Example:
        >>> rope = AxialRotary(head_dim=8, num_axes=2)
        >>> grid = torch.cartesian_prod(torch.arange(3), torch.arange(4))  # (12, 2): (row, column)
        >>> q, k = torch.randn(1, 2, 12, 8), torch.randn(1, 2, 12, 8)
        >>> q_rot, k_rot = rope(q, k, grid)
        >>> q_rot.shape, bool(torch.allclose(q_rot.norm(dim=-1), q.norm(dim=-1), atol=1e-5))
        (torch.Size([1, 2, 12, 8]), True)
    """

    name = "rope_axial"
    paper = "Su et al. 2021 (RoFormer); axial: Heo et al. 2024 (RoPE for ViT)"
    extrapolates = False

    def __init__(
        self,
        head_dim: int,
        *,
        num_axes: int = 2,
        axis_dim: int | None = None,
        frequencies: str = "lang",
        base: float = 10000.0,
        max_freq: float = 10.0,
        layout: str = "interleaved",
        angles: str = "exact",
        axis_order: tuple[int, ...] | None = None,
        frequency_order: str = "blocks",
        layout_span: str = "head",
        device=None,
    ) -> None:
        self.head_dim = check_head_dim(head_dim)
        self.num_axes = check_positive_int(num_axes, "num_axes")
        self.axis_order = _check_axis_order(axis_order, num_axes)
        if frequency_order not in AXIAL_ORDERS:
            raise ValueError(f"frequency_order must be one of {AXIAL_ORDERS}, got {frequency_order!r}")
        if layout_span not in AXIAL_SPANS:
            raise ValueError(f"layout_span must be one of {AXIAL_SPANS}, got {layout_span!r}")
        if layout_span == "axis" and frequency_order == "interleaved":
            raise ValueError(
                "layout_span='axis' rotates each axis' block on its own; frequency_order='interleaved' has no blocks"
            )
        self.frequency_order, self.layout_span = frequency_order, layout_span
        if axis_dim is None:
            axis_dim = (head_dim // num_axes) // 2 * 2
            if axis_dim == 0:
                raise ValueError(
                    f"head_dim={head_dim} is too small for num_axes={num_axes}: each axis needs 2 channels"
                )
        check_positive_int(axis_dim, "axis_dim")
        if axis_dim % 2 or axis_dim * num_axes > head_dim:
            raise ValueError(
                f"axis_dim={axis_dim} must be even with num_axes * axis_dim = {num_axes * axis_dim} "
                f"<= head_dim={head_dim}"
            )
        if frequencies not in AXIAL_FREQUENCIES:
            raise ValueError(f"frequencies must be one of {AXIAL_FREQUENCIES}, got {frequencies!r}")
        self.axis_dim, self.frequencies = axis_dim, frequencies
        self.rotary_dim = axis_dim * num_axes
        self.base = check_base(base)
        self.max_freq = check_number(max_freq, "max_freq", 0.0)
        super().__init__(layout=layout, angles=angles, device=device)

    def _frequencies(self) -> tuple[Tensor, Tensor]:
        return axial_frequencies(self.axis_dim, self.num_axes, self.frequencies, base=self.base, max_freq=self.max_freq,
                                 axis_order=self.axis_order, order=self.frequency_order)  # fmt: skip

    def _rotate(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        if self.layout_span == "head":
            return super()._rotate(x, cos, sin)
        if cos.dim() == 3:  # (B, T, F) from per-row coordinates
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        half = self.axis_dim // 2
        parts = [
            apply_rotary(
                x[..., a * self.axis_dim : (a + 1) * self.axis_dim],
                cos[..., a * half : (a + 1) * half],
                sin[..., a * half : (a + 1) * half],
                self.layout,
            )
            for a in range(self.num_axes)
        ]
        return torch.cat([*parts, x[..., self.rotary_dim :]], -1)

    def extra_repr(self) -> str:
        parts = [
            f"head_dim={self.head_dim}",
            f"num_axes={self.num_axes}",
            f"axis_dim={self.axis_dim}",
            f"frequencies={self.frequencies!r}",
        ]
        parts.append(f"base={self.base:g}" if self.frequencies == "lang" else f"max_freq={self.max_freq:g}")
        parts.append(f"layout={self.layout!r}")
        if self.axis_order != tuple(range(self.num_axes)):
            parts.append(f"axis_order={self.axis_order}")
        parts += [f"{k}={v!r}" for k, v, d in (("frequency_order", self.frequency_order, "blocks"),
                                               ("layout_span", self.layout_span, "head")) if v != d]  # fmt: skip
        if self.angles != "exact":
            parts.append(f"angles={self.angles!r}")
        return ", ".join(parts)
