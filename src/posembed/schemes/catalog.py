"""The catalogue of every positional scheme: one row per registered class (``posembed schemes``).

Example:
    >>> rows = {row["name"]: row for row in scheme_table()}
    >>> rows["sinusoidal"]["parameters"]
    "dim, *, base=10000.0, layout='interleaved', max_len=None"
    >>> rows["learned"]["length_limit"], rows["sinusoidal"]["length_limit"]
    (True, False)
"""

from __future__ import annotations

import inspect

from posembed.schemes import all_schemes
from posembed.schemes.base import Kind, PositionScheme

__all__ = ["COLUMNS", "load_schemes", "scheme_table", "has_length_limit", "constructor_parameters"]


#: the keys of every row, in display order
COLUMNS: tuple[str, ...] = ("name", "class", "kind", "paper", "parameters", "length_limit", "extrapolates")
#: constructor arguments that size a table: required, they make a hard limit on positions
LIMIT_ARGUMENTS = ("max_len", "max_seq_len", "max_positions", "max_position_embeddings")
#: constructor arguments every module takes; left out of the parameters column
HIDDEN_ARGUMENTS = ("device", "dtype")
_KIND_ORDER = {kind: index for index, kind in enumerate(Kind)}


def load_schemes() -> dict[str, type[PositionScheme]]:
    """Import every scheme module and return the registry, by name in registration order."""
    return all_schemes()


def has_length_limit(cls: type[PositionScheme]) -> bool:
    """Whether positions beyond some size are refused.

    The class attribute ``has_length_limit`` says so; a *required* table-size argument
    (``max_len`` ...) means a limit too, in case a scheme forgot to declare it.
    """
    if cls.has_length_limit:
        return True
    parameters = inspect.signature(cls).parameters.values()
    return any(p.name in LIMIT_ARGUMENTS and p.default is inspect.Parameter.empty for p in parameters)


def constructor_parameters(cls: type) -> str:
    """The constructor's arguments as one would call it, without ``device``/``dtype``.

    >>> from posembed.schemes.learned import LearnedAbsolute
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
        prefix = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(p.kind, "")
        default = "" if p.default is inspect.Parameter.empty else f"={p.default!r}"
        parts.append(f"{prefix}{p.name}{default}")
    return ", ".join(parts)


def scheme_row(cls: type[PositionScheme]) -> dict[str, object]:
    """One catalogue row (keys :data:`COLUMNS`) for a scheme class."""
    return {
        "name": cls.name,
        "class": cls.__name__,
        "kind": cls.kind.value,
        "paper": cls.paper,
        "parameters": constructor_parameters(cls),
        "length_limit": has_length_limit(cls),
        "extrapolates": bool(cls.extrapolates),
    }


def scheme_table() -> list[dict[str, object]]:
    """Every registered scheme as a row, absolute then rotary then bias, in registration order."""
    classes = sorted(load_schemes().values(), key=lambda cls: _KIND_ORDER[cls.kind])
    return [scheme_row(cls) for cls in classes]
