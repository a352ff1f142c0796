"""How many trials a sweep trains at once by default: :func:`plan_workers`, from the work and the device.

A worker process costs its start (spawn, import torch and posembed, the first trial's warm-up:
:data:`CPU_START_SECONDS`, more on CUDA where it also opens a context) and saves at most the
sweep's time times ``1 - 1/workers``. So the plan estimates each trial's seconds from its size
(:func:`~posembed.lab.training.trial_cost.trial_seconds`: steps, layers, tokens), and takes the
count of workers whose estimated wall time,
``start + 0.25 s * workers + max(total / workers, longest trial)``, is the least, and more than
one worker only when that saves at least a fifth of the one-process time. A small sweep (the
``smoke`` preset: 15 trials of 50 steps, 1 layer of 32) trains in this process; a larger one
(``quick``: 96 trials of 300 steps, 2 layers of 64) fills the device.

Where the trials go (:func:`device_slots`):

- CPU: one worker per ``threads`` cores (:func:`available_cores`).
- CUDA: worker processes share the GPU. The lab's models are so small that a step's time is
  the host's (Python and kernel launches: a 2-layer, 64-wide step takes about 6 ms on an H200
  that runs a 768-wide GPT-2 step in 30 ms), so N processes, each with its own interpreter
  and launch queue, keep the GPU busy N times as often; CUDA streams in one process would
  still launch every kernel from one Python thread under one GIL and gain little. A worker
  needs a host core and about :data:`GPU_WORKER_BYTES` of GPU memory (its CUDA context and
  the caching allocator's pool), so the slots are the fewest of the cores over ``threads``,
  the free memory over that, and :data:`MAX_GPU_WORKERS`.

The constants are estimates measured on a 2-core CPU (smoke: about 9 ms a step at 1 layer,
quick: about 12 ms at 2; a worker's start about 6 s there) and read off the H200 figures of
issue 28; a plan that is off by a factor of two still picks one process for ``smoke`` and
several for ``quick``. The plan never changes a trial's numbers: each trial is seeded from its
own config, whichever process trains it.

>>> from posembed.lab.config import TrialConfig
>>> small = [TrialConfig(task="copy", dim=32, depth=1, steps=50, context=6, seed=s) for s in range(15)]
>>> plan_workers(small, "cpu", cores=16)
1
>>> big = [TrialConfig(task="copy", dim=64, depth=2, steps=300, context=8, seed=s) for s in range(96)]
>>> plan_workers(big, "cpu", cores=2), plan_workers(big, "cpu", cores=16), plan_workers(big, "cpu", cores=16, threads=4)
(2, 16, 4)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import torch

from posembed.lab.config import TrialConfig
from posembed.lab.training.trial_cost import trial_seconds

__all__ = [
    "plan_workers",
    "available_cores",
    "trial_seconds",
    "device_slots",
    "start_seconds",
    "CPU_START_SECONDS",
    "GPU_START_SECONDS",
    "START_SECONDS_PER_WORKER",
    "GPU_WORKER_BYTES",
    "MAX_GPU_WORKERS",
    "MIN_SAVING",
]

logger = logging.getLogger(__name__)

#: seconds a worker process costs before its first trial trains: spawn, imports, warm-up
CPU_START_SECONDS = 6.0
#: the same on CUDA (plus the CUDA context and the first kernels)
GPU_START_SECONDS = 12.0
#: seconds each worker adds to the start of all of them (they import side by side: disk, memory)
START_SECONDS_PER_WORKER = 0.25
#: GPU memory one worker process holds for a small trial: its CUDA context and allocator pool
GPU_WORKER_BYTES = 1 << 30
#: at most this many worker processes share one GPU (beyond, they only queue for it)
MAX_GPU_WORKERS = 8
#: several workers only when the estimate saves at least this fraction of the one-process time
MIN_SAVING = 0.2


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def gpu_free_bytes(device: torch.device) -> int:
    """Free memory on the GPU ``device`` (``torch.cuda.mem_get_info``)."""
    return int(torch.cuda.mem_get_info(device)[0])


def device_slots(device: str | torch.device, *, cores: int, threads: int = 1) -> int:
    """How many trials ``device`` trains at once: the cores over ``threads`` on the CPU; on CUDA
    also at most the free memory over :data:`GPU_WORKER_BYTES` and :data:`MAX_GPU_WORKERS`."""
    slots = max(1, cores // max(1, threads))
    device = torch.device(device)
    if device.type != "cuda":
        return slots
    return max(1, min(slots, MAX_GPU_WORKERS, gpu_free_bytes(device) // GPU_WORKER_BYTES))


def start_seconds(device: str | torch.device) -> float:
    """What one more worker process costs before it trains (:data:`CPU_START_SECONDS`, :data:`GPU_START_SECONDS`)."""
    return GPU_START_SECONDS if torch.device(device).type == "cuda" else CPU_START_SECONDS


def plan_workers(
    todo: Sequence[TrialConfig], device: str | torch.device = "cpu", *, cores: int | None = None, threads: int = 1
) -> int:
    """The default worker count for the trials ``todo`` on ``device`` (see the module docstring).

    Args:
        todo: the trials still to train.
        device: where they train (a resolved device: ``cpu``, ``cuda``, ``cuda:N``).
        cores: the CPU cores this sweep may use (default: :func:`available_cores`).
        threads: torch threads of each worker.
    """
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    if cores is None:
        cores = available_cores()
    slots = min(len(todo), device_slots(device, cores=cores, threads=threads))
    if slots <= 1:
        return 1
    seconds = [trial_seconds(cfg, device) / threads for cfg in todo]
    total, longest, start = sum(seconds), max(seconds), start_seconds(device)
    best, best_wall = 1, total
    for workers in range(2, slots + 1):
        wall = start + START_SECONDS_PER_WORKER * workers + max(total / workers, longest)
        if wall < best_wall:
            best, best_wall = workers, wall
    if best_wall > (1 - MIN_SAVING) * total:
        best = 1
    logger.debug(
        "plan: %d trials, about %.0f s in one process; %d worker(s), about %.0f s",
        len(todo),
        total,
        best,
        best_wall if best > 1 else total,
    )
    return best
