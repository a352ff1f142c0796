"""What every lab task shares: batches, evaluated points, the task protocol, the loss.

The task modules import from here; :mod:`posembed.lab.tasks` re-exports these names and
builds a config's task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from posembed.lab.config import TrialConfig

__all__ = ["Batch", "EvalPoint", "Task", "TABLE_LIMIT", "IGNORE", "loss_fn", "eval_lengths"]

#: target value ignored by the loss (prompt and padding positions)
IGNORE = -100
#: note recorded for a length beyond the model's position table
TABLE_LIMIT = "n/a (table limit)"


@dataclass
class Batch:
    """Inputs and targets of one step.

    Shape:
        - input_ids: ``(B, T)``.
        - targets: ``(B, T)`` next tokens (``IGNORE`` where not scored) for decoders,
          ``(B,)`` class labels for the encoder.
    """

    input_ids: Tensor
    targets: Tensor


@dataclass(frozen=True)
class EvalPoint:
    """One evaluated number: ``metric`` at sequence ``length`` (``value`` None with a ``note``).

    ``step`` is the training step after which it was measured (``None``: at the end of training,
    as every point of a store written before intermediate evaluations was).
    """

    metric: str
    length: int
    value: float | None
    note: str = ""
    step: int | None = None


class Task(Protocol):
    name: str
    vocab_size: int
    num_classes: int | None

    def max_length(self) -> int:
        """Longest input any training or evaluation batch has (the table size needed)."""

    def train_batch(self, generator: torch.Generator, batch_size: int) -> Batch: ...

    def evaluate(self, model: nn.Module, generator: torch.Generator, limit: int | None) -> list[EvalPoint]: ...


def loss_fn(logits: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy over every scored target (``IGNORE`` skipped)."""
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=IGNORE
    )


def eval_lengths(cfg: TrialConfig) -> list[int]:
    """The lengths ``round(context * scale)`` evaluated, ascending, without duplicates.

    >>> eval_lengths(TrialConfig(task="copy", context=8, eval_scales=(0.5, 1.0, 2.0, 2.0)))
    [4, 8, 16]
    """
    return sorted({max(1, round(cfg.context * scale)) for scale in cfg.eval_scales})
