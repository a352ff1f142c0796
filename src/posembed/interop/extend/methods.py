"""Ways to grow a trained absolute position table to more positions: pure tensor functions.

Each method maps the ``L`` trained rows of a learned table, shape ``(L, C)``, to ``N > L`` rows,
shape ``(N, C)``. Rows a model reserves below its first position (RoBERTa's ``0 .. padding_idx``)
are not given to these functions; :func:`extend_table` keeps them as they are.

``copy``
    New rows tile the trained ones, row ``p`` = trained row ``p mod L``, as Longformer did
    (Beltagy et al. 2020, *Longformer*, section 5). The first ``L`` rows are bit-identical, so
    any input within the original length gives exactly the original outputs. Positions ``p``
    and ``p + L`` share one vector: only content and attention tell them apart.
``interpolate``
    Position interpolation (Chen et al. 2023, *Extending Context Window of Large Language
    Models via Positional Interpolation*), here on a learned table: new position ``p`` reads the
    trained table at ``x = p (L - 1) / (N - 1)``, linearly between its two neighbours, so row 0
    and the last trained row stay the two ends. Every position stays distinct, but every input,
    even a short one, now sees compressed positions: outputs change at all lengths.
``hierarchical``
    Hierarchical decomposition (Su 2020, "层次分解位置编码，让BERT可以处理超长文本", kexue.fm
    archive 7947): with ``u_i = (p_i - a p_0) / (1 - a)``, position ``i L + j`` gets
    ``a u_i + (1 - a) u_j`` (``a = 0.4``). The first ``L`` rows equal the trained ones exactly
    (as with ``copy``, short inputs are unchanged) and, unlike ``copy``, every position up to
    ``L**2`` has its own vector. Offered because it combines the two properties above.
``recurrent``
    LongEmbed's *recurrent positions* (Zhu et al. 2024, *LongEmbed*, section 4.2): position
    ``p`` reuses id ``p mod L``. As a table this is exactly ``copy`` (the same rows, bit for
    bit); the name is kept so LongEmbed's methods can be asked for by their own names.
``grouped``
    LongEmbed's *grouped positions*: position ``p`` reuses id ``floor(p / s)`` with
    ``s = ceil(N / L)``, so runs of ``s`` neighbours share one trained vector. Every input,
    even a short one, now sees grouped positions (LongEmbed picks ``s`` per input; a table
    fixes it for all lengths), so outputs change at all lengths, as with ``interpolate``.

Example:
    >>> table = torch.arange(8.0).reshape(4, 2)
    >>> copy_rows(table, 6)[:, 0].tolist()
    [0.0, 2.0, 4.0, 6.0, 0.0, 2.0]
    >>> interpolate_rows(table, 7)[:, 0].tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    >>> torch.equal(hierarchical_rows(table, 16)[:4], table)
    True
    >>> grouped_rows(table, 8)[:, 0].tolist()
    [0.0, 0.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0]
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from posembed._utils.checks import did_you_mean

__all__ = [
    "METHODS",
    "KEEPS_TRAINED_ROWS",
    "HIERARCHICAL_ALPHA",
    "copy_rows",
    "interpolate_rows",
    "hierarchical_rows",
    "grouped_rows",
    "extend_table",
]

#: Su's mixing weight ``a`` for the hierarchical decomposition
HIERARCHICAL_ALPHA = 0.4


def _check(rows: Tensor, to: int, least_rows: int = 1) -> int:
    if rows.dim() != 2:
        raise ValueError(f"a position table must be 2-D (L, C), got shape {tuple(rows.shape)}")
    trained = rows.shape[0]
    if trained < least_rows:
        raise ValueError(f"this method needs at least {least_rows} trained rows, the table has {trained}")
    if not isinstance(to, int) or isinstance(to, bool) or to <= trained:
        raise ValueError(f"the new size must be an int larger than the {trained} trained rows, got {to!r}")
    return trained


def copy_rows(rows: Tensor, to: int) -> Tensor:
    """Tile the trained rows: row ``p`` of the result is ``rows[p % L]``.

    Shape: ``(L, C) -> (to, C)``; the first ``L`` rows are ``rows`` bit for bit.
    """
    trained = _check(rows, to)
    index = torch.arange(to, device=rows.device) % trained
    return rows[index].clone()


def interpolate_rows(rows: Tensor, to: int) -> Tensor:
    """Linear interpolation of the whole table onto ``to`` evenly spaced points, ends kept.

    Shape: ``(L, C) -> (to, C)``. Computed in float64, cast back to ``rows.dtype``.
    """
    trained = _check(rows, to, least_rows=2)
    wide = rows.to(torch.float64)
    x = torch.arange(to, dtype=torch.float64, device=rows.device) * (trained - 1) / (to - 1)
    low = x.floor().long().clamp(max=trained - 2)
    weight = (x - low).unsqueeze(1)  # (N, 1)
    out = wide[low] * (1 - weight) + wide[low + 1] * weight
    out[0], out[-1] = wide[0], wide[-1]
    return out.to(rows.dtype)


def hierarchical_rows(rows: Tensor, to: int, alpha: float = HIERARCHICAL_ALPHA) -> Tensor:
    """Su's hierarchical decomposition: position ``i L + j`` -> ``a u_i + (1 - a) u_j``.

    Shape: ``(L, C) -> (to, C)`` with ``to <= L**2``; the first ``L`` rows are ``rows`` exactly.
    """
    trained = _check(rows, to)
    if to > trained * trained:
        raise ValueError(f"hierarchical extension reaches at most L**2 = {trained * trained} positions, asked {to}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    wide = rows.to(torch.float64)
    basis = (wide - alpha * wide[:1]) / (1 - alpha)  # (L, C)
    position = torch.arange(to, device=rows.device)
    out = alpha * basis[position // trained] + (1 - alpha) * basis[position % trained]
    out = out.to(rows.dtype)
    out[:trained] = rows
    return out


def grouped_rows(rows: Tensor, to: int) -> Tensor:
    """Grouped positions: row ``p`` of the result is ``rows[p // s]``, ``s = ceil(to / L)``.

    Shape: ``(L, C) -> (to, C)``; rows are copied bit for bit, ``s`` at a time.
    """
    trained = _check(rows, to)
    group = -(-to // trained)  # ceil
    index = torch.arange(to, device=rows.device) // group
    return rows[index].clone()


#: method name -> function ``(trained_rows, to) -> new_rows``
METHODS: dict[str, Callable[[Tensor, int], Tensor]] = {
    "copy": copy_rows,
    "interpolate": interpolate_rows,
    "hierarchical": hierarchical_rows,
    "recurrent": copy_rows,
    "grouped": grouped_rows,
}
#: methods whose first ``L`` rows are the trained ones bit for bit: inputs within the old
#: length give exactly the old outputs, and ``--finetune`` can tune the new rows alone
KEEPS_TRAINED_ROWS: frozenset[str] = frozenset({"copy", "hierarchical", "recurrent"})


def extend_table(table: Tensor, to: int, method: str, *, offset: int = 0) -> Tensor:
    """A whole position table grown to ``offset + to`` rows; rows ``0 .. offset-1`` kept.

    Args:
        table: the checkpoint's table, shape ``(offset + L, C)``; rows ``offset ..`` are trained
            positions 0 .. L-1 (RoBERTa: ``offset = padding_idx + 1 = 2``).
        to: the number of positions wanted (``> L``).
        method: a key of :data:`METHODS`.

    Returns:
        shape ``(offset + to, C)``, same dtype and device as ``table``.
    """
    if method not in METHODS:
        raise ValueError(
            f"unknown extension method {method!r}{did_you_mean(method, METHODS)}; choose one of {', '.join(METHODS)}"
        )
    if not 0 <= offset < table.shape[0]:
        raise ValueError(f"offset {offset} must lie in 0..{table.shape[0] - 1} for a table of {table.shape[0]} rows")
    grown = METHODS[method](table[offset:], to)
    return torch.cat([table[:offset], grown], dim=0)
