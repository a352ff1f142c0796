"""``posembed schemes [--wide | --json]``: every positional scheme, its kind, limits and arguments.

The default table fits :data:`WIDTH` columns; ``--wide`` adds the class, paper, constructor
parameters and which arguments the model's sizes fill; ``--json`` prints every field.
"""

from __future__ import annotations

import argparse
import json

from posembed.schemes.catalog import COLUMNS, scheme_table

__all__ = ["register", "run", "format_table", "NARROW_COLUMNS", "WIDTH"]

#: the default output fits this many characters per line
WIDTH = 100
#: columns of the default output (``needs``, last, is cut to fit :data:`WIDTH` if it must)
NARROW_COLUMNS: tuple[str, ...] = ("name", "kind", "length_limit", "extrapolates", "needs")

HEADERS = {
    "name": "name",
    "class": "class",
    "kind": "kind",
    "paper": "paper",
    "parameters": "parameters",
    "sizes": "from sizes",
    "needs": "needs (--set)",
    "length_limit": "length limit",
    "extrapolates": "extrapolates",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schemes",
        help="list every positional scheme",
        description="A table of every positional scheme: name, kind (absolute / rotary / bias), whether it "
        "has a length limit, whether it extrapolates, and the arguments it needs beyond the model's sizes "
        "(give them to `posembed inspect --scheme NAME --set KEY=VALUE`).",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--wide", action="store_true", help="all columns: also class, paper, constructor parameters, sizes"
    )
    output.add_argument("--json", action="store_true", help="print every field as a JSON list of objects")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = scheme_table()
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.wide:
        print(format_table(rows))
    else:
        print(format_table(rows, NARROW_COLUMNS, width=WIDTH))
    return 0


def format_table(rows: list[dict[str, object]], columns: tuple[str, ...] = COLUMNS, *, width: int | None = None) -> str:
    """Rows as an aligned plain-text table; booleans shown as yes/no.

    With ``width``, cells of the last column are cut (ending in ``...``) so no line is longer.

    >>> print(format_table([{"name": "x", "kind": "bias", "needs": "a, b"}], ("name", "kind", "needs")))
    name  kind  needs (--set)
    x     bias  a, b
    """
    cells = [[HEADERS[column] for column in columns]]
    cells += [[_cell(row[column]) for column in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    if width is not None:
        room = width - sum(widths[:-1]) - 2 * (len(columns) - 1)
        if room < len(cells[0][-1]):
            raise ValueError(f"a table of columns {', '.join(columns)} cannot fit in {width} characters")
        cells = [line[:-1] + [_cut(line[-1], room)] for line in cells]
        widths[-1] = min(widths[-1], room)
    lines = ["  ".join(cell.ljust(size) for cell, size in zip(line, widths)).rstrip() for line in cells]
    return "\n".join(lines)


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 3] + "..."


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
