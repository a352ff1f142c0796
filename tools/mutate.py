"""A small mutation tester for posembed's position formulas (a dev tool; CI does not run it).

Each mutant changes one operator or constant inside one chosen function (``!=`` -> ``==``,
``<`` -> ``<=``, ``+`` -> ``-``, ``2`` -> ``3``, ``and`` -> ``or``, ...). It is written to a
temporary copy of ``src/`` (the real source files are never touched: others import them), and
the fast tests of that module run with the copy first on ``PYTHONPATH``. A mutant the tests
still pass is a *survivor*: either a test is missing or the mutant is equivalent. The targets
are tabled in ``tools/mutate_targets.py``, the mutants made in ``tools/mutants.py``; this file
runs them.

Usage::

    python tools/mutate.py                      # every target (tools/mutate_targets.py)
    python tools/mutate.py positions alibi      # some targets
    python tools/mutate.py --list positions     # print the mutants, run nothing
    python tools/mutate.py --jobs 2             # mutants in parallel

Exit status 0 when no mutant survives, 1 otherwise. A full run takes about an hour on two busy cores
with ``--jobs 1`` (measured per target: extend 20 min, extend_finetune 12, position_check 11,
extend_methods and context_evaluate 6, retrieval_report 3, retrieval 1); ``--only`` re-checks survivors.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: ``tools.*`` from the repository root

from tools.mutants import SRC, Mutant, mutants, mutated_source  # noqa: E402
from tools.mutate_targets import TARGETS  # noqa: E402


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
            for child, (_mutant, _, _, started) in list(running.items()):
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
        [sys.executable, "-c", "import posembed; print(posembed.__file__)"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
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
            print(
                f"[{done[0]}/{len(todo) - len(baseline)}] {outcome:8s} {mutant.target}:{mutant.index} "
                f"line {mutant.line} {mutant.function}: {mutant.description}",
                flush=True,
            )

        if args.no_fork or not hasattr(os, "fork"):
            with ThreadPoolExecutor(args.jobs) as pool:
                for mutant, outcome, output in pool.map(lambda m: run_one(m, workdir, args.timeout), todo):
                    report(mutant, outcome, output)
        else:
            _preload()
            run_forked(todo, workdir, args.jobs, args.timeout, report)
        todo = todo[len(baseline) :]
        print(
            f"\n{len(todo)} mutants, {len(todo) - len(survivors)} killed, {len(survivors)} survived "
            f"({time.perf_counter() - start:.0f} s)"
        )
        for mutant, outcome in survivors:
            print(f"  {outcome}: {TARGETS[mutant.target][0]}:{mutant.line} {mutant.function}: {mutant.description}")
        return 1 if survivors else 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
