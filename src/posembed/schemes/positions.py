"""Position ids, explicit everywhere: shape ``(T,)`` or ``(B, T)``.

Helpers derive them from a padding mask, from document boundaries in packed sequences and
from a cache offset, and build the coordinates of a grid (:func:`grid_coordinates`,
:func:`patch_grid_positions`). Every default equals ``arange(T)``. They take tensors or nested Python
lists of integers (converted with ``torch.as_tensor``), and build on the device of the tensor
they are given.

Value checks never stall a GPU: on the CPU, where reading a value back is free, a bad value is
a ``ValueError`` naming it and the limit; elsewhere the check is asserted on the device
(``torch._assert_async``, no synchronisation; it surfaces at a later kernel launch), unless the
debug switch ``POSEMBED_HOST_CHECKS=1`` asks for the host read everywhere. ``meta`` tensors and
compiled code skip value checks (shapes and dtypes are checked everywhere).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from posembed._utils.checks import check_positive_int, values_readable
from posembed._utils.devices import host_checks

__all__ = [
    "default_positions",
    "positions_from_mask",
    "positions_from_documents",
    "positions_with_offset",
    "resolve_positions",
    "grid_coordinates",
    "patch_grid_positions",
    "MAX_POSITION",
    "CLS_PLACES",
]

#: the largest position a ``torch.long`` holds
MAX_POSITION = torch.iinfo(torch.int64).max
#: where :func:`patch_grid_positions` puts a class token: before the patches or after them
CLS_PLACES = ("first", "last")


def _as_tensor(value: Tensor | Sequence, name: str) -> Tensor:
    """``value`` as a tensor: tensors pass through, (nested) lists and tuples are converted."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (list, tuple)):
        try:
            return torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"{name} must be a tensor or a (nested) list of integers: {error}") from None
    raise TypeError(f"{name} must be a tensor or a (nested) list of integers, got {type(value).__name__}")


def _check_values(x: Tensor, low: int, high: int, message: Callable[[int | None], str]) -> None:
    """``low <= x <= high`` everywhere: a ``ValueError`` naming the offending value on the host
    (see the module docstring), an assertion on the device elsewhere; nothing on ``meta``.
    ``message(value)`` words the error (``value`` is ``None`` on the device, where it is unread)."""
    if x.numel() == 0 or not values_readable(x):
        return
    smallest, largest = torch.aminmax(x)
    if host_checks(x.device):
        for value in (int(smallest), int(largest)):
            if not low <= value <= high:
                raise ValueError(message(value))
        return
    torch._assert_async(
        (smallest >= low) & (largest <= high),
        message(None) + f" (checked on {x.device}; POSEMBED_HOST_CHECKS=1 names the value)",
    )


def default_positions(length: int, device: torch.device | str | None = None) -> Tensor:
    """``arange(length)`` as ``torch.long``.

    >>> default_positions(4)
    tensor([0, 1, 2, 3])
    """
    return torch.arange(length, dtype=torch.long, device=device)


def positions_from_mask(attention_mask: Tensor | Sequence) -> Tensor:
    """Positions that count ``0..n-1`` over each row's real tokens; padding gets 0.

    Works for left and right padding alike.

    Shape:
        attention_mask ``(B, T)`` (1/True for real tokens) -> ``(B, T)`` long.

    >>> positions_from_mask(torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]]))
    tensor([[0, 0, 0, 1, 2],
            [0, 1, 2, 3, 0]])
    >>> positions_from_mask([[1, 1, 0]])
    tensor([[0, 1, 0]])
    """
    attention_mask = _as_tensor(attention_mask, "attention_mask")
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must have shape (B, T), got {tuple(attention_mask.shape)}")
    if attention_mask.dtype.is_floating_point:
        raise TypeError(f"attention_mask must hold 0/1 integers or booleans, got dtype {attention_mask.dtype}")
    real = attention_mask.to(torch.long)
    if attention_mask.dtype != torch.bool:
        _check_values(real, 0, 1, lambda value: f"attention_mask must hold only 0 and 1, got {_named(value)}")
    positions = real.cumsum(-1) - 1
    return positions.clamp_(min=0).masked_fill_(real == 0, 0)


def positions_from_documents(document_ids: Tensor | Sequence) -> Tensor:
    """Positions that restart at 0 wherever a packed row moves to a new document.

    A document is a run of equal consecutive ids.

    Shape:
        document_ids ``(T,)`` or ``(B, T)`` -> same shape, long.

    >>> positions_from_documents(torch.tensor([0, 0, 0, 1, 1, 2]))
    tensor([0, 1, 2, 0, 1, 0])
    """
    document_ids = _as_tensor(document_ids, "document_ids")
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


