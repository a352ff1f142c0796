"""The catalogue of every positional scheme: one row per factory entry (``posembed schemes``).

Example:
    >>> rows = {row["name"]: row for row in scheme_table()}
    >>> rows["learned"]["parameters"]
    'max_len, dim, *, init_std=0.02'
    >>> rows["learned"]["length_limit"], rows["sinusoidal"]["length_limit"]
    (True, False)
    >>> rows["alibi"]["sizes"], rows["rope_yarn"]["needs"]
    ('num_heads, symmetric=bidirectional', 'factor, original_max_len')
"""

from __future__ import annotations

import inspect

from posembed.schemes.base import Kind, PositionScheme
from posembed.schemes.factory import ENTRIES, SCHEME_CLASSES, SchemeEntry

__all__ = ["COLUMNS", "load_schemes", "scheme_table", "scheme_row", "has_length_limit", "constructor_parameters"]


#: the keys of every row, in display order
COLUMNS: tuple[str, ...] = (
    "name",
    "class",
    "kind",
    "paper",
    "parameters",
    "sizes",
    "needs",
    "length_limit",
    "extrapolates",
)
#: constructor arguments that size a table: required, they make a hard limit on positions
LIMIT_ARGUMENTS = ("max_len", "max_seq_len", "max_positions", "max_position_embeddings")
#: constructor arguments every module takes; left out of the parameters column
HIDDEN_ARGUMENTS = ("device", "dtype")
_KIND_ORDER = {kind: index for index, kind in enumerate(Kind)}


def load_schemes() -> dict[str, type[PositionScheme]]:
    """Every scheme class by name, in the factory's order."""
    return dict(SCHEME_CLASSES)


def has_length_limit(cls: type[PositionScheme]) -> bool:
    """Whether a class refuses positions beyond some size: it says so, or needs a table size.

    The catalogue reads the class attribute ``has_length_limit``; this rule also counts a
    *required* table-size argument (``max_len`` ...), and the factory tests use it to check that
    no scheme forgot to declare its limit.
    """
    if cls.has_length_limit:
        return True
    parameters = inspect.signature(cls).parameters.values()
    return any(p.name in LIMIT_ARGUMENTS and p.default is inspect.Parameter.empty for p in parameters)


def constructor_parameters(cls: type) -> str:
    """The constructor's arguments as one would call it, without ``device``/``dtype`` (for display).

    >>> from posembed.schemes.absolute.learned import LearnedAbsolute
    >>> constructor_parameters(LearnedAbsolute)
    'max_len, dim, *, init_std=0.02'
    """
    parts: list[str] = []
    star = False
    for p in inspect.signature(cls).parameters.values():
        if p.name in HIDDEN_ARGUMENTS:
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            star = True
        elif p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        prefix = (
            "*"
            if p.kind is inspect.Parameter.VAR_POSITIONAL
            else "**"
            if p.kind is inspect.Parameter.VAR_KEYWORD
            else ""
        )
        default = "" if p.default is inspect.Parameter.empty else f"={p.default!r}"
        parts.append(f"{prefix}{p.name}{default}")
    return ", ".join(parts)


def _sizes(entry: SchemeEntry) -> str:
    """Which arguments the model's sizes fill: ``head_dim``, ``symmetric=bidirectional``."""
    return ", ".join(arg.name if arg.name == arg.size else f"{arg.name}={arg.size}" for arg in entry.args if arg.size)


def scheme_row(entry: SchemeEntry) -> dict[str, object]:
    """One catalogue row (keys :data:`COLUMNS`) for a factory entry."""
    cls = entry.cls
    return {
        "name": entry.name,
        "class": cls.__name__,
        "kind": cls.kind.value,
        "paper": cls.paper,
        "parameters": constructor_parameters(cls),
        "sizes": _sizes(entry),
        "needs": ", ".join(entry.needs),
        "length_limit": entry.length_limit,
        "extrapolates": bool(cls.extrapolates),
    }


def scheme_table() -> list[dict[str, object]]:
    """Every scheme as a row, absolute then rotary then bias, in the factory's order."""
    entries = sorted(ENTRIES, key=lambda entry: _KIND_ORDER[entry.cls.kind])
    return [scheme_row(entry) for entry in entries]
