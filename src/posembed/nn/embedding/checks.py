"""Argument and input checks of :class:`~posembed.nn.embedding.block.TransformerEmbeddings`.

Pure functions: constructor arguments (combine mode, widths, LayerNorm epsilon, dropout) and
the three id tensors of a forward pass, each refused with a message naming the value and the
limit. Values are read only in eager mode (see :func:`~posembed._utils.checks.check_index_tensor`),
so the block compiles with ``fullgraph=True`` and runs on the meta device.

Where reading a value back to the host is free (the CPU), an id out of range is a ``ValueError``
naming the value and the limit. Elsewhere (CUDA) such a read would stall the device every step,
so the range is asserted on the device (``torch._assert_async``: no synchronisation; a failure
surfaces at a later kernel launch and names the tensor and the limit). Set
``POSEMBED_HOST_CHECKS=1`` to read the values on every device instead (a debug switch: the
clear ``ValueError``, at the cost of a synchronisation per tensor).
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed._utils.checks import (
    check_coordinates,
    check_index_tensor,
    check_number,
    check_positive_int,
    check_probability,
    check_same_shape,
    values_readable,
)
from posembed._utils.devices import host_checks
from posembed.schemes.base import AbsoluteScheme
from posembed.schemes.positions import resolve_positions

__all__ = [
    "COMBINES",
    "INDEX_DTYPES",
    "as_index",
    "check_embedding_ids",
    "check_ids",
    "host_checks",
    "check_norm_and_dropout",
    "check_type_vocab",
    "token_width",
]

#: the ways to put the position in (``TransformerEmbeddings`` and ``TransformerModel``'s ``combine``)
COMBINES = ("add", "concat")
#: index dtypes the table gathers take; other integer ids are converted (eager path)
INDEX_DTYPES = (torch.int64, torch.int32)


def as_index(ids: Tensor) -> Tensor:
    """Integer ids in a dtype the table gathers take (``uint8``, ``int16`` ... become ``int64``).

    >>> as_index(torch.tensor([1, 2], dtype=torch.uint8)).dtype
    torch.int64
    """
    return ids if ids.dtype in INDEX_DTYPES else ids.long()


def check_ids(x: Tensor, name: str, limit: int, hint: str = "") -> None:
    """Integer ids in ``[0, limit)``: read on the host where :func:`host_checks`, else asserted on the device.

    The type and dtype are checked everywhere. The device-side assertion never synchronises
    (``torch._assert_async``); like the host check it is skipped while compiling and on ``meta``.

    >>> check_ids(torch.tensor([[0, 4]]), "input_ids", 4, "vocab_size=4")
    Traceback (most recent call last):
    ...
    ValueError: input_ids holds 4, outside [0, 4); vocab_size=4
    """
    if not isinstance(x, Tensor) or host_checks(x.device):
        check_index_tensor(x, name, limit, hint)
        return
    check_index_tensor(x.new_empty(0), name, limit, hint)  # an empty one of x's dtype: the type check only
    if x.numel() == 0 or not values_readable(x):
        return
    low, high = torch.aminmax(x)
    suffix = f"; {hint}" if hint else ""
    torch._assert_async(
        (low >= 0) & (high < limit),
        f"{name} holds a value outside [0, {limit}){suffix}, checked on {x.device}; "
        f"POSEMBED_HOST_CHECKS=1 names the value",
    )


def check_norm_and_dropout(layer_norm_eps: object, dropout: object) -> None:
    """``layer_norm_eps`` a finite number > 0, ``dropout`` in ``[0, 1)``, else a clear error.

    >>> check_norm_and_dropout(0.0, 0.1)
    Traceback (most recent call last):
    ...
    ValueError: layer_norm_eps must be > 0 (BERT: 1e-12), got 0.0
    """
    if check_number(layer_norm_eps, "layer_norm_eps", 0.0) <= 0.0:
        raise ValueError(f"layer_norm_eps must be > 0 (BERT: 1e-12), got {layer_norm_eps}")
    check_probability(dropout, "dropout")


def check_type_vocab(type_vocab_size: object) -> int:
    """``type_vocab_size`` if it is an int >= 0 (0 = no segment table)."""
    if isinstance(type_vocab_size, bool) or not isinstance(type_vocab_size, int) or type_vocab_size < 0:
        raise ValueError(f"type_vocab_size must be an int >= 0 (0 = no segment table), got {type_vocab_size!r}")
    return type_vocab_size


def check_embedding_ids(
    input_ids: Tensor,
    token_type_ids: Tensor | None,
    position_ids: Tensor | None,
    *,
    vocab_size: int,
    type_vocab_size: int,
    num_axes: int = 1,
    scheme: str | None = None,
) -> Tensor:
    """Validate the three id tensors of a forward pass; return the position ids (or coordinates) to use.

    Shape:
        input_ids ``(B, T)``; token_type_ids ``(B, T)`` / ``(1, T)`` / ``(T,)`` or ``None``;
        position_ids ``(B, T)`` / ``(1, T)`` / ``(T,)`` or ``None`` (``arange(T)``), or for a scheme
        of ``num_axes = A > 1`` coordinates ``(B, T, A)`` / ``(1, T, A)`` / ``(T, A)``, required
        -> position ids ``(T,)`` / ``(B, T)`` in an index dtype, or the coordinates.

    >>> check_embedding_ids(torch.tensor([[3, 1]]), None, torch.tensor([[0, 1]]), vocab_size=4, type_vocab_size=2)
    tensor([0, 1])
    """
    check_ids(input_ids, "input_ids", vocab_size, f"vocab_size={vocab_size}")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (B, T), got {tuple(input_ids.shape)}")
    if token_type_ids is not None:
        check_ids(token_type_ids, "token_type_ids", type_vocab_size, f"type_vocab_size={type_vocab_size}")
        check_same_shape(input_ids, token_type_ids, "input_ids", "token_type_ids")  # (1, T) broadcasts
    if num_axes > 1:
        return check_coordinates(input_ids, position_ids, num_axes, scheme)
    if position_ids is not None and position_ids.dim() == 2 and position_ids.shape[0] == 1:
        position_ids = position_ids[0]  # (1, T) broadcasts over the batch, as in transformers
    check_same_shape(input_ids, position_ids, "input_ids", "position_ids")
    return as_index(resolve_positions(position_ids, input_ids.shape[-1], input_ids.device))


def token_width(hidden_size: int, position: AbsoluteScheme | None, combine: str, token_dim: int | None) -> int:
    """Width of the token table for this combine mode, or a clear error."""
    if combine not in COMBINES:
        raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
    if combine == "add":
        if position is not None and position.dim != hidden_size:
            raise ValueError(
                f"combine='add' needs the position width to equal hidden_size={hidden_size}, "
                f"got {type(position).__name__} with dim={position.dim}"
            )
        if token_dim is not None and token_dim != hidden_size:
            raise ValueError(
                f"token_dim={token_dim} needs combine='concat'; with 'add' it equals hidden_size={hidden_size}"
            )
        return hidden_size
    if position is None:
        raise ValueError("combine='concat' needs a position scheme to concatenate (position=None given)")
    if token_dim is not None:
        return check_positive_int(token_dim, "token_dim")
    width = hidden_size - position.dim
    if width <= 0:
        raise ValueError(
            f"combine='concat' without token_dim: position dim={position.dim} leaves no room for tokens in "
            f"hidden_size={hidden_size}; use a smaller position dim or give token_dim (a projection maps back)"
        )
    return width
