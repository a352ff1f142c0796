"""Data-parallel training under ``torchrun`` (DDP, gloo on CPU): the process-group helpers the
runner and the trainer use.

A whole sweep runs data-parallel with ``torchrun --nproc_per_node 2 -m posembed.cli lab run ...``
(see :func:`posembed.lab.sweep.runner.run_experiment`); one trial alone with
``torchrun ... -m posembed.lab.sweep.ddp_trial`` (:mod:`posembed.lab.sweep.ddp_trial`). Every rank builds
the same model (same seed), draws its own ``batch / world`` rows per step and DDP averages the
gradients, so the global batch is the config's ``batch``. Without a process group every helper
acts as for one process.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch

__all__ = ["init_distributed", "shutdown", "rank_and_world", "barrier", "broadcast", "mean_across_ranks"]

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
