"""A small mutation tester for posembed's position formulas (a dev tool; CI does not run it).

Each mutant changes one operator or constant inside one chosen function (``!=`` -> ``==``,
``<`` -> ``<=``, ``+`` -> ``-``, ``2`` -> ``3``, ``and`` -> ``or``, ...). It is written to a
temporary copy of ``src/`` (the real source files are never touched: others import them), and
the fast tests of that module run with the copy first on ``PYTHONPATH``. A mutant the tests
still pass is a *survivor*: either a test is missing or the mutant is equivalent.

Usage::

    python tools/mutate.py                      # every target below
    python tools/mutate.py positions alibi      # some targets
    python tools/mutate.py --list positions     # print the mutants, run nothing
    python tools/mutate.py --jobs 2             # mutants in parallel

Exit status 0 when no mutant survives, 1 otherwise. A full run takes about an hour on two busy cores
with ``--jobs 1`` (measured per target: extend 20 min, extend_finetune 12, position_check 11,
extend_methods and context_evaluate 6, retrieval_report 3, retrieval 1); ``--only`` re-checks survivors.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: name: (module file under src/posembed, functions to mutate ("*" = all), fast tests)
TARGETS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "positions": ("positions.py", ("*",), ("tests/test_positions.py",)),
    "sinusoidal": (
        "schemes/sinusoidal.py",
        ("check_sinusoid_args", "sinusoid_inv_freq", "_lay_out", "sinusoidal_table", "_within", "reset_parameters"),
        ("tests/schemes/test_formulas.py", "tests/schemes/test_sinusoidal.py", "-k", "not compiled and not linear_probe"),
    ),
    "rotary": ("schemes/rotary.py", ("rope_inv_freq",), ("tests/schemes/test_formulas.py", "tests/schemes/test_rotary.py", "-k", "not compiled")),
    "alibi": ("schemes/alibi.py", ("alibi_slopes", "power_of_two", "alibi_bias"), ("tests/schemes/test_formulas.py", "tests/schemes/test_alibi.py")),
    "t5_bias": (
        "schemes/t5_bias.py",
        ("relative_position_bucket", "_check_bucket_config"),
        ("tests/schemes/test_formulas.py", "tests/schemes/test_t5_bias.py"),
    ),
    "relative": (
        "schemes/relative.py",
        ("*",),
        (
            "tests/schemes/test_formulas.py", "tests/schemes/test_alibi.py", "tests/schemes/test_t5_bias.py", "tests/schemes/test_score_mod.py",
            "-k", "not compiled",
        ),
    ),
    "rotary_yarn": (
        "schemes/rotary_yarn.py",
        ("*",),
        ("tests/schemes/test_rotary_yarn.py", "tests/schemes/test_rotary_scaling.py", "tests/schemes/test_rotary_config.py"),
    ),
    "passkey": ("lab/tasks/passkey.py", ("*",), ("tests/lab/test_passkey.py", "tests/lab/test_passkey_mutants.py")),
    "extend_methods": ("interop/extend/methods.py", ("*",), ("tests/interop/test_extend_methods.py",)),
    "extend": (
        "interop/extend/__init__.py",
        (
            "read_layout", "_check_family", "_offset", "_weights_file", "_find_table", "_key_shapes", "extend_checkpoint",
            "_check_request", "_check_finetune", "_read_table", "_is_foreign", "_copy_others", "_grow", "_write_weights",
            "_shards_to_rewrite", "_rewrite_index", "_tensor_bytes", "_write_configs", "positions",
        ),
        ("tests/interop/test_extend.py", "-k", "not sentence_transformers and not finetune_tunes and not within_512"),
    ),
    "extend_finetune": (
        "interop/extend/finetune.py",
        ("tune_new_rows", "_check", "_pairs", "_embed", "_with_table"),
        ("tests/interop/test_extend_finetune.py",),
    ),
    "position_check": (
        "interop/extend/position_check.py",
        ("_is_causal", "_token_ids", "draw", "_recipe", "_position_kind", "_padded", "_diff", "_batch_results",
         "_packed_results", "check_positions", "ok", "format_position_report"),
        ("tests/interop/test_position_check.py",),
    ),
    "retrieval": (
        "interop/extend/retrieval.py",
        ("rank_scores", "_windows", "_normalise"),
        ("tests/interop/test_retrieval.py", "-k", "rank_scores or pcw_windows or encoder_encodes or normalised"),
    ),
    "retrieval_report": (
        "interop/extend/retrieval_report.py",
        ("wilson", "mcnemar", "chance"),
        ("tests/interop/test_retrieval.py", "-k", "chance or wilson or mcnemar"),
    ),
    "perplexity": ("lab/perplexity.py", ("*",), ("tests/lab/test_perplexity.py",)),
    "worker_plan": (
        "lab/sweep/worker_plan.py", ("*",), ("tests/lab/test_worker_plan.py", "-k", "not runner_plans_when_workers"),
    ),
    "rope_traps": (
        "interop/rope/traps.py",
        ("*",),
        (  # the two slow tests (transformers' own configs, 35 s) left out: run them when a survivor is in doubt
            "tests/interop/test_rope_traps_mutants.py", "tests/interop/test_rope_check_traps.py",
            "-k", "not clean_configs_have_no_warnings and not factor_nothing_reads_is_a_warning",
        ),
    ),
    "context_evaluate": (
        "lab/context/evaluate.py",
        ("_load", "passkey_grid", "_batch", "model_device", "on_device", "train_steps"),
        (
            "tests/lab/test_context_perplexity.py", "tests/lab/test_context_evaluate.py", "tests/lab/test_context_curriculum.py",
            "tests/lab/test_context_device.py", "tests/lab/test_context.py",
        ),
    ),
}

COMPARE = {
    ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq, ast.Gt, ast.Lt],  # != -> > : issue 14's mutant
    ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.GtE],
    ast.Gt: [ast.GtE, ast.Lt], ast.GtE: [ast.Gt, ast.LtE], ast.Is: [ast.IsNot], ast.IsNot: [ast.Is],
    ast.In: [ast.NotIn], ast.NotIn: [ast.In],
}
BINARY = {
    ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div], ast.Div: [ast.Mult], ast.FloorDiv: [ast.Div, ast.Mult],
    ast.Pow: [ast.Mult], ast.Mod: [ast.FloorDiv], ast.BitAnd: [ast.BitOr], ast.BitOr: [ast.BitAnd],
}
SYMBOL = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Is: "is",
    ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
    ast.Div: "/", ast.FloorDiv: "//", ast.Pow: "**", ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|",
    ast.And: "and", ast.Or: "or",
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
                    yield node, ("const", value * 2 if value else 1.0), name, f"{value} -> {value * 2 if value else 1.0}"


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
    for index, (node, change, function, description) in enumerate(_sites(tree, wanted)):
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


def run_tests(src_copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[bool, str]:
    """True when the tests pass with ``src_copy`` first on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src_copy), os.environ.get("PYTHONPATH")]))}
    env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-x", "-q", "--no-header", "-p", "no:randomly", *tests]
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "timeout"
    return done.returncode == 0, (done.stdout + done.stderr)[-1500:]


