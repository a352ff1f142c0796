"""The lab's targets on one GPU (issue 28), in one command, written for BENCHMARKS.md.

Three measurements, on ``--device`` (default ``cuda``):

- ``quick``: the wall time of ``posembed lab run --preset quick`` (a fresh process, no
  checkpoints, the default ``--workers``: on a GPU, worker processes sharing it), against the
  2-core CPU figure (182.9 s with 2 workers, README; or ``--cpu-quick-seconds``). Target: at most
  one fifth of it. Its note says where the time went (:func:`timeline`, from the stored trials, whose ends
  are kept to the second): before the first trial, the trials and how many ran at once, what each
  scheme's first trial paid beyond its others (compiles), and after the last (the first GPU lease took
  77.5 s and could not say why).
- ``context-smoke``: the wall time of ``posembed lab context --preset context-smoke``. Target:
  under 15 s.
- ``calibration``: the milliseconds per iteration of the nanoGPT CPU recipe
  (:func:`posembed.lab.calibration.run_calibration`). Target: at most 11 ms (what one H200 took
  before this work).

Each command runs ``--repeats`` times (default 1: the quick preset is its own long
measurement); the medians are reported. The result is printed as a markdown section (the card's
name, torch, CUDA, the date) ready to paste into BENCHMARKS.md, and with ``--json`` also written
as JSON. ``--set KEY=VALUE`` passes overrides to the quick run (a shorter look; the target then
says "reduced").

::

    python benchmarks/bench_lab_gpu.py                        # on the GPU: every target
    python benchmarks/bench_lab_gpu.py --json gpu-lab.json --markdown gpu-lab.md
    python benchmarks/bench_lab_gpu.py --device cpu --set steps=2 --skip-context --calibration-steps 2   # a dry run
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

#: the 2-core CPU's time for the whole quick preset with 2 workers (README, measured idle)
CPU_QUICK_SECONDS = 182.9
#: issue 28's targets: quick at most this fraction of the CPU time, context-smoke under this many
#: seconds, calibration at most this many milliseconds per iteration
QUICK_FRACTION = 0.2
CONTEXT_SMOKE_SECONDS = 15.0
CALIBRATION_MS = 11.0


@dataclass
class Target:
    """One measured target."""

    work: str
    measured: float
    unit: str
    limit: float
    baseline: str
    note: str = ""

    @property
    def met(self) -> bool:
        return self.measured <= self.limit


def _wall(argv: list[str], repeats: int, timelines: list | None = None) -> list[float]:
    """Seconds of each of ``repeats`` fresh runs of ``posembed ARGV --out <fresh folder>``; with ``timelines``
    (a lab sweep), each run's :func:`timeline` is appended to it."""
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="posembed-gpu-bench-") as folder:
            start, clock = time.perf_counter(), time.time()
            done = subprocess.run(
                [sys.executable, "-m", "posembed.cli", *argv, "--out", str(Path(folder) / "out")],
                capture_output=True,
                text=True,
            )
            times.append(time.perf_counter() - start)
            if done.returncode == 0 and timelines is not None:
                timelines.append(timeline(Path(folder) / "out", clock, clock + times[-1]))
        if done.returncode != 0:
            raise RuntimeError(f"posembed {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return times


def timeline(out: Path, started: float, ended: float) -> dict[str, float]:
    """Where a sweep's wall time went, from its stored trials (each one's end, to the second, and its seconds):

    - ``startup``: the process's start to the first trial's start (imports, workers spawned);
    - ``trials``: the first trial's start to the last one's end; ``parallel``: the trials' seconds over that span
      (how many trained at once, on average);
    - ``tail``: the last trial's end to the process's end (the report, the workers' shutdown);
    - ``first_of_kind``: over each scheme, its first trial's seconds less the median of its others (what a kind's
      first trial pays once: compiles, caches), summed.
    """
    from posembed.lab.sweep.store import load_results

    trials = load_results(out).trials
    ends = [datetime.datetime.fromisoformat(t.finished_at).timestamp() for t in trials]
    starts = [end - t.seconds for end, t in zip(ends, trials)]
    span = max(ends) - min(starts)
    by_kind: dict[str, list[float]] = {}
    for _end, t in sorted(zip(ends, trials), key=lambda pair: pair[0]):
        by_kind.setdefault(t.config.scheme, []).append(t.seconds)
    first = sum(max(0.0, s[0] - statistics.median(s[1:])) for s in by_kind.values() if len(s) > 1)
    return {
        "wall": ended - started,
        "startup": max(0.0, min(starts) - started),
        "trials": span,
        "parallel": sum(t.seconds for t in trials) / span if span > 0 else float("nan"),
        "tail": max(0.0, ended - max(ends)),
        "first_of_kind": first,
        "count": len(trials),
    }


def quick_target(device: str, repeats: int, overrides: list[str], cpu_seconds: float) -> Target:
    argv = ["lab", "run", "--preset", "quick", "--device", device, "--no-checkpoints", "--quiet"]
    for override in overrides:
        argv += ["--set", override]
    timelines: list[dict[str, float]] = []
    seconds = statistics.median(_wall(argv, repeats, timelines))
    notes = [f"reduced: {', '.join(overrides)}"] if overrides else []
    spent = timelines[len(timelines) // 2]  # the middle run's (one run: its own)
    notes.append(
        f"where it went: {spent['startup']:.1f} s to the first trial, {spent['count']:.0f} trials over "
        f"{spent['trials']:.1f} s ({spent['parallel']:.1f} at once on average; each kind's first trial "
        f"{spent['first_of_kind']:.1f} s more than its others, summed), {spent['tail']:.1f} s after the last"
    )
    return Target(
        "`lab run --preset quick`",
        seconds,
        "s",
        QUICK_FRACTION * cpu_seconds,
        f"{cpu_seconds:.1f} s on 2 CPU cores (2 workers)",
        "; ".join(notes),
    )


def context_target(device: str, repeats: int) -> Target:
    argv = ["lab", "context", "--preset", "context-smoke", "--device", device]
    seconds = statistics.median(_wall(argv, repeats))
    return Target("`lab context --preset context-smoke`", seconds, "s", CONTEXT_SMOKE_SECONDS, "22-23 s on the CPU")


def calibration_target(device: str, steps: int | None) -> Target:
    from posembed.lab.calibration import NANOGPT_CPU, run_calibration

    result = run_calibration(steps=steps, device=device)
    note = f"{result.steps} iterations, val loss {result.val_loss:.4f}"
    return Target(
        "calibration (nanoGPT CPU recipe)",
        1000 * result.seconds_per_iteration,
        "ms/iteration",
        CALIBRATION_MS,
        f"55-58 ms on the CPU; {NANOGPT_CPU.steps} iterations in full",
        note,
    )


def describe_device(device: str) -> str:
    """``cuda:0 (NVIDIA H200, CUDA 13.0, torch 2.11)`` or ``cpu (torch ...)``."""
    import torch

    from posembed._utils.devices import resolve_device

    target = resolve_device(device)
    if target.type == "cuda":
        index = target.index if target.index is not None else torch.cuda.current_device()
        return (
            f"cuda:{index} ({torch.cuda.get_device_name(index)}, CUDA {torch.version.cuda}, torch {torch.__version__})"
        )
    return f"cpu (torch {torch.__version__})"


def markdown(targets: list[Target], device: str, when: str) -> str:
    """The section for BENCHMARKS.md: one row per target."""
    lines = [
        "### The lab on one GPU (`python benchmarks/bench_lab_gpu.py`)",
        "",
        f"Measured {when} on {device}; whole-process wall times, medians.",
        "",
        "| work | measured | target | baseline | met | note |",
        "|---|---|---|---|---|---|",
    ]
    for target in targets:
        lines.append(
            f"| {target.work} | {target.measured:.1f} {target.unit} | <= {target.limit:.1f} {target.unit} | "
            f"{target.baseline} | {'yes' if target.met else 'no'} | {target.note} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="where the lab trains (default cuda)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each command (median; default 1)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="overrides for the quick run (a reduced look)",
    )
    parser.add_argument(
        "--cpu-quick-seconds",
        type=float,
        default=CPU_QUICK_SECONDS,
        help=f"the CPU's quick time to compare with (default {CPU_QUICK_SECONDS}, README)",
    )
    parser.add_argument("--calibration-steps", type=int, default=None, help="fewer calibration iterations")
    parser.add_argument("--skip-quick", action="store_true")
    parser.add_argument("--skip-context", action="store_true")
    parser.add_argument("--skip-calibration", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the section here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    device = describe_device(args.device)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    targets = []
    if not args.skip_quick:
        targets.append(quick_target(args.device, args.repeats, args.overrides, args.cpu_quick_seconds))
    if not args.skip_context:
        targets.append(context_target(args.device, args.repeats))
    if not args.skip_calibration:
        targets.append(calibration_target(args.device, args.calibration_steps))
    section = markdown(targets, device, when)
    print(section)
    if args.markdown:
        args.markdown.write_text(section, encoding="utf-8")
    if args.json:
        rows = [{**asdict(target), "met": target.met} for target in targets]
        args.json.write_text(json.dumps({"device": device, "when": when, "targets": rows}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
