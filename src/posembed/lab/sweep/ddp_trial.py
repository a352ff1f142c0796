"""One trial of a preset, data-parallel under ``torchrun``, its result written as JSON.

::

    torchrun --nproc_per_node 2 --master_addr 127.0.0.1 --master_port 29511 \\
        -m posembed.lab.sweep.ddp_trial --preset smoke --task copy --scheme learned --out result.json

Rank 0 writes the trial's result (the same fields a single process stores). Without
``torchrun`` the module runs the trial in one process. The process-group helpers are in
:mod:`posembed.lab.training.ddp`; this entry point sits above the presets, which it reads.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from posembed._utils.io import atomic_write_json
from posembed.lab.config import VARIANTS, apply_overrides
from posembed.lab.presets import get_preset
from posembed.lab.training.ddp import init_distributed, rank_and_world, shutdown
from posembed.lab.training.train import TrialResult, train_trial

__all__ = ["main", "build_parser", "result_dict"]


def result_dict(result: TrialResult) -> dict:
    """A JSON-able view of a trial result."""
    return {
        "trial_id": result.trial_id,
        "config": result.config.to_dict(),
        "evals": [dataclasses.asdict(point) for point in result.evals],
        "curve": [list(point) for point in result.curve],
        "drift": result.drift,
        "final_loss": result.final_loss,
        "num_params": result.num_params,
        "seconds": result.seconds,
        "seconds_per_step": result.seconds_per_step,
        "world_size": result.world_size,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m posembed.lab.sweep.ddp_trial", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--task", required=True)
    parser.add_argument("--scheme", required=True)
    parser.add_argument("--variant", default="base", choices=tuple(VARIANTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path, required=True, help="JSON file rank 0 writes")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    experiment = apply_overrides(get_preset(args.preset), args.overrides)
    base = experiment.base(args.task)
    cfg = dataclasses.replace(base, scheme=args.scheme, variant=args.variant, seed=args.seed, **VARIANTS[args.variant])
    init_distributed()
    try:
        result, _ = train_trial(cfg)
        if rank_and_world()[0] == 0:
            atomic_write_json(args.out, result_dict(result))
    finally:
        shutdown()
    return 0


if __name__ == "__main__":  # pragma: no cover
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        sys.exit(main())
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"posembed.lab.sweep.ddp_trial: error: {error}", file=sys.stderr)
        sys.exit(2)
