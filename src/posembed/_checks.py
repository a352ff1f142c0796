"""Input checks shared by every module: clear errors instead of ``IndexError``s deep in PyTorch.

Every check names the offending value and the limit.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["check_index_tensor", "check_same_shape", "check_positive_int"]


def check_index_tensor(x: Tensor, name: str, limit: int | None, hint: str = "") -> None:
    """Check that ``x`` holds integer indices in ``[0, limit)`` (``limit=None``: only ``>= 0``).

    >>> import torch
    >>> check_index_tensor(torch.tensor([0, 3]), "input_ids", 4)
    >>> check_index_tensor(torch.tensor([0, 4]), "input_ids", 4)
    Traceback (most recent call last):
    ...
    ValueError: input_ids holds 4, outside [0, 4)
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of integers, got {type(x).__name__}")
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers (torch.long), got dtype {x.dtype}")
    if x.numel() == 0:
        return
    lo, hi = int(x.min()), int(x.max())
    if lo < 0:
        bound = f"[0, {limit})" if limit is not None else ">= 0"
        raise ValueError(f"{name} holds {lo}, outside {bound}{_hint(hint)}")
    if limit is not None and hi >= limit:
        raise ValueError(f"{name} holds {hi}, outside [0, {limit}){_hint(hint)}")


def check_same_shape(reference: Tensor, other: Tensor | None, ref_name: str, name: str) -> None:
    """Check that ``other`` (when given) has the shape of ``reference``, or its last dim(s).

    ``other`` may omit the batch dimension: ``(T,)`` matches a ``(B, T)`` reference.
    """
    if other is None:
        return
    if tuple(other.shape) == tuple(reference.shape):
        return
    if other.dim() == 1 and reference.dim() == 2 and other.shape[0] == reference.shape[1]:
        return
    raise ValueError(
        f"{name} has shape {tuple(other.shape)} but {ref_name} has shape {tuple(reference.shape)}; "
        f"they must match (or {name} may be (T,) shared across the batch)"
    )


def check_positive_int(value: object, name: str) -> int:
    """Return ``value`` if it is a positive ``int``, else raise a clear error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def _hint(hint: str) -> str:
    return f"; {hint}" if hint else ""

