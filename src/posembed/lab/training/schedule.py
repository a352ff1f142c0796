"""The lab's one learning-rate schedule: linear warmup, then cosine decay (nanoGPT's).

The lab's one training loop (:func:`posembed.lab.training.train.train_model`) steps by it, for trials
(:func:`posembed.lab.training.train.lr_at`: to ``min_lr``) and the context study (to ``lr / 10``).
"""

from __future__ import annotations

import math

__all__ = ["warmup_cosine"]


def warmup_cosine(step: int, *, lr: float, min_lr: float, warmup: int, steps: int) -> float:
    """Linear warmup to ``lr`` over ``warmup`` steps, then cosine decay to ``min_lr`` at ``steps``
    (and ``min_lr`` after).

    >>> [round(warmup_cosine(s, lr=1e-3, min_lr=1e-4, warmup=10, steps=100), 7) for s in (0, 10, 55, 100, 150)]
    [9.09e-05, 0.001, 0.00055, 0.0001, 0.0001]
    """
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step >= steps:
        return min_lr
    progress = (step - warmup) / max(1, steps - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)
