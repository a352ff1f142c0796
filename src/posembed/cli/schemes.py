"""``posembed schemes [--json]``: every positional scheme, its kind, paper, parameters and limits."""

from __future__ import annotations

import argparse
import json

from posembed.schemes.catalog import COLUMNS, scheme_table

__all__ = ["register", "run", "format_table"]

HEADERS = {
    "name": "name",
    "class": "class",
    "kind": "kind",
    "paper": "paper",
    "parameters": "parameters",
    "length_limit": "length limit",
    "extrapolates": "extrapolates",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schemes",
        help="list every positional scheme",
        description="A table of every positional scheme: name, class, kind (absolute / rotary / bias), "
        "paper, constructor parameters, whether it has a length limit, whether it extrapolates.",
    )
    parser.add_argument("--json", action="store_true", help="print the table as a JSON list of objects")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = scheme_table()
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 0


def format_table(rows: list[dict[str, object]]) -> str:
    """Rows as an aligned plain-text table; booleans shown as yes/no.

    >>> print(format_table([{"name": "x", "class": "X", "kind": "bias", "paper": "", "parameters": "h",
    ...                      "length_limit": False, "extrapolates": True}]))
    name  class  kind  paper  parameters  length limit  extrapolates
    x     X      bias         h           no            yes
    """
    cells = [[HEADERS[column] for column in COLUMNS]]
    cells += [[_cell(row[column]) for column in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