def _preload() -> None:
    """Import the heavy dependencies once; every mutant's test run is a fork of this process.

    posembed itself must not be imported here: each child imports it from its own copy.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch

    torch.set_num_threads(1)
    try:  # the rope targets' tests read transformers' config classes: import them once here, not in every mutant
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except ImportError:
        CONFIG_MAPPING = {}
    for model_type in list(CONFIG_MAPPING.keys()):
        try:
            CONFIG_MAPPING[model_type]
        except Exception:  # noqa: BLE001 - a config class that needs a missing extra is simply not preloaded
            pass
    assert "posembed" not in sys.modules, "posembed was imported before forking"


def _child(src_copy: Path, tests: tuple[str, ...], log: Path) -> None:
    """In a forked child: run pytest on this copy; exit 0 (pass), 1 (fail) or 99 (wrong posembed)."""
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(ROOT)
        sys.path.insert(0, str(src_copy))
        import pytest

        code = int(pytest.main(["-p", "no:xdist", "-x", "-q", "--no-header", "-p", "no:randomly", *tests]))
        where = getattr(sys.modules.get("posembed"), "__file__", "") or ""
        if not Path(where).resolve().is_relative_to(src_copy.resolve()):
            print(f"posembed came from {where}, not the mutated copy", flush=True)
            code = 99
    except BaseException as error:  # noqa: BLE001 - report anything, then leave without cleanup
        print(repr(error), flush=True)
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_forked(todo: list[Mutant], workdir: Path, jobs: int, timeout: float, report) -> None:
    """Run every mutant in a forked child (no threads in this process: fork-safe), ``jobs`` at a time."""
    pending = list(todo)
    running: dict[int, tuple[Mutant, Path, Path, float]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            mutant = pending.pop(0)
            src_copy = _fresh_copy(workdir)
            path, _, tests = TARGETS[mutant.target]
            (src_copy / "posembed" / path).write_text(mutated_source(mutant))
            log = src_copy / "pytest.log"
            pid = os.fork()
            if pid == 0:
                _child(src_copy, tests, log)
            running[pid] = (mutant, src_copy, log, time.perf_counter())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for child, (mutant, _, _, started) in list(running.items()):
                if time.perf_counter() - started > timeout:
                    os.kill(child, 9)
            time.sleep(0.1)
            continue
        mutant, src_copy, log, _ = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        output = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        outcome = {0: "survived", 99: "error"}.get(code, "killed" if code > 0 else "timeout")
        shutil.rmtree(src_copy, ignore_errors=True)
        report(mutant, outcome, output)


def _fresh_copy(workdir: Path) -> Path:
    copy_root = Path(tempfile.mkdtemp(prefix="posembed-mutant-", dir=workdir))
    shutil.copytree(SRC / "posembed", copy_root / "posembed", ignore=shutil.ignore_patterns("__pycache__"))
    return copy_root


def check_isolation(src_copy: Path) -> None:
    """The tests must import the copy, not the installed (editable) package."""
    env = {**os.environ, "PYTHONPATH": str(src_copy)}
    where = subprocess.run(
        [sys.executable, "-c", "import posembed; print(posembed.__file__)"], cwd=ROOT, env=env,
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(src_copy.resolve()):
        raise SystemExit(f"the copy is not imported first ({where}); cannot mutate safely")


def run_one(mutant: Mutant, workdir: Path, timeout: float) -> tuple[Mutant, str, str]:
    src_copy = _fresh_copy(workdir)
    try:
        path, _, tests = TARGETS[mutant.target]
        (src_copy / "posembed" / path).write_text(mutated_source(mutant))
        passed, output = run_tests(src_copy, tests, timeout)
        return mutant, "survived" if passed else ("timeout" if output == "timeout" else "killed"), output
    finally:
        shutil.rmtree(src_copy, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", choices=[*TARGETS, []], help="default: all")
    parser.add_argument("--list", action="store_true", help="print the mutants and stop")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per test run")
    parser.add_argument("--no-fork", action="store_true", help="a fresh interpreter per mutant (slower)")
    parser.add_argument("--only", help="comma-separated mutant indices of a single target (re-check survivors)")
    args = parser.parse_args(argv)
    targets = args.targets or list(TARGETS)
    todo = [m for t in targets for m in mutants(t)]
    if args.only:
        wanted = {int(i) for i in args.only.split(",")}
        todo = [m for m in todo if m.index in wanted]
    if args.list:
        for m in todo:
            print(f"{m.target}:{m.index:3d}  line {m.line:4d}  {m.function:28s} {m.description}")
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="posembed-mutation-"))
    try:
        check_isolation(_fresh_copy(workdir))
        # the unmutated copy must pass, or every mutant would look killed
        baseline = [Mutant(target, -1, 0, 0, "-", "no mutation (baseline)") for target in targets]
        todo = baseline + todo
        start, survivors, done = time.perf_counter(), [], [0]

        def report(mutant: Mutant, outcome: str, output: str) -> None:
            if mutant.index < 0:
                if outcome != "survived":
                    print(output)
                    raise SystemExit(f"the tests of {mutant.target} fail without any mutation ({outcome})")
                print(f"baseline passes: {mutant.target}", flush=True)
                return
            done[0] += 1
            if outcome != "killed":
                survivors.append((mutant, outcome))
                if outcome == "error":
                    print(output)
            print(f"[{done[0]}/{len(todo) - len(baseline)}] {outcome:8s} {mutant.target}:{mutant.index} line {mutant.line} "
                  f"{mutant.function}: {mutant.description}", flush=True)

        if args.no_fork or not hasattr(os, "fork"):
            with ThreadPoolExecutor(args.jobs) as pool:
                for mutant, outcome, output in pool.map(lambda m: run_one(m, workdir, args.timeout), todo):
                    report(mutant, outcome, output)
        else:
            _preload()
            run_forked(todo, workdir, args.jobs, args.timeout, report)
        todo = todo[len(baseline):]
        print(f"\n{len(todo)} mutants, {len(todo) - len(survivors)} killed, {len(survivors)} survived "
              f"({time.perf_counter() - start:.0f} s)")
        for mutant, outcome in survivors:
            print(f"  {outcome}: {TARGETS[mutant.target][0]}:{mutant.line} {mutant.function}: {mutant.description}")
        return 1 if survivors else 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
