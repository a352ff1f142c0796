"""``posembed bench``: side-by-side benchmarks against the reference implementations.

Thin over :func:`posembed.bench.run_suites`: the suites ship with the package, so this works
from an installed wheel as from a clone. ``--device`` (default ``auto``: CUDA when present)
is where they time; a device this machine lacks is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posembed._utils.devices import DEVICE_HELP
from posembed._utils.hints import extra_hint
from posembed._utils.times import quote
from posembed.bench.suites import SUITES
from posembed.cli import UserError, add_run_options

#: the time is posembed._utils.times.TIMES["bench-quick"] (measured 2026-11-26: 72 s of CPU time for the four
#: suites; 9 min 44 s of wall time at load average 20 on 2 shared cores)
QUICK_HELP = f"small shapes: {quote('bench-quick')}, longer in proportion on a busy one (a full run: about 12 minutes)"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="time posembed against transformers, x-transformers and rotary-embedding-torch",
        description="Run the benchmarks side by side in one process and write results.json + results.md. "
        f"A comparison library that is not installed is a skipped row ({extra_hint('bench', explain=False)}).",
    )
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    parser.add_argument(
        "--only",
        action="append",
        choices=SUITES,
        metavar="NAME",
        help=f"run only this suite (repeatable): {', '.join(SUITES)}",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="output folder (default: ./bench-results)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds per case (default per suite)")
    add_run_options(
        parser,
        f"{DEVICE_HELP}; the report records it; the CPU-tuned fast paths and the targets apply on the CPU only",
        "suite",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be >= 1, got {args.threads}")
    if args.repeats is not None and args.repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {args.repeats}")
    from posembed._utils.devices import resolve_device

    device = resolve_device(args.device)  # a DeviceError (exit 2) before any suite starts
    from posembed.bench import PROGRESS_LOGGER, run_suites
    from posembed.lab.sweep.progress import log_to_stderr

    with log_to_stderr(PROGRESS_LOGGER, enabled=not args.quiet):
        result = run_suites(
            quick=args.quick,
            only=args.only,
            out=args.out,
            threads=args.threads,
            repeats=args.repeats,
            progress=not args.quiet,
            device=device,
        )
    print(result["markdown"].read_text())
    print(f"wrote {result['json']} and {result['markdown']}")
    import os

    from posembed.bench.harness import missed_explanations

    machine = json.loads(result["json"].read_text())["machine"]
    for line in missed_explanations(result["targets"], machine, [round(x, 2) for x in os.getloadavg()]):
        print(line)
    return 0
