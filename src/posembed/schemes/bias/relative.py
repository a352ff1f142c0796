"""Relative positions shared by every bias scheme: ``k_position - q_position`` per (query, key).

:func:`relative_positions` materialises them (SDPA, eager); :func:`relative_position_fn` is the
FlexAttention ``score_mod`` view, which captures only the position vectors (no ``Tq x Tk`` tensor).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["RelativeFn", "check_positions", "check_qk", "relative_positions", "relative_position_fn"]

#: ``(b, q_idx, kv_idx) -> k_position - q_position`` inside a FlexAttention ``score_mod``
RelativeFn = Callable[[Tensor, Tensor, Tensor], Tensor]


def check_positions(q_positions: Tensor, k_positions: Tensor, *, integer: bool = True) -> None:
    """Clear errors for position tensors: type, ``(T,)`` or ``(B, T)``, matching batch sizes.

    >>> check_positions(torch.arange(3), torch.zeros(2, 5, dtype=torch.long))
    >>> check_positions(torch.zeros(2, 3, dtype=torch.long),
    ...                 torch.zeros(4, 3, dtype=torch.long))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: q_positions has batch size 2 but k_positions has batch size 4; they must match
    (or be 1-D, shared by the batch)
    """
    for name, pos in (("q_positions", q_positions), ("k_positions", k_positions)):
        if not isinstance(pos, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(pos).__name__}")
        if pos.dim() not in (1, 2):
            raise ValueError(f"{name} must have shape (T,) or (B, T), got {tuple(pos.shape)}")
        if pos.dtype == torch.bool or pos.dtype.is_complex or (integer and pos.dtype.is_floating_point):
            kind = "integers (torch.long)" if integer else "real numbers"
            raise TypeError(f"{name} must hold {kind}, got dtype {pos.dtype}")
    if q_positions.dim() == 2 and k_positions.dim() == 2 and q_positions.shape[0] != k_positions.shape[0]:
        raise ValueError(
            f"q_positions has batch size {q_positions.shape[0]} but k_positions has batch size "
            f"{k_positions.shape[0]}; they must match (or be 1-D, shared by the batch)"
        )


def relative_positions(q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """``k_position - q_position`` for every (query, key) pair, in the positions' dtype.

    Shape:
        ``(Tq,)|(B, Tq)`` and ``(Tk,)|(B, Tk)`` -> ``(Tq, Tk)``, or ``(B, Tq, Tk)`` if either is 2-D.

    >>> relative_positions(torch.arange(3), torch.arange(3))
    tensor([[ 0,  1,  2],
            [-1,  0,  1],
            [-2, -1,  0]])
    """
    return k_positions.unsqueeze(-2) - q_positions.unsqueeze(-1)  # (..., Tq, Tk)


def _reader(positions: Tensor) -> Callable[[Tensor, Tensor], Tensor]:
    if positions.dim() == 1:
        return lambda b, idx: positions[idx]
    return lambda b, idx: positions[b, idx]


def relative_position_fn(q_positions: Tensor, k_positions: Tensor) -> RelativeFn:
    """The ``score_mod`` view of :func:`relative_positions`: ``(b, q_idx, kv_idx) -> k_pos - q_pos``.

    Only the position vectors are captured (no ``Tq x Tk`` tensor); ``(B, T)`` positions are
    read at ``positions[b, idx]``, 1-D positions at ``positions[idx]``.
    """
    read_q, read_k = _reader(q_positions), _reader(k_positions)
    return lambda b, q_idx, kv_idx: read_k(b, kv_idx) - read_q(b, q_idx)


def check_qk(
    scheme: str, num_heads: int, head_dim: int,
    q_positions: Tensor, k_positions: Tensor, q: Tensor | None, k: Tensor | None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The checks of a bias scheme that reads the queries and keys (Shaw, CoPE, DeBERTa); returns ``(q, k)``.

    ``q`` must be ``(B, H, Tq, D)`` and ``k`` ``(B, H, Tk, D)``, with ``Tq``/``Tk`` the lengths of
    the position tensors and, for 2-D positions, the same batch size.

    >>> check_qk("ShawRelative", 2, 4, torch.arange(3), torch.arange(3), None, None)
    Traceback (most recent call last):
    ...
    ValueError: ShawRelative reads the queries and keys: pass q (B, H, Tq, D) and k (B, H, Tk, D)
    """
    check_positions(q_positions, k_positions)
    if q is None or k is None:
        raise ValueError(f"{scheme} reads the queries and keys: pass q (B, H, Tq, D) and k (B, H, Tk, D)")
    for name, x, positions in (("q", q, q_positions), ("k", k, k_positions)):
        expected = (num_heads, positions.shape[-1], head_dim)
        if x.dim() != 4 or tuple(x.shape[1:]) != expected:
            raise ValueError(
                f"{name} has shape {tuple(x.shape)}; expected (B, {expected[0]}, {expected[1]}, {expected[2]}) "
                f"(num_heads, length of {name}_positions, head_dim)"
            )
        if positions.dim() == 2 and positions.shape[0] != x.shape[0]:
            raise ValueError(
                f"{name}_positions has batch size {positions.shape[0]} but {name} has batch size {x.shape[0]}"
            )
    if q.shape[0] != k.shape[0]:
        raise ValueError(f"q has batch size {q.shape[0]} but k has batch size {k.shape[0]}")
    return q, k
