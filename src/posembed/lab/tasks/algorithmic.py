"""Algorithmic length generalisation, decoder-only (Kazemnejad et al. 2023).

A sequence is ``prompt SEP answer EOS`` over symbols ``0 .. vocab-1``; the model is trained on
operand lengths ``1 .. L`` (``L = context``) and scored by exact match of the whole answer at
each test length (``L * eval_scales``, e.g. up to 2-4 L). Only answer tokens are scored.

- copy: ``x SEP x``; reverse: ``x SEP reversed(x)``; sort: ``x SEP sorted(x)``;
- addition: ``a PLUS b SEP c`` with ``a, b`` of n digits and ``c = a + b`` of n + 1 digits, every
  number written least significant digit first (so each answer digit depends on the digits and
  carry just read). ``vocab`` is forced to 10 digits for addition.

Each task is one small subclass of :class:`AlgorithmicTask` (its answer; addition also its
operands and alphabet) named by its entry in :mod:`posembed.lab.task_registry`; the module
functions :func:`make_example` and :func:`sequence_length` find the class through that entry.

Exact match is computed teacher-forced in one forward pass: all answer argmaxes right is the
same event as greedy decoding reproducing the answer (both fail first at the same token).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from posembed.lab.config import TrialConfig
from posembed.lab.task_registry import TASK_ENTRIES
from posembed.lab.tasks.base import IGNORE, TABLE_LIMIT, Batch, EvalPoint, eval_lengths
from posembed.lab.tasks.make import task_class

__all__ = [
    "AlgorithmicTask",
    "CopyTask",
    "ReverseTask",
    "SortTask",
    "AdditionTask",
    "algorithm",
    "make_example",
    "sequence_length",
]


def algorithm(task: str) -> type[AlgorithmicTask]:
    """The class of the algorithmic task ``task``, as its task registry entry names it (a subclass
    of :class:`AlgorithmicTask` in any file of :mod:`posembed.lab.tasks`).

    >>> algorithm("sort").__name__
    'SortTask'
    """
    found = task_class(task) if task in TASK_ENTRIES else None
    if not (isinstance(found, type) and issubclass(found, AlgorithmicTask)):
        raise ValueError(f"unknown algorithmic task {task!r}")
    return found


def make_example(task: str, operands: list[int], base: int) -> tuple[list[int], list[int]]:
    """``(prompt, answer)`` token lists for one example (special tokens not included).

    >>> make_example("reverse", [1, 2, 3], 10)
    ([1, 2, 3], [3, 2, 1])
    >>> make_example("addition", [9, 9, 1, 0], 10)  # 99 + 1 = 100, digits reversed
    ([9, 9, -1, 1, 0], [0, 0, 1])
    """
    return algorithm(task).example(operands, base)


def sequence_length(task: str, n: int) -> int:
    """Model input length for operand length ``n`` (the sequence minus its last token)."""
    return algorithm(task).input_length(n)


class AlgorithmicTask:
    """``prompt SEP answer EOS`` for one trial config; each task is a subclass that declares its
    answer (:meth:`example`) and, where it differs, its operands and alphabet."""

    num_classes = None
    #: operands drawn per unit of operand length n (addition: two numbers of n digits)
    operands_per_length = 1
    #: the symbol alphabet when the task fixes it (addition: 10 digits); ``None``: ``cfg.vocab``
    fixed_base: int | None = None

    @staticmethod
    def example(operands: list[int], base: int) -> tuple[list[int], list[int]]:
        """``(prompt, answer)`` for ``operands`` in ``base`` (``-1`` in a prompt stands for PLUS)."""
        raise NotImplementedError

    @staticmethod
    def input_length(n: int) -> int:
        """Model input length for operand length ``n``: ``x SEP y`` minus its last token."""
        return 2 * n + 1

    def __init__(self, cfg: TrialConfig) -> None:
        self.cfg = cfg
        self.name = cfg.task
        self.base = self.fixed_base if self.fixed_base is not None else cfg.vocab
        self.plus, self.sep, self.eos, self.pad = range(self.base, self.base + 4)
        self.vocab_size = self.base + 4
        self.lengths = eval_lengths(cfg)

    def max_length(self) -> int:
        return self.input_length(max([self.cfg.context, *self.lengths]))

    def _encode(self, operands: list[int]) -> tuple[list[int], int]:
        prompt, answer = self.example(operands, self.base)
        prompt = [self.plus if t == -1 else t for t in prompt]
        return prompt + [self.sep] + answer + [self.eos], len(prompt)

    def batch(self, generator: torch.Generator, ns: list[int]) -> Batch:
        """One batch with operand length ``ns[i]`` for row i, right-padded."""
        width = max(self.input_length(n) for n in ns) + 1
        ids = torch.full((len(ns), width), self.pad, dtype=torch.long)
        targets = torch.full((len(ns), width - 1), IGNORE, dtype=torch.long)
        for row, n in enumerate(ns):
            count = self.operands_per_length * n
            operands = torch.randint(0, self.base, (count,), generator=generator).tolist()
            tokens, sep_at = self._encode(operands)
            ids[row, : len(tokens)] = torch.tensor(tokens)
            # position t predicts token t + 1: score the answer and EOS, i.e. inputs sep_at .. end-1
            targets[row, sep_at : len(tokens) - 1] = ids[row, sep_at + 1 : len(tokens)]
        return Batch(ids[:, :-1], targets)

    def train_batch(self, generator: torch.Generator, batch_size: int) -> Batch:
        ns = torch.randint(1, self.cfg.context + 1, (batch_size,), generator=generator).tolist()
        return self.batch(generator, ns)

    @torch.no_grad()
    def evaluate(self, model: nn.Module, generator: torch.Generator, limit: int | None) -> list[EvalPoint]:
        points = []
        for n in self.lengths:
            if limit is not None and self.input_length(n) > limit:
                points.append(EvalPoint("exact_match", n, None, TABLE_LIMIT))
                continue
            correct = total = 0
            for _ in range(self.cfg.eval_batches):
                batch = self.batch(generator, [n] * self.cfg.batch)
                predictions: Tensor = model(batch.input_ids).argmax(dim=-1)  # (B, T)
                scored = batch.targets != IGNORE
                right = (predictions == batch.targets) | ~scored
                correct += int(right.all(dim=1).sum())
                total += len(right)
            points.append(EvalPoint("exact_match", n, correct / total))
        return points


class CopyTask(AlgorithmicTask):
    """``x SEP x``."""

    @staticmethod
    def example(operands: list[int], base: int) -> tuple[list[int], list[int]]:
        return operands, list(operands)


class ReverseTask(AlgorithmicTask):
    """``x SEP reversed(x)``."""

    @staticmethod
    def example(operands: list[int], base: int) -> tuple[list[int], list[int]]:
        return operands, operands[::-1]


class SortTask(AlgorithmicTask):
    """``x SEP sorted(x)``."""

    @staticmethod
    def example(operands: list[int], base: int) -> tuple[list[int], list[int]]:
        return operands, sorted(operands)


class AdditionTask(AlgorithmicTask):
    """``a PLUS b SEP c``: two numbers of n digits and their sum of n + 1, least significant first."""

    operands_per_length = 2
    fixed_base = 10

    @staticmethod
    def example(operands: list[int], base: int) -> tuple[list[int], list[int]]:
        n = len(operands) // 2
        a, b = operands[:n], operands[n:]
        value = sum(d * base**i for i, d in enumerate(a)) + sum(d * base**i for i, d in enumerate(b))
        digits = [(value // base**i) % base for i in range(n + 1)]
        return a + [-1] + b, digits  # -1 stands for PLUS, mapped by the task

    @staticmethod
    def input_length(n: int) -> int:
        return 3 * n + 3
