"""tools/mutate.py and its parts (mutate_targets: what, mutants: how): mutants listed and written
without running any test."""

from __future__ import annotations

import ast

import pytest

from tools import mutate
from tools.mutants import SRC, Mutant, mutants, mutated_source
from tools.mutate_targets import TARGETS


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_names_functions_and_tests_that_exist(target):
    """A function renamed or moved away leaves its target silently without mutants: name it here."""
    path, functions, tests = TARGETS[target]
    tree = ast.parse((SRC / "posembed" / path).read_text(encoding="utf-8"))
    defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert "*" in functions or not set(functions) - defined, (
        f"{target}: {sorted(set(functions) - defined)} not in {path}"
    )
    assert mutants(target)
    files = [t for t in tests if t.startswith("tests/")]
    assert files and all((SRC.parent / t).is_file() for t in files), files


def test_a_mutant_changes_one_site_and_the_baseline_none():
    source = (SRC / "posembed" / "schemes" / "positions.py").read_text(encoding="utf-8")
    found = mutants("positions")
    assert found and [m.index for m in found] == list(range(len(found)))
    assert mutated_source(Mutant("positions", -1, 0, 0, "-", "baseline")) == source
    first = found[0]
    changed = mutated_source(first)
    assert changed != ast.unparse(ast.parse(source))
    assert ast.dump(ast.parse(changed)) != ast.dump(ast.parse(source))
    with pytest.raises(LookupError):
        mutated_source(Mutant("positions", len(found), 0, 0, "-", "past the last site"))


def test_list_prints_every_mutant_and_runs_nothing(capsys):
    assert mutate.main(["--list", "alibi"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(mutants("alibi")) and all(line.startswith("alibi:") for line in lines)
