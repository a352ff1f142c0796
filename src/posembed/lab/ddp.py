"""Data-parallel training under ``torchrun`` (DDP, gloo on CPU): the process-group helpers
the runner and the trainer use, and a one-trial entry point.

A whole sweep runs data-parallel with ``torchrun --nproc_per_node 2 -m posembed.cli lab run ...``
(see :func:`posembed.lab.runner.run_experiment`). One trial alone, its result as JSON::

    torchrun --nproc_per_node 2 --master_addr 127.0.0.1 --master_port 29511 \\
        -m posembed.lab.ddp --preset smoke --task copy --scheme learned --out result.json

Every rank builds the same model (same seed), draws its own ``batch / world`` rows per step
and DDP averages the gradients, so the global batch is the config's ``batch``. Rank 0 writes
the trial's result as JSON (the same fields a single process stores). Without ``torchrun``
the module runs the trial in one process.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from posembed._io import atomic_write_json
from posembed.lab.config import VARIANTS

if TYPE_CHECKING:
    from posembed.lab.train import TrialResult

__all__ = ["main", "result_dict", "init_distributed", "shutdown", "rank_and_world", "barrier", "broadcast", "mean_across_ranks"]

logger = logging.getLogger(__name__)


def init_distributed() -> bool:
    """Join the process group ``torchrun`` describes (gloo); ``False`` when not under torchrun."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="gloo")
    return True


def shutdown() -> None:
    """Leave the process group (if one was joined)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def rank_and_world() -> tuple[int, int]:
    """``(rank, world size)`` of this process; ``(0, 1)`` without a process group."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def barrier() -> None:
    """Wait for every rank (no-op in one process)."""
    if rank_and_world()[1] > 1:
        torch.distributed.barrier()


def broadcast(value: Any) -> Any:
    """Rank 0's ``value`` (any picklable object) on every rank; ``value`` itself in one process."""
    if rank_and_world()[1] == 1:
        return value
    box = [value]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def mean_across_ranks(value: float) -> float:
    """The mean of ``value`` over all ranks."""
    world = rank_and_world()[1]
    if world == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.float64)
    torch.distributed.all_reduce(tensor)
    return float(tensor) / world


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
    parser = argparse.ArgumentParser(prog="python -m posembed.lab.ddp", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--task", required=True)
    parser.add_argument("--scheme", required=True)
    parser.add_argument("--variant", default="base", choices=tuple(VARIANTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path, required=True, help="JSON file rank 0 writes")
    return parser


def main(argv: list[str] | None = None) -> int:
    from posembed.lab.config import apply_overrides
    from posembed.lab.presets import get_preset
    from posembed.lab.train import train_trial

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
        print(f"posembed.lab.ddp: error: {error}", file=sys.stderr)
        sys.exit(2)
