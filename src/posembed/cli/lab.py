"""``posembed lab``: run a sweep of small transformers and report it.

::

    posembed lab run --preset quick [--out DIR] [--set key=value ...] [--no-checkpoints] [--threads N]
                     [--workers N] [--ray auto|HOST:PORT] [--quiet]
    posembed lab list DIR [--task T] [--scheme S] [--json]
    posembed lab report DIR
    torchrun --nproc_per_node 2 -m posembed.cli lab run --preset quick   # data-parallel

``--workers N`` trains N trials side by side in worker processes (default: as many as the sweep
gains from, :func:`posembed.lab.sweep.worker_plan.plan_workers`: one process for ``smoke``, the cores
over ``--threads`` for ``quick``; on a GPU the workers share it); each trial's numbers are those
of ``--workers 1`` (on a GPU within bf16 tolerance). Progress goes to stderr: a
bar on a terminal, one line per finished trial otherwise; ``--quiet`` turns it off.
``--ray HOST:PORT`` sends the trials to a Ray cluster as tasks (``--ray auto``: the local one,
or a fresh local instance); this process still writes the store and the checkpoints
(:mod:`posembed.lab.sweep.ray_runner`; ``pip install 'posembed[ray]'``).

A run holds its out folder for its whole length: a second run on the same folder exits 2
naming the first one's pid. A file that cannot be written (a full disk, a read-only folder)
also ends in one line naming it and exit 2; the trials stored before stay.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
from pathlib import Path

from posembed._utils.times import quote
from posembed.cli import UserError
from posembed.cli.lab_context import register_actions, run_context_command, run_extend_command

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("lab", help="train small transformers side by side; report the sweep")
    actions = parser.add_subparsers(dest="lab_command", metavar="ACTION")
    run_parser = actions.add_parser(
        "run",
        help="run (or resume) an experiment preset",
        epilog=_presets_help,
        formatter_class=_LazyEpilog,
        description=DECISIONS,
    )
    run_parser.add_argument("--preset", required=True, help="experiment name (the presets are listed below)")
    run_parser.add_argument("--out", type=Path, default=None, help="output folder (default: lab-<preset>)")
    run_parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set steps=50 --set schemes=learned,alibi --set charlm.context=32",
    )
    run_parser.add_argument("--no-checkpoints", action="store_true", help="do not save per-trial checkpoints")
    run_parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads per process (default: 1, the fastest for the lab's small "
        "models: a quick trial ran ~6x slower with torch's default on 2 busy cores)",
    )
    run_parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="trials trained at once, each in its own process, on a GPU sharing it (default: "
        "as many as the sweep gains from, up to the cores over --threads: 1 for a small "
        "sweep such as smoke; 1 trains in this process; always 1 under torchrun)",
    )
    run_parser.add_argument(
        "--device",
        default="auto",
        help="auto (CUDA when present, else CPU; the default), cpu, cuda or cuda:N (on a GPU: "
        "bf16 autocast, FlexAttention for bias schemes, --workers processes sharing it)",
    )
    run_parser.add_argument(
        "--ray",
        default=None,
        metavar="auto|HOST:PORT",
        help="train the trials as Ray tasks: 'auto' joins the local cluster or starts one, "
        "HOST:PORT joins a running cluster (`ray start --head` prints it); this process "
        "writes the results; --workers then caps the trials in flight (default: all)",
    )
    run_parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress (default: a bar on a terminal, else one line per finished trial on stderr)",
    )
    run_parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None, help=argparse.SUPPRESS
    )  # kept for old scripts: progress is on by default now
    list_parser = actions.add_parser("list", help="list the trials of an out folder: task, scheme, metrics, checkpoint")
    list_parser.add_argument("out_dir", type=Path, help="folder a `posembed lab run` wrote")
    list_parser.add_argument("--task", action="append", default=None, help="only this task (repeatable)")
    list_parser.add_argument("--scheme", action="append", default=None, help="only this scheme (repeatable)")
    list_parser.add_argument("--json", action="store_true", help="JSON (one object per trial) instead of a table")
    report_parser = actions.add_parser("report", help="write the markdown and HTML report of an out folder")
    report_parser.add_argument("out_dir", type=Path, help="folder a `posembed lab run` wrote")
    register_actions(actions)
    parser.set_defaults(func=run, lab_parser=parser)


#: what each preset can decide (issues 33 and 40): the report's verdict words are tests with the seed as the
#: unit, Holm over the preset's primary comparisons at every training point and the paper checks at 5 %
DECISIONS = """\
What each preset can decide (posembed lab report: seed-paired t, Holm at a family-wise 5 % over every
question at every training point, 'alike' only within a stated margin; the rest is exploratory):
  quick  a preview: the char-LM questions (learned vs sinusoidal; add vs concat and once vs every layer,
         each for learned and sinusoidal, with their interactions and the scaled-sinusoid amplitude
         control; ALiBi vs NoPE on matched text) on a 2-layer, width-64 model after 300 steps (about
         2.3 nats), on the 7 seeds that explored them. Its verdicts are about that small model.
  full   the study that decides the same questions (results/lab/full/PREREGISTRATION.md): nanoGPT's
         CPU-sized model reaching about 1.8 nats, on 8 fresh seeds (1000-1007), each trial judged at
         10, 30 and 100 % of its training. A report before all 8 seeds are stored is interim.
  survey every task with every 1-D scheme on 3 seeds: exploratory numbers across the lab's range.
  smoke  1 seed: decides nothing (a pipeline test)."""

#: measured wall time of each preset with the defaults (posembed._utils.times, which README quotes)
PRESET_TIMES = {
    "smoke": quote("smoke"),
    "quick": quote("quick") + " (with its report; README)",
    "full": quote("full"),
    "survey": "not timed: days on a CPU; use --ray or a GPU",
    "calibration": quote("calibration"),
    "lengthgen": quote("lengthgen"),
}


class _LazyEpilog(argparse.RawDescriptionHelpFormatter):
    """Builds a callable epilog only when help is shown (listing the presets expands every sweep)."""

    def add_text(self, text):
        super().add_text(text() if callable(text) else text)


def _presets_help() -> str:
    """Every preset with its size (from the preset objects) and its measured time."""
    from posembed.lab.presets import PRESETS
    from posembed.lab.sweep.runner import expand

    lines = ["presets (trials, steps per trial; measured wall time):"]
    for name, build in PRESETS.items():
        trials = expand(build())
        steps = "/".join(str(n) for n in sorted({trial.steps for trial in trials}))
        lines.append(
            f"  {name:<12} {len(trials)} trial{'s' if len(trials) != 1 else ''}, {steps} steps; "
            f"{PRESET_TIMES.get(name, 'not timed')}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.lab_command == "run":
        return _run(args)
    if args.lab_command == "report":
        return _report(args)
    if args.lab_command == "list":
        return _list(args)
    if args.lab_command == "context":
        return run_context_command(args)
    if args.lab_command == "extend":
        return run_extend_command(args)
    args.lab_parser.print_help()
    return 2


def _run(args: argparse.Namespace) -> int:
    from posembed.errors import WorkerError
    from posembed.lab.config import apply_overrides
    from posembed.lab.presets import get_preset
    from posembed.lab.sweep.progress import LAB_LOGGER, log_to_stderr
    from posembed.lab.sweep.runner import run_experiment
    from posembed.lab.training.ddp import init_distributed, rank_and_world, shutdown

    experiment = apply_overrides(get_preset(args.preset), args.overrides)
    if args.threads < 1:
        raise UserError(f"--threads must be at least 1, got {args.threads}")
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    if args.ray is not None:
        _check_ray(args.ray)
    quiet = args.quiet or args.progress is False
    out = args.out or Path(f"lab-{experiment.name}")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {str(out)!r} exists and is not a folder")
    import torch

    torch.set_num_threads(args.threads)
    distributed = init_distributed()  # under torchrun: every trial trains data-parallel, rank 0 writes
    try:
        rank, world = rank_and_world()
        with _write_errors(), log_to_stderr(LAB_LOGGER, enabled=not quiet and rank == 0):
            summary = run_experiment(
                experiment,
                out,
                checkpoints=not args.no_checkpoints,
                progress=not quiet,
                workers=1 if world > 1 else args.workers,
                threads=args.threads,
                ray=args.ray,
                device=args.device,
            )
    except WorkerError as error:
        raise UserError(str(error)) from None
    finally:
        if distributed:
            shutdown()
    if rank == 0:
        print(
            f"{experiment.name}: {summary.trained} trials trained, {summary.skipped} already stored"
            f"{f' ({world} processes)' if world > 1 else ''}, results in {out / 'results.sqlite'}; "
            f"list with: posembed lab list {out}; report with: posembed lab report {out}"
        )
    return 0


def _check_ray(address: str) -> None:
    """Ray installed, and not under torchrun (checked before anything starts)."""
    import os

    from posembed.lab.sweep.ray_runner import require_ray

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UserError(
            "--ray does not run under torchrun: a torchrun sweep trains each trial data-parallel "
            "on its ranks; run `posembed lab run --ray ...` as one plain process instead"
        )
    if not address:
        raise UserError("--ray needs 'auto' or the cluster's HOST:PORT")
    try:
        require_ray()
    except ImportError as error:
        raise UserError(str(error)) from None


def _report(args: argparse.Namespace) -> int:
    try:
        module = importlib.import_module("posembed.lab.report")
    except ModuleNotFoundError as error:
        if error.name != "posembed.lab.report":
            raise
        raise UserError("the lab report is not available in this version (posembed.lab.report is missing)") from None
    from posembed.lab.store_file import check_store_file

    store = args.out_dir / "results.sqlite"
    if not store.exists():
        raise UserError(f"{str(args.out_dir)!r} holds no results.sqlite; run `posembed lab run` first")
    check_store_file(store, required=True)  # a folder or an empty file by that name: say so
    with _write_errors():
        written = module.write_report(args.out_dir)
    paths = written if isinstance(written, (tuple, list)) else [written]
    print("report written: " + ", ".join(str(path) for path in paths if path is not None))
    return 0


def _list(args: argparse.Namespace) -> int:
    from posembed.lab.sweep.listing import format_table, list_trials, to_json

    rows = list_trials(args.out_dir, tasks=args.task, schemes=args.scheme)
    print(to_json(rows) if args.json else format_table(rows))
    return 0


@contextlib.contextmanager
def _write_errors():
    """An ``OSError`` the lab layer did not word (a full disk, a read-only folder) as one line naming its file."""
    try:
        yield
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as error:
        where = f" {str(error.filename)!r}" if error.filename else ""
        raise UserError(f"cannot write{where}: {error.strerror or error}") from None
