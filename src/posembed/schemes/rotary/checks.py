"""Input checks of the rotary schemes: clear errors naming the offending value and the limit.

Shared by :class:`~posembed.schemes.rotary.rope.RotaryEmbedding` and its variants (xPos included).
A leaf of the rotary family: it imports no rotary module (the schemes pass plain values).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from posembed._utils.checks import check_number, check_positive_int
from posembed.schemes.positions import resolve_positions

__all__ = [
    "check_head_dim", "check_rotary_dim", "check_base", "check_forward_mscale", "check_qk", "check_cache_range",
    "past_cache_message", "resolve_qk_positions",
]  # fmt: skip


def check_head_dim(head_dim: object) -> int:
    """``head_dim`` if it is a positive even int (RoPE rotates channel pairs)."""
    dim = check_positive_int(head_dim, "head_dim")
    if dim % 2:
        raise ValueError(f"RoPE rotates channel pairs, so head_dim must be even; got head_dim={dim}")
    return dim


def check_rotary_dim(rotary_dim: object, head_dim: int) -> int:
    """The rotated width: ``head_dim`` for ``None``, else an even int ``<= head_dim``."""
    if rotary_dim is None:
        return head_dim
    rotated = check_positive_int(rotary_dim, "rotary_dim")
    if rotated > head_dim:
        raise ValueError(f"rotary_dim={rotated} exceeds head_dim={head_dim}; it must be <= head_dim")
    if rotated % 2:
        raise ValueError(f"RoPE rotates channel pairs, so rotary_dim must be even; got rotary_dim={rotated}")
    return rotated


def check_forward_mscale(scales: object, switch: object) -> tuple[tuple[float, float] | None, int | None]:
    """``(forward_mscale, mscale_switch)`` checked: two positive numbers and a positive length, or neither."""
    if scales is None:
        if switch is not None:
            raise ValueError(f"mscale_switch={switch!r} is given without forward_mscale")
        return None, None
    if not isinstance(scales, (tuple, list)) or len(scales) != 2:
        raise ValueError(f"forward_mscale must be (short, long), two numbers; got {scales!r}")
    if switch is None:
        raise ValueError("forward_mscale needs mscale_switch, the longest call that takes its short factor")
    short, long = (check_number(value, "forward_mscale", 0.0) for value in scales)
    if min(short, long) <= 0:
        raise ValueError(f"forward_mscale must be positive, got {tuple(scales)!r}")
    return (short, long), check_positive_int(switch, "mscale_switch")


def check_base(base: object) -> float:
    """The frequency base as a float: finite and ``> 1``."""
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base must be a number, got {base!r}")
    if not math.isfinite(base) or base <= 1.0:
        raise ValueError(f"base must be a finite number > 1, got {base}")
    return float(base)


def check_qk(q: Tensor, k: Tensor, head_dim: int) -> None:
    """``q`` and ``k`` are floating ``(B, H, T, D)`` tensors with ``D = head_dim``."""
    for name, x in (("q", q), ("k", k)):
        if not isinstance(x, Tensor) or not x.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}")
        if x.dim() != 4:
            raise ValueError(f"{name} must have shape (B, H, T, D), got {tuple(x.shape)}")
        if x.shape[-1] != head_dim:
            raise ValueError(f"{name} has head dim {x.shape[-1]}, but this rotary scheme has head_dim={head_dim}")


def check_cache_range(length: object, offset: object) -> None:
    """``length`` and ``offset`` of a cache slice are ints ``>= 0`` (``SymInt`` under ``torch.compile``)."""
    for name, value in (("length", length), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")


def past_cache_message(offset: int, length: int, cache_size: int, max_len: int | None, dynamic: bool) -> str:
    """The error for cached positions past a cos/sin cache of ``cache_size`` rows: the sizes and the ways out.

    >>> past_cache_message(10, 8, 16, 16, False)[:60]
    'positions 10 .. 17 (offset + length = 18) run past the cos/s'
    """
    why = ", frequencies that depend on the call's length are never cached" if dynamic else ""
    return (
        f"positions {offset} .. {offset + length - 1} (offset + length = {offset + length}) run past the "
        f"cos/sin cache of {cache_size} positions (max_len={max_len}{why}). Ways out: pass "
        f"position_ids to compute cos/sin on the fly (no length limit), or build the scheme with a larger max_len"
    )


def resolve_qk_positions(
    q: Tensor, k: Tensor, position_ids: Tensor | None, k_position_ids: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Positions of the queries and the keys, checked against ``q`` and ``k`` (default ``arange``).

    Without ``k_position_ids`` the keys share the queries' positions (``Tq == Tk`` required).
    """
    q_pos = _positions_for(position_ids, q, "position_ids", "q")
    if k_position_ids is None:
        if k.shape[-2] != q.shape[-2]:
            raise ValueError(
                f"k has length {k.shape[-2]} but q has length {q.shape[-2]}; pass k_position_ids for the keys"
            )
        return q_pos, q_pos
    return q_pos, _positions_for(k_position_ids, k, "k_position_ids", "k")


def _positions_for(ids: Tensor | None, x: Tensor, name: str, x_name: str) -> Tensor:
    """``ids`` checked against ``x`` ``(B, H, T, D)``: ``(T,)``, ``(1, T)`` or ``(B, T)``; default ``arange(T)``."""
    if ids is not None:
        batch, length = x.shape[0], x.shape[-2]
        if ids.dim() not in (1, 2) or ids.shape[-1] != length or (ids.dim() == 2 and ids.shape[0] not in (1, batch)):
            raise ValueError(
                f"{name} has shape {tuple(ids.shape)}; expected ({length},), (1, {length}) or ({batch}, {length}) "
                f"to match {x_name} of shape {tuple(x.shape)} (B, H, T, D)"
            )
    return resolve_positions(ids, x.shape[-2], x.device)


def resolve_frequency_dim(frequency_dim: object, rotary_dim: int | None, head_dim: int) -> tuple[int, int]:
    """``(rotary_dim, frequency_dim)``: the rotated width and the width the frequencies divide by.

    transformers computes ``base^(-arange(0, dim, 2) / dim)`` for ``dim = int(head_dim * partial_rotary_factor)``
    even when ``dim`` is odd (GLM-4V-MoE: 21), giving ``ceil(dim / 2)`` frequencies that rotate
    ``2 ceil(dim / 2)`` channels. ``frequency_dim=None`` is ``rotary_dim`` (the usual even case).

    >>> resolve_frequency_dim(21, None, 42)
    (22, 21)
    """
    if frequency_dim is None:
        rotary = check_rotary_dim(rotary_dim, head_dim)
        return rotary, rotary
    frequencies = check_positive_int(frequency_dim, "frequency_dim")
    rotated = 2 * ((frequencies + 1) // 2)
    if rotary_dim is not None and rotary_dim != rotated:
        raise ValueError(
            f"frequency_dim={frequencies} gives {rotated // 2} frequencies, which rotate {rotated} channels; "
            f"rotary_dim={rotary_dim} disagrees (leave rotary_dim unset)"
        )
    return check_rotary_dim(rotated, head_dim), frequencies
