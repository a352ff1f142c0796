"""Every vocabulary of scheme names hangs off the factory's entries: one table, read everywhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from posembed.interop.rope.config import ROPE_TYPES
from posembed.lab.context import METHODS, method_scheme
from posembed.schemes.factory import ENTRIES, FACTORY, METHOD_SCHEMES, ROPE_TYPE_SCHEMES


def test_rope_types_are_the_factorys():
    assert list(ROPE_TYPES) == list(ROPE_TYPE_SCHEMES)
    assert ROPE_TYPE_SCHEMES["dynamic"] == "rope_dynamic_ntk" and ROPE_TYPE_SCHEMES["default"] == "rope"


def test_methods_are_the_factorys_in_table_order():
    assert (
        METHODS
        == tuple(METHOD_SCHEMES)
        == (
            "extrapolate",
            "linear",
            "ntk",
            "dynamic_ntk",
            "yarn",
            "llama3",
            "longrope",
        )
    )


def test_each_alias_names_one_entry():
    for field in ("rope_type", "method"):
        names = [getattr(entry, field) for entry in ENTRIES if getattr(entry, field) is not None]
        assert len(names) == len(set(names)), f"{field} repeated: {names}"


@pytest.mark.parametrize("method", METHODS)
def test_each_method_builds_its_entrys_class(method):
    scheme = method_scheme(method, head_dim=16, factor=4.0, original_len=64)
    assert type(scheme) is FACTORY[METHOD_SCHEMES[method]].cls


def test_an_unknown_method_suggests_the_closest():
    with pytest.raises(ValueError, match=r"'yarm' \(did you mean 'yarn'\?\)"):
        method_scheme("yarm", head_dim=16, factor=4.0, original_len=64)


def test_lab_extend_offers_exactly_the_methods(capsys):
    from posembed.cli import main

    with pytest.raises(SystemExit):
        main(["lab", "extend", "x", "--method", "yarm", "--factor", "2"])
    err = capsys.readouterr().err
    assert "invalid choice: 'yarm'" in err and all(method in err for method in METHODS)


# --- one table of names: a dict literal keyed by scheme names, rope types or method names is the factory's alone ---

SRC = Path(__file__).resolve().parents[2] / "src" / "posembed"
#: the files allowed to key a table by those names: the factory, whose entries are the one table
ALLOWED = {"schemes/factory.py"}
#: files whose tables are known and waiting to go (none: keep it empty)
PENDING: set[str] = set()
#: every name a scheme goes by (its factory name, transformers' rope type, the lab's method name)
NAMES = frozenset(FACTORY) | frozenset(ROPE_TYPE_SCHEMES) | frozenset(METHOD_SCHEMES)


def _data(value: ast.AST) -> bool:
    """A number, or a tuple / list of numbers: a published figure per name, not a way to build one."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return all(map(_data, value.elts))
    return (
        isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
    )


def name_tables(path: Path, names: frozenset[str] = NAMES) -> list[str]:
    """``file:line`` of each dict literal in ``path`` with two or more keys that are scheme names (or
    ``names``; a name's number or numbers, as published results, do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            named = sorted({key.value for key, value in zip(node.keys, node.values) if isinstance(key, ast.Constant)
                            and key.value in names and not _data(value)})  # fmt: skip
            if len(named) >= 2:
                found.append(f"{path.relative_to(SRC).as_posix()}:{node.lineno} keys {', '.join(named)}")
    return found


def tables_outside_the_factory(paths) -> list[str]:
    return [hit for path in paths if path.relative_to(SRC).as_posix() not in ALLOWED for hit in name_tables(path)]


def _sources(pending: bool) -> list[Path]:
    return [path for path in sorted(SRC.rglob("*.py")) if (path.relative_to(SRC).as_posix() in PENDING) == pending]


def test_no_name_table_outside_the_factory():
    found = tables_outside_the_factory(_sources(pending=False))
    assert not found, "scheme-name tables outside schemes/factory.py (build through its entries):\n" + "\n".join(found)


def test_the_scan_finds_a_table(tmp_path):
    table = SRC / "interop" / "_probe_table.py"  # a file under src/ so that its path is reported as one
    try:
        table.write_text(
            'BUILDERS = {"rope_yarn": f, "rope_linear": g}\nOTHER = {"a": f, "yarn": g}\n'
            'PUBLISHED = {"alibi": 0.5, "rope": (0.3, 0.2)}\n',
            encoding="utf-8",
        )
        assert tables_outside_the_factory([table]) == ["interop/_probe_table.py:1 keys rope_linear, rope_yarn"]
    finally:
        table.unlink()
