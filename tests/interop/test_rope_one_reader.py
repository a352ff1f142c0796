"""A transformers config's raw RoPE fields are read in one package, ``posembed.interop.rope``, and beside it only
by ``rope check`` (``posembed.interop.rope_check``), whose traps must see what the config wrote: every other
module reads the :class:`RopeSettings` the reader produces (docstrings aside)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "posembed"
#: (``original_max_position_embeddings`` is left out: ``posembed extend`` writes it into its own
#: ``posembed_extension`` record of an absolute table, which is not RoPE)
RAW_KEYS = {
    "rope_parameters",
    "rope_scaling",
    "rope_theta",
    "partial_rotary_factor",
    "rope_interleave",
    "rope_local_base_freq",
    "global_rope_theta",
    "local_rope_theta",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def raw_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return [
        f"{path.relative_to(SRC)}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and id(node) not in skip and node.value in RAW_KEYS
    ]


#: the scheme factory names, per argument, the RoPE setting it is read from (``Arg.rope``); it reads no config
DECLARES = {"schemes/factory.py"}
#: the reader, and the check's traps (what the config wrote)
READERS = ("interop/rope/", "interop/rope_check/")


def test_raw_rope_fields_are_read_only_in_interop_rope():
    outside = [
        hit
        for path in sorted(SRC.rglob("*.py"))
        if not any(room in path.as_posix() for room in READERS) and path.relative_to(SRC).as_posix() not in DECLARES
        for hit in raw_reads(path)
    ]
    assert not outside, "raw RoPE fields read outside posembed.interop.rope:\n" + "\n".join(outside)


def test_the_reader_does_read_them():
    assert raw_reads(SRC / "interop" / "rope" / "settings.py"), "the check would pass on an empty reader"
