"""Wall time of ``posembed lab run --workers N`` against ``--workers 1`` on the same experiment.

Runs the real command (a fresh process each time, checkpoints on, progress off) into fresh
folders, alternating the two settings ``--repeats`` times so that a change in the machine's
load hits both alike, and reports the median wall time of each, their ratio, and the load
average before and after. It also checks that both runs stored the same numbers, trial by
trial (the workers must not change results), and the CPU seconds each run used (the run and
its workers): the parallel run should spend about the same CPU, only sooner.

On a shared machine the ratio says as much about the neighbours as about the workers: with
the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) a session's
processes share one slice of the CPU, so under a load above the core count two workers cannot
get more CPU time than one. Measure when the load average is below the core count.

::

    python benchmarks/bench_workers.py                                  # quick preset, reduced (below)
    python benchmarks/bench_workers.py --full-quick                     # the whole quick preset (~7 min a run)
    python benchmarks/bench_workers.py --set seeds=0 --workers 2 --repeats 3 --json out.json
    python benchmarks/bench_workers.py --preset smoke --full-quick --workers default --repeats 3   # the default count

The default reduction of ``quick``: tasks copy and charlm, seed 0, 150 steps (24 trials).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REDUCED = ["tasks=copy,charlm", "seeds=0", "steps=150"]


def _run(out: Path, workers: str, overrides: list[str], threads: int, preset: str = "quick") -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, the run and its workers) of one run (``workers``
    ``"default"``: no ``--workers``, the count the sweep's plan picks)."""
    args = [
        sys.executable,
        "-m",
        "posembed.cli",
        "lab",
        "run",
        "--preset",
        preset,
        "--out",
        str(out),
        "--quiet",
        "--threads",
        str(threads),
    ]
    if workers != "default":
        args += ["--workers", workers]
    for item in overrides:
        args += ["--set", item]
    before, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"lab run --workers {workers} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds, _children_cpu() - before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for descendants: the run and its workers
    return usage.ru_utime + usage.ru_stime


def _numbers(out: Path) -> dict:
    from posembed.lab.sweep.store import load_results

    return {
        r.trial_id: (r.final_loss, r.curve, [(p.metric, p.length, p.value) for p in r.evals])
        for r in load_results(out).trials
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers",
        default="2",
        help="the parallel setting: a count, or 'default' (no --workers: the count the plan picks; default 2)",
    )
    parser.add_argument("--preset", default="quick", help="the preset timed (default quick)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per trial (default 1)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each setting, alternated (default 1)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help=f"overrides of the quick preset (default: {' '.join(REDUCED)})",
    )
    parser.add_argument("--full-quick", action="store_true", help="the whole quick preset, no overrides")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.workers != "default" and not (args.workers.isdigit() and int(args.workers) >= 1):
        parser.error(f"--workers must be a count of at least 1 or 'default', got {args.workers!r}")
    overrides = [] if args.full_quick else (args.overrides or REDUCED)
    times: dict[str, list[float]] = {"1": [], args.workers: []}
    cpu: dict[str, list[float]] = {"1": [], args.workers: []}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        for repeat in range(args.repeats):
            for workers in ("1", args.workers):
                out = Path(tmp) / f"w{workers}-r{repeat}"
                wall, used = _run(out, workers, overrides, args.threads, args.preset)
                times[workers].append(wall)
                cpu[workers].append(used)
                print(
                    f"--workers {workers}: {wall:.1f} s wall, {used:.1f} s CPU (load {os.getloadavg()[0]:.2f})",
                    file=sys.stderr,
                )
        same = _numbers(Path(tmp) / "w1-r0") == _numbers(Path(tmp) / f"w{args.workers}-r0")
        trials = len(_numbers(Path(tmp) / "w1-r0"))
    load_after = os.getloadavg()
    sequential, parallel = statistics.median(times["1"]), statistics.median(times[args.workers])
    report = {
        "experiment": args.preset + (f" with {' '.join(overrides)}" if overrides else ""),
        "trials": trials,
        "threads_per_trial": args.threads,
        "cores": os.cpu_count(),
        "repeats": args.repeats,
        "seconds_workers_1": times["1"],
        f"seconds_workers_{args.workers}": times[args.workers],
        "median_workers_1": sequential,
        f"median_workers_{args.workers}": parallel,
        "ratio": parallel / sequential,
        "cpu_seconds_workers_1": cpu["1"],
        f"cpu_seconds_workers_{args.workers}": cpu[args.workers],
        "same_numbers": same,
        "load_before": load_before,
        "load_after": load_after,
    }
    print(
        f"{report['experiment']}: {trials} trials; --workers 1 {sequential:.1f} s, --workers {args.workers} "
        f"{parallel:.1f} s (median of {args.repeats}): ratio {report['ratio']:.2f}; CPU "
        f"{statistics.median(cpu['1']):.0f} s vs {statistics.median(cpu[args.workers]):.0f} s; same numbers: {same}; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, {os.cpu_count()} cores"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
