"""Generated blocks of a page: read, replace or check the text between two markers.

A page's numbers sit between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``
(each on a line of its own or inline); a generator writes that text from stored results, and a
test checks the page still holds what the generator writes. Other text is never touched.

Usage (from the repository root)::

    python tools/pages.py show docs/results.md NAME          # print the block
    python tools/pages.py names docs/results.md              # list the blocks

In Python (``sys.path`` holding the repository root, as under pytest)::

    from tools.pages import read_block, replace_block, check_block, write_block, check_blocks, write_blocks

>>> page = "intro\\n<!-- generated:t -->\\nold\\n<!-- /generated:t -->\\nend\\n"
>>> read_block(page, "t")
'\\nold\\n'
>>> replace_block(page, "t", "\\nnew\\n")
'intro\\n<!-- generated:t -->\\nnew\\n<!-- /generated:t -->\\nend\\n'
>>> check_block(page, "t", "\\nnew\\n")
['block t differs from what its generator writes:\\n-old\\n+new']
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import tempfile
from pathlib import Path

__all__ = [
    "block_names",
    "read_block",
    "replace_block",
    "check_block",
    "write_block",
    "check_blocks",
    "write_blocks",
    "MARK",
]

#: the opening and closing markers of block ``NAME``
MARK = ("<!-- generated:{name} -->", "<!-- /generated:{name} -->")
_NAME = re.compile(r"[A-Za-z0-9_.:-]+")


def _span(text: str, name: str) -> tuple[int, int]:
    """Start and end offsets of block ``name``'s body (between its markers)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"a block name is letters, digits and _.:-, got {name!r}")
    opening, closing = (m.format(name=name) for m in MARK)
    count = text.count(opening)
    if count != 1:
        raise ValueError(f"the page holds {opening} {count} times; it must hold it once")
    start = text.index(opening) + len(opening)
    end = text.find(closing, start)
    if end < 0 or text.count(closing) != 1:
        raise ValueError(f"{opening} needs exactly one {closing} after it")
    return start, end


def block_names(text: str) -> list[str]:
    """The names of every block on the page, in order."""
    return re.findall(r"<!-- generated:([A-Za-z0-9_.:-]+) -->", text)


def read_block(text: str, name: str) -> str:
    """The text between block ``name``'s markers (markers excluded)."""
    start, end = _span(text, name)
    return text[start:end]


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name``'s body replaced by ``body`` (markers and the rest kept)."""
    start, end = _span(text, name)
    return text[:start] + body + text[end:]


def check_block(text: str, name: str, body: str) -> list[str]:
    """Empty when block ``name`` holds ``body``, else one message with a line diff."""
    held = read_block(text, name)
    if held == body:
        return []
    diff = difflib.unified_diff(held.strip("\n").splitlines(), body.strip("\n").splitlines(), lineterm="", n=0)
    lines = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
    return [f"block {name} differs from what its generator writes:\n" + "\n".join(lines)]


def write_block(path: str | os.PathLike, name: str, body: str) -> bool:
    """Replace block ``name`` in the file at ``path`` (atomically); whether the file changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = replace_block(text, name, body)
    if new == text:
        return False
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(new)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return True


def check_blocks(text: str, blocks: dict[str, str]) -> list[str]:
    """:func:`check_block` of every ``{name: body}`` of a page's generator: empty when the page holds them all."""
    return [problem for name, body in blocks.items() for problem in check_block(text, name, body)]


def write_blocks(path: str | os.PathLike, blocks: dict[str, str]) -> dict[str, bool]:
    """:func:`write_block` of every ``{name: body}``; whether each changed the file."""
    return {name: write_block(path, name, body) for name, body in blocks.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="print one block")
    show.add_argument("page")
    show.add_argument("name")
    names = sub.add_parser("names", help="list the blocks")
    names.add_argument("page")
    args = parser.parse_args(argv)
    text = Path(args.page).read_text(encoding="utf-8")
    if args.command == "show":
        sys.stdout.write(read_block(text, args.name))
    else:
        sys.stdout.write("".join(f"{n}\n" for n in block_names(text)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
