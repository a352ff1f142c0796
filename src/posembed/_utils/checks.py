"""Input checks shared by every module: clear errors instead of ``IndexError``s deep in PyTorch.

Every check names the offending value and the limit.
"""

from __future__ import annotations

import functools
import math
import os

import torch
from torch import Tensor

from posembed._utils.names import closest, did_you_mean  # re-exported: every lookup's suggestion

__all__ = [
    "check_index_tensor",
    "check_same_shape",
    "check_positive_int",
    "check_number",
    "check_probability",
    "check_context_length",
    "values_readable",
    "check_coordinates",
    "check_pad_token",
    "check_allocation",
    "check_table_size",
    "device_memory_bytes",
    "format_bytes",
    "did_you_mean",
    "closest",
]


def values_readable(x: Tensor) -> bool:
    """Whether checks may read ``x``'s values: not while compiling, not on the meta device.

    Reading values (``int(x.max())``) syncs with the host and breaks ``torch.compile(fullgraph=True)``;
    meta tensors have no values. Dtype and shape checks run everywhere.
    """
    return not (torch.compiler.is_compiling() or x.is_meta)


def check_index_tensor(x: Tensor, name: str, limit: int | None, hint: str = "") -> None:
    """Check that ``x`` holds integer indices in ``[0, limit)`` (``limit=None``: only ``>= 0``).

    The type and dtype are always checked; the values only when :func:`values_readable`
    (eager, not on the meta device), so compiled and shape-only forwards pass through.

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
    if x.numel() == 0 or not values_readable(x):
        return
    lo, hi = int(x.min()), int(x.max())
    if lo < 0:
        bound = f"[0, {limit})" if limit is not None else ">= 0"
        raise ValueError(f"{name} holds {lo}, outside {bound}{_hint(hint)}")
    if limit is not None and hi >= limit:
        raise ValueError(f"{name} holds {hi}, outside [0, {limit}){_hint(hint)}")


def check_same_shape(reference: Tensor, other: Tensor | None, ref_name: str, name: str) -> None:
    """Check that ``other`` (when given) has the shape of ``reference``, or broadcasts over its batch.

    For a ``(B, T)`` reference, ``other`` may be ``(B, T)``, or ``(T,)`` / ``(1, T)`` shared across
    the batch (as ``position_ids`` in Hugging Face models).

    >>> import torch
    >>> check_same_shape(torch.zeros(2, 3), torch.zeros(1, 3), "input_ids", "token_type_ids")
    >>> check_same_shape(torch.zeros(2, 3), torch.zeros(3, 3),
    ...                  "input_ids", "token_type_ids")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: token_type_ids has shape (3, 3) but input_ids has shape (2, 3); they must match
    (or token_type_ids may be (T,) or (1, T) shared across the batch)
    """
    if other is None:
        return
    shape, ref = tuple(other.shape), tuple(reference.shape)
    if shape == ref:
        return
    if len(ref) == 2 and shape in ((ref[1],), (1, ref[1])):
        return
    raise ValueError(
        f"{name} has shape {shape} but {ref_name} has shape {ref}; "
        f"they must match (or {name} may be (T,) or (1, T) shared across the batch)"
    )


def check_positive_int(value: object, name: str) -> int:
    """Return ``value`` if it is a positive ``int``, else raise a clear error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def check_number(value: object, name: str, minimum: float) -> float:
    """Return ``value`` as a float if it is a finite real number ``>= minimum``, else raise.

    >>> check_number(2, "factor", 1.0)
    2.0
    >>> check_number(float("nan"), "token_scale", -float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: token_scale must be a finite number, got nan
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < minimum:
        bound = f" >= {minimum}" if math.isfinite(minimum) else ""
        raise ValueError(f"{name} must be a finite number{bound}, got {value}")
    return float(value)


def check_probability(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a drop probability in ``[0, 1)``, else raise.

    >>> check_probability(0.1, "dropout")
    0.1
    >>> check_probability(1.0, "dropout")
    Traceback (most recent call last):
    ...
    ValueError: dropout must be in [0, 1), got 1.0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number in [0, 1), got {value!r}")
    if not 0.0 <= value < 1.0:  # NaN fails too
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return float(value)


def check_context_length(value: object, name: str) -> int:
    """Return ``value`` if it is a positive ``int`` (a context length), else a ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int (a context length), got {value!r}")
    return value


def _hint(hint: str) -> str:
    return f"; {hint}" if hint else ""


