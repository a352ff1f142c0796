"""What a trial costs: a rough estimate of the seconds it trains for, from its size alone.

Read by the sweep's worker plan (:func:`posembed.lab.sweep.worker_plan.plan_workers`: how many
trials side by side) and by the trainer (:func:`posembed.lab.training.train.compile_training`: whether a
cold compile repays itself). The constants are estimates measured on a 2-core CPU and read off
the H200 figures of issue 28 (see :mod:`posembed.lab.sweep.worker_plan`).
"""

from __future__ import annotations

import torch

from posembed.lab.config import TrialConfig
from posembed.lab.tasks.algorithmic import AlgorithmicTask
from posembed.lab.tasks.make import task_class

__all__ = ["trial_seconds", "sequence_length", "STEP_SECONDS_PER_LAYER", "FLOPS_PER_SECOND"]

#: seconds of one training step per layer (the blocks, plus two for the embedding and the head)
#: of a small model, on one CPU thread or one GPU process: dispatch and launches, not arithmetic
STEP_SECONDS_PER_LAYER = 3e-3
#: multiply-adds a second (one CPU thread; one GPU) the matmuls of a larger model run at
FLOPS_PER_SECOND = {"cpu": 5e10, "cuda": 1e13}


def sequence_length(cfg: TrialConfig) -> int:
    """The longest training input: an algorithmic task's own ``input_length`` of its context
    (without building the task), the context itself for the others."""
    task = task_class(cfg.task)
    return task.input_length(cfg.context) if issubclass(task, AlgorithmicTask) else cfg.context


def trial_seconds(cfg: TrialConfig, device: str | torch.device = "cpu") -> float:
    """A rough estimate of the seconds ``cfg`` trains for on one thread (one process on a GPU).

    >>> round(trial_seconds(TrialConfig(task="copy", dim=32, depth=1, steps=50, context=6, batch=16)), 2)
    0.47
    """
    tokens = cfg.batch * sequence_length(cfg)
    flops = 6 * 12 * cfg.depth * cfg.dim**2 * tokens  # forward and backward of the blocks' matmuls
    per_step = (cfg.depth + 2) * STEP_SECONDS_PER_LAYER + flops / FLOPS_PER_SECOND[torch.device(device).type]
    return cfg.steps * per_step
