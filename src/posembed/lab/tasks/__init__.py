"""Lab tasks: what a trial trains on and how it is scored.

Every task produces :class:`Batch` es and scores a model with :meth:`Task.evaluate`, which
returns :class:`EvalPoint` s (one per metric and evaluated length). A length the model's
position table cannot reach is recorded as ``value=None, note="n/a (table limit)"``.

=========== ======= ==================================================== ===========
task        model   what                                                 metric
=========== ======= ==================================================== ===========
order       encoder is token A before token B? (bag of words at chance)  accuracy
copy        decoder ``x = y`` -> ``x``                                     exact_match
reverse     decoder ``x = y`` -> reversed ``x``                            exact_match
sort        decoder ``x = y`` -> sorted ``x``                              exact_match
addition    decoder ``a + b =`` -> ``a + b`` (digits least significant     exact_match
                    first)
charlm      decoder next character of a text file                       val_loss,
                                                                         perplexity
=========== ======= ==================================================== ===========
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from posembed.lab.config import TrialConfig

__all__ = ["Batch", "EvalPoint", "Task", "make_task", "TABLE_LIMIT", "IGNORE"]

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
    """One evaluated number: ``metric`` at sequence ``length`` (``value`` None with a ``note``)."""

    metric: str
    length: int
    value: float | None
    note: str = ""


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
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=IGNORE)


def eval_lengths(cfg: TrialConfig) -> list[int]:
    """The lengths ``round(context * scale)`` evaluated, ascending, without duplicates.

    >>> eval_lengths(TrialConfig(task="copy", context=8, eval_scales=(0.5, 1.0, 2.0, 2.0)))
    [4, 8, 16]
    """
    return sorted({max(1, round(cfg.context * scale)) for scale in cfg.eval_scales})


def make_task(cfg: TrialConfig) -> Task:
    """The task object of ``cfg.task``."""
    if cfg.task == "order":
        from posembed.lab.tasks.order import OrderTask

        return OrderTask(cfg)
    if cfg.task == "charlm":
        from posembed.lab.tasks.charlm import CharLMTask

        return CharLMTask(cfg)
    from posembed.lab.tasks.algorithmic import AlgorithmicTask

    return AlgorithmicTask(cfg)