def positions_with_offset(
    length: int, offset: int | Tensor | Sequence[int], device: torch.device | str | None = None
) -> Tensor:
    """Positions ``offset .. offset+length-1``: the new tokens after a cache of ``offset`` tokens.

    ``offset`` may be an int (shape ``(T,)`` out) or a ``(B,)`` integer tensor or list (shape
    ``(B, T)`` out); ``length`` is an int ``>= 0``. The last position must fit in ``torch.long``
    (:data:`MAX_POSITION`).

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
    if isinstance(offset, (list, tuple)):
        offset = _as_tensor(offset, "offset")
    if isinstance(offset, Tensor):
        return _tensor_offset(length, offset, device)
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int or a tensor, got {offset!r}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if length and offset > MAX_POSITION - (length - 1):
        raise ValueError(_past_the_last(length)(offset))
    return default_positions(length, device=device) + offset


def _tensor_offset(length: int, offset: Tensor, device: torch.device | str | None) -> Tensor:
    """``(B,)`` offsets -> ``(B, length)`` positions, built on the offset's device."""
    if offset.dtype.is_floating_point or offset.dtype.is_complex or offset.dtype == torch.bool:
        raise TypeError(f"offset must hold integers (torch.long), got dtype {offset.dtype}")
    if offset.dim() != 1:
        raise ValueError(f"offset must be an int or a (B,) tensor, got shape {tuple(offset.shape)}")
    if device is not None and torch.device(device).type != offset.device.type:
        raise ValueError(
            f"offset is a tensor on {offset.device} but device={str(device)!r} was asked: the positions are "
            f"built on the offset's device (move the offset there, or leave device out)"
        )
    _check_values(offset, 0, MAX_POSITION, lambda value: f"offset must be >= 0, got {_named(value)}")
    if length:
        _check_values(offset, 0, MAX_POSITION - (length - 1), _past_the_last(length))
    base = default_positions(length, device=offset.device)  # (T,)
    return offset.to(torch.long).unsqueeze(-1) + base  # (B, T)


def _past_the_last(length: int) -> Callable[[int | None], str]:
    """The error of an offset whose last position, ``offset + length - 1``, passes MAX_POSITION."""

    def message(offset: int | None) -> str:
        last = "an offset" if offset is None else f"offset {offset} + length {length} - 1 = {offset + length - 1}"
        return (
            f"positions_with_offset: {last} is past the largest torch.long position {MAX_POSITION} "
            f"(the largest offset for length {length} is {MAX_POSITION - (length - 1)})"
        )

    return message


def _named(value: int | None) -> str:
    return "another value" if value is None else str(value)


def resolve_positions(position_ids: Tensor | Sequence | None, length: int, device: torch.device | str | None) -> Tensor:
    """``position_ids`` checked against ``length``, or ``arange(length)`` when ``None``.

    >>> resolve_positions([[0, 1, 2]], 3, None)
    tensor([[0, 1, 2]])
    """
    if position_ids is None:
        return default_positions(length, device=device)
    if not isinstance(position_ids, Tensor):
        position_ids = _as_tensor(position_ids, "position_ids").to(device)
    if position_ids.dtype.is_floating_point or position_ids.dtype == torch.bool:
        raise TypeError(f"position_ids must hold integers (torch.long), got dtype {position_ids.dtype}")
    if position_ids.dim() not in (1, 2) or position_ids.shape[-1] != length:
        raise ValueError(
            f"position_ids has shape {tuple(position_ids.shape)}; expected ({length},) or (B, {length}): "
            f"one position per token of the sequence of {length}"
        )
    if device is not None and position_ids.device != torch.device(device):
        position_ids = position_ids.to(device)  # a CPU tensor for a CUDA forward: one copy, never an index error
    return position_ids


def grid_coordinates(*sizes: int, device: torch.device | str | None = None) -> Tensor:
    """Integer coordinates of every cell of a grid, in row-major order.

    Shape:
        sizes ``(h, w)`` -> ``(h * w, 2)``; ``(h, w, d)`` -> ``(h * w * d, 3)``; long.

    Example:
        >>> grid_coordinates(2, 3)
        tensor([[0, 0],
                [0, 1],
                [0, 2],
                [1, 0],
                [1, 1],
                [1, 2]])
    """
    if not sizes:
        raise ValueError("grid_coordinates needs at least one size")
    for axis, size in enumerate(sizes):
        check_positive_int(size, f"size of axis {axis}")
    axes = [torch.arange(size, device=device) for size in sizes]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, len(sizes))  # (T, n)


def patch_grid_positions(
    height: int, width: int, *, offset: int = 0, cls_token: str | None = None, device: torch.device | str | None = None
) -> Tensor:
    """``(row + offset, column + offset)`` of every patch of a ``height x width`` grid, row-major, with a class token
    at ``(0, 0)`` before the patches (``cls_token="first"``) or after them (``"last"``); ``None``: no class token.

    Llama 4's vision tower rotates its patches at ``offset=1`` and its CLS token, appended last, at ``(0, 0)``
    (``Llama4VisionRotaryEmbedding``; the reader states it: ``AxialSettings.positions()``).

    Shape: ``(height * width [+ 1], 2)``, long.

    >>> patch_grid_positions(2, 2, offset=1, cls_token="last").tolist()
    [[1, 1], [1, 2], [2, 1], [2, 2], [0, 0]]
    """
    check_positive_int(height, "height")
    check_positive_int(width, "width")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int, got {offset!r}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if cls_token is not None and cls_token not in CLS_PLACES:
        raise ValueError(f"cls_token must be one of {CLS_PLACES} or None, got {cls_token!r}")
    grid = grid_coordinates(height, width, device=device) + offset  # (H W, 2)
    if cls_token is None:
        return grid
    origin = grid.new_zeros(1, 2)
    return torch.cat([origin, grid] if cls_token == "first" else [grid, origin])
