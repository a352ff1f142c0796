"""The mutants of ``tools/mutate.py``: which sites of a target's functions change, and how.

A site is an operator or constant inside a chosen function (``!=`` -> ``==``, ``<`` -> ``<=``,
``+`` -> ``-``, ``2`` -> ``3``, ``and`` -> ``or``, a dropped ``-`` or ``not``); docstrings and
type annotations are left alone. :func:`mutants` lists a target's mutants in a stable order
(the index-th site of the module, in walk order) and :func:`mutated_source` writes one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tools.mutate_targets import TARGETS

__all__ = ["Mutant", "mutants", "mutated_source", "SRC"]

SRC = Path(__file__).resolve().parents[1] / "src"

COMPARE = {
    ast.Eq: [ast.NotEq],
    ast.NotEq: [ast.Eq, ast.Gt, ast.Lt],  # != -> > : issue 14's mutant
    ast.Lt: [ast.LtE, ast.Gt],
    ast.LtE: [ast.Lt, ast.GtE],
    ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE],
    ast.Is: [ast.IsNot],
    ast.IsNot: [ast.Is],
    ast.In: [ast.NotIn],
    ast.NotIn: [ast.In],
}
BINARY = {
    ast.Add: [ast.Sub],
    ast.Sub: [ast.Add],
    ast.Mult: [ast.Div],
    ast.Div: [ast.Mult],
    ast.FloorDiv: [ast.Div, ast.Mult],
    ast.Pow: [ast.Mult],
    ast.Mod: [ast.FloorDiv],
    ast.BitAnd: [ast.BitOr],
    ast.BitOr: [ast.BitAnd],
}
SYMBOL = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Pow: "**",
    ast.Mod: "%",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.And: "and",
    ast.Or: "or",
}


@dataclass(frozen=True)
class Mutant:
    target: str
    index: int  # the index-th mutable site of the module, in walk order
    choice: int  # which replacement at that site
    line: int
    function: str
    description: str


def _functions(tree: ast.Module, wanted: tuple[str, ...]):
    """(function name, node) for every function (nested ones too) whose name is wanted."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and ("*" in wanted or node.name in wanted):
            yield node.name, node


def _is_docstring(node: ast.AST, parents: dict) -> bool:
    parent = parents.get(node)
    return isinstance(parent, ast.Expr) and isinstance(node, ast.Constant) and isinstance(node.value, str)


def _annotations(tree: ast.Module) -> set[int]:
    """ids of every node inside a type annotation (not evaluated: ``from __future__ import annotations``)."""
    roots = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots.append(node.returns)
        elif isinstance(node, ast.arg):
            roots.append(node.annotation)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return {id(inner) for root in roots if root is not None for inner in ast.walk(root)}


def _sites(tree: ast.Module, wanted: tuple[str, ...]):
    """Every (node, replacements, function, description) inside the wanted functions, in a stable order."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    seen: set[int] = _annotations(tree)
    for name, function in _functions(tree, wanted):
        for node in ast.walk(function):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, ast.Compare):
                for k, op in enumerate(node.ops):
                    for new in COMPARE.get(type(op), []):
                        yield node, ("compare", k, new), name, f"{SYMBOL[type(op)]} -> {SYMBOL[new]}"
            elif isinstance(node, (ast.BinOp, ast.AugAssign)):
                for new in BINARY.get(type(node.op), []):
                    yield node, ("binop", new), name, f"{SYMBOL[type(node.op)]} -> {SYMBOL[new]}"
            elif isinstance(node, ast.BoolOp):
                new = ast.Or if isinstance(node.op, ast.And) else ast.And
                yield node, ("boolop", new), name, f"{SYMBOL[type(node.op)]} -> {SYMBOL[new]}"
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
                yield node, ("unary",), name, "drop unary " + ("-" if isinstance(node.op, ast.USub) else "not")
            elif isinstance(node, ast.Constant) and not _is_docstring(node, parents):
                value = node.value
                if isinstance(value, bool):
                    yield node, ("const", not value), name, f"{value} -> {not value}"
                elif isinstance(value, int):
                    yield node, ("const", value + 1), name, f"{value} -> {value + 1}"
                elif isinstance(value, float):
                    yield (
                        node,
                        ("const", value * 2 if value else 1.0),
                        name,
                        f"{value} -> {value * 2 if value else 1.0}",
                    )


def _apply(node: ast.AST, change: tuple) -> None:
    kind = change[0]
    if kind == "compare":
        node.ops[change[1]] = change[2]()
    elif kind == "binop":
        node.op = change[1]()
    elif kind == "boolop":
        node.op = change[1]()
    elif kind == "const":
        node.value = change[1]


def _replace_unary(tree: ast.Module, target_node: ast.UnaryOp) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target_node:
                setattr(parent, field, target_node.operand)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if item is target_node:
                        value[i] = target_node.operand


def mutants(target: str) -> list[Mutant]:
    path, wanted, _ = TARGETS[target]
    tree = ast.parse((SRC / "posembed" / path).read_text())
    found = []
    for index, (node, _change, function, description) in enumerate(_sites(tree, wanted)):
        found.append(Mutant(target, index, 0, node.lineno, function, description))
    return found


def mutated_source(mutant: Mutant) -> str:
    path, wanted, _ = TARGETS[mutant.target]
    if mutant.index < 0:  # the baseline: the module unchanged
        return (SRC / "posembed" / path).read_text()
    tree = ast.parse((SRC / "posembed" / path).read_text())
    for index, (node, change, _, _) in enumerate(_sites(tree, wanted)):
        if index == mutant.index:
            if change[0] == "unary":
                _replace_unary(tree, node)
            else:
                _apply(node, change)
            break
    else:
        raise LookupError(mutant)
    return ast.unparse(ast.fix_missing_locations(tree))