def check_coordinates(input_ids: Tensor, coordinates: Tensor | None, num_axes: int, scheme: str) -> Tensor:
    """Coordinates ``(T, A)`` / ``(1, T, A)`` / ``(B, T, A)`` for ``input_ids`` ``(B, T)``, required."""
    batch, length = input_ids.shape
    shapes = f"({length}, {num_axes}), (1, {length}, {num_axes}) or ({batch}, {length}, {num_axes})"
    if coordinates is None:
        raise ValueError(
            f"{scheme} embeds {num_axes}-D coordinates, so position_ids are required: a tensor of shape {shapes} "
            f"for input_ids of shape {(batch, length)} (grid_coordinates(*sizes) gives a full grid's)"
        )
    if not isinstance(coordinates, Tensor):
        raise TypeError(f"position_ids must be a torch.Tensor of integer coordinates, got {type(coordinates).__name__}")
    shape = tuple(coordinates.shape)
    fits = shape == (length, num_axes) or (
        len(shape) == 3 and shape[0] in (1, batch) and shape[1:] == (length, num_axes)
    )
    if not fits:
        raise ValueError(
            f"position_ids has shape {shape}, but {scheme} takes coordinates of shape {shapes} "
            f"for input_ids of shape {(batch, length)}"
        )
    return coordinates


def check_pad_token(pad_token_id: object, vocab_size: int) -> int | None:
    """``pad_token_id`` as a row of the token table, or ``None``."""
    if pad_token_id is None:
        return None
    if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int):
        raise TypeError(f"pad_token_id must be an int or None, got {pad_token_id!r}")
    if not 0 <= pad_token_id < vocab_size:
        raise ValueError(f"pad_token_id={pad_token_id} is outside [0, vocab_size={vocab_size})")
    return pad_token_id


def format_bytes(num_bytes: int) -> str:
    """``num_bytes`` in decimal units, as error messages name them.

    >>> format_bytes(17_179_869_184), format_bytes(3 * 10**13)
    ('17.2 GB', '30.0 TB')
    """
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if num_bytes >= size:
            return f"{num_bytes / size:.1f} {unit}"
    return f"{num_bytes} B"


@functools.cache
def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def device_memory_bytes(device: torch.device | str | None) -> int | None:
    """Total memory of ``device`` (host RAM for the CPU), or ``None`` when unknown (meta, others)."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cpu":
        return _host_memory()
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_properties(device).total_memory
    return None


def check_allocation(num_bytes: int, device: torch.device | str | None, what: str, hint: str = "") -> None:
    """Refuse, before allocating, ``what`` when its ``num_bytes`` exceed the total memory of ``device``.

    A guard against absurd sizes (a typo'd vocabulary, an eager ``T x T`` at T = 65536), which
    would otherwise fail deep inside the allocator or swap the machine to a halt; sizes that
    fit in total but not in free memory are left to the allocator.

    >>> check_allocation(10**15, "cpu", "a (10**12, 256) float32 table")
    Traceback (most recent call last):
    ...
    MemoryError: a (10**12, 256) float32 table would need 1000.0 TB, more than the ... of memory of cpu

    Skipped while ``torch.compile`` traces: reading the machine's memory is a call it cannot trace
    (a graph break per attention layer), and a compiled graph's sizes are fixed when it is built.
    """
    if torch.compiler.is_compiling():
        return
    limit = device_memory_bytes(device)
    if limit is not None and num_bytes > limit:
        raise MemoryError(
            f"{what} would need {format_bytes(num_bytes)}, more than the {format_bytes(limit)} "
            f"of memory of {torch.device('cpu' if device is None else device)}{_hint(hint)}"
        )


def check_table_size(rows: int, width: int, name: str, device=None, dtype: torch.dtype | None = None) -> None:
    """Refuse a ``(rows, width)`` table that could never fit in memory, naming the bytes.

    For embedding tables (token, segment, learned positions) built from user-given sizes.

    >>> check_table_size(10**12, 8, "token table")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    MemoryError: token table of shape (1000000000000, 8) float32 would need 32.0 TB, more than the ... of memory
    of cpu; check vocab_size / max_len
    """
    dtype = torch.get_default_dtype() if dtype is None else dtype
    element = torch.empty((), dtype=dtype, device="meta").element_size()
    dtype_name = str(dtype).removeprefix("torch.")
    check_allocation(
        rows * width * element,
        device,
        f"{name} of shape ({rows}, {width}) {dtype_name}",
        hint="check vocab_size / max_len",
    )
