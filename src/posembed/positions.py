"""Position ids, explicit everywhere: shape ``(T,)`` or ``(B, T)``.

Helpers derive them from a padding mask, from document boundaries in packed sequences and
from a cache offset. Every default equals ``arange(T)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "default_positions",
    "positions_from_mask",
    "positions_from_documents",
    "positions_with_offset",
    "resolve_positions",
]


def default_positions(length: int, device: torch.device | str | None = None) -> Tensor:
    """``arange(length)`` as ``torch.long``.

    >>> default_positions(4)
    tensor([0, 1, 2, 3])
    """
    return torch.arange(length, dtype=torch.long, device=device)


def positions_from_mask(attention_mask: Tensor) -> Tensor:
    """Positions that count ``0..n-1`` over each row's real tokens; padding gets 0.

    Works for left and right padding alike.

    Shape:
        attention_mask ``(B, T)`` (1/True for real tokens) -> ``(B, T)`` long.

    >>> positions_from_mask(torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]]))
    tensor([[0, 0, 0, 1, 2],
            [0, 1, 2, 3, 0]])
    """
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must have shape (B, T), got {tuple(attention_mask.shape)}")
    if attention_mask.dtype.is_floating_point:
        raise TypeError(f"attention_mask must hold 0/1 integers or booleans, got dtype {attention_mask.dtype}")
    real = attention_mask.to(torch.long)
    if real.numel() and (int(real.min()) < 0 or int(real.max()) > 1):
        raise ValueError("attention_mask must hold only 0 and 1")
    positions = real.cumsum(-1) - 1
    return positions.clamp_(min=0).masked_fill_(real == 0, 0)


def positions_from_documents(document_ids: Tensor) -> Tensor:
    """Positions that restart at 0 wherever a packed row moves to a new document.

    A document is a run of equal consecutive ids.

    Shape:
        document_ids ``(T,)`` or ``(B, T)`` -> same shape, long.

    >>> positions_from_documents(torch.tensor([0, 0, 0, 1, 1, 2]))
    tensor([0, 1, 2, 0, 1, 0])
    """
    if document_ids.dim() not in (1, 2):
        raise ValueError(f"document_ids must have shape (T,) or (B, T), got {tuple(document_ids.shape)}")
    ids = document_ids if document_ids.dim() == 2 else document_ids.unsqueeze(0)
    length = ids.shape[-1]
    index = torch.arange(length, device=ids.device).expand_as(ids)  # (B, T)
    starts = torch.ones_like(ids, dtype=torch.bool)
    starts[:, 1:] = ids[:, 1:] != ids[:, :-1]
    start_index = torch.where(starts, index, torch.zeros_like(index))
    last_start = start_index.cummax(dim=-1).values  # (B, T): index where the current doc began
    positions = index - last_start
    return positions if document_ids.dim() == 2 else positions.squeeze(0)


def positions_with_offset(length: int, offset: int | Tensor, device: torch.device | str | None = None) -> Tensor:
    """Positions ``offset .. offset+length-1``: the new tokens after a cache of ``offset`` tokens.

    ``offset`` may be an int (shape ``(T,)`` out) or a ``(B,)`` integer tensor (shape ``(B, T)``
    out); ``length`` is an int ``>= 0``.

    >>> positions_with_offset(3, 5)
    tensor([5, 6, 7])
    >>> positions_with_offset(2, torch.tensor([0, 4]))
    tensor([[0, 1],
            [4, 5]])
    """
    if isinstance(length, bool) or not isinstance(length, int):
        raise TypeError(f"length must be an int, got {length!r}")
    if length < 0:
        raise ValueError(f"length must be >= 0 (the number of new tokens), got {length}")
    if isinstance(offset, Tensor):
        if offset.dtype.is_floating_point or offset.dtype.is_complex or offset.dtype == torch.bool:
            raise TypeError(f"offset must hold integers (torch.long), got dtype {offset.dtype}")
        if offset.dim() != 1:
            raise ValueError(f"offset must be an int or a (B,) tensor, got shape {tuple(offset.shape)}")
        if offset.numel() and int(offset.min()) < 0:
            raise ValueError(f"offset must be >= 0, got {int(offset.min())}")
        base = default_positions(length, device=offset.device)
        return offset.to(torch.long).unsqueeze(-1) + base
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int or a tensor, got {offset!r}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    return default_positions(length, device=device) + offset


def resolve_positions(position_ids: Tensor | None, length: int, device: torch.device | str | None) -> Tensor:
    """``position_ids`` checked against ``length``, or ``arange(length)`` when ``None``."""
    if position_ids is None:
        return default_positions(length, device=device)
    if position_ids.dtype.is_floating_point or position_ids.dtype == torch.bool:
        raise TypeError(f"position_ids must hold integers (torch.long), got dtype {position_ids.dtype}")
    if position_ids.dim() not in (1, 2) or position_ids.shape[-1] != length:
        raise ValueError(
            f"position_ids has shape {tuple(position_ids.shape)}; expected ({length},) or (B, {length})"
        )
    return position_ids
