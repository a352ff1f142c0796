"""Order-sensitive classification: does token A come before token B?

Each sequence holds ``T - 2`` random filler tokens plus exactly one ``A`` and one ``B``; the
label is 1 when ``A`` comes first. Both labels have the same bag of words, and swapping the two
special tokens flips the label, so a model that ignores position (mean-pooled bidirectional
encoder without positional information, or any bag-of-words model) sees identical inputs for
both classes: it is exactly at chance, 50 %. Any accuracy above chance is position at work.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from posembed.lab.config import TrialConfig
from posembed.lab.tasks.base import TABLE_LIMIT, Batch, EvalPoint, eval_lengths

__all__ = ["OrderTask", "order_batch"]


def order_batch(generator: torch.Generator, batch_size: int, length: int, vocab: int) -> Batch:
    """A batch of ``length``-token sequences; tokens ``vocab`` (A) and ``vocab + 1`` (B).

    >>> g = torch.Generator().manual_seed(0)
    >>> b = order_batch(g, 4, 6, vocab=5)
    >>> b.input_ids.shape, b.targets.shape, bool(((b.input_ids == 5).sum(1) == 1).all())
    (torch.Size([4, 6]), torch.Size([4]), True)
    """
    if length < 2:
        raise ValueError(f"the order task needs sequences of at least 2 tokens, got length={length}")
    ids = torch.randint(0, vocab, (batch_size, length), generator=generator)
    # two distinct positions per row: the first two of a random permutation
    slots = torch.rand(batch_size, length, generator=generator).argsort(dim=1)[:, :2]  # (B, 2)
    first, second = slots.min(dim=1).values, slots.max(dim=1).values
    labels = torch.randint(0, 2, (batch_size,), generator=generator)
    rows = torch.arange(batch_size)
    token_a, token_b = vocab, vocab + 1
    ids[rows, first] = torch.where(labels == 1, token_a, token_b)
    ids[rows, second] = torch.where(labels == 1, token_b, token_a)
    return Batch(ids, labels)


class OrderTask:
    """The order task for one trial config (encoder with 2 classes)."""

    num_classes = 2

    def __init__(self, cfg: TrialConfig) -> None:
        self.cfg, self.name = cfg, cfg.task  # the name is the registry's
        self.vocab_size = cfg.vocab + 2
        self.lengths = [max(2, n) for n in eval_lengths(cfg)]

    def max_length(self) -> int:
        return max([self.cfg.context, *self.lengths])

    def train_batch(self, generator: torch.Generator, batch_size: int) -> Batch:
        return order_batch(generator, batch_size, self.cfg.context, self.cfg.vocab)

    @torch.no_grad()
    def evaluate(self, model: nn.Module, generator: torch.Generator, limit: int | None) -> list[EvalPoint]:
        points = []
        for length in self.lengths:
            if limit is not None and length > limit:
                points.append(EvalPoint("accuracy", length, None, TABLE_LIMIT))
                continue
            correct = total = 0
            for _ in range(self.cfg.eval_batches):
                batch = order_batch(generator, self.cfg.batch, length, self.cfg.vocab)
                predictions: Tensor = model(batch.input_ids).argmax(dim=-1)  # (B,)
                correct += int((predictions == batch.targets).sum())
                total += batch.targets.numel()
            points.append(EvalPoint("accuracy", length, correct / total))
        return points
