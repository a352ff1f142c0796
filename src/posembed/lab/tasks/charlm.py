"""Character-level language modelling on any text file, perplexity at 1x..8x the context.

Training draws random windows of ``context + 1`` characters from the first 90 % of the text
(nanoGPT's ``get_batch``). Validation scores consecutive non-overlapping windows of the last
10 % at each evaluated context (``context * eval_scales``, e.g. 1x, 2x, 4x, 8x as in Press et
al. 2022, ALiBi), every position of every window, at most ``eval_batches * batch`` windows
(:func:`posembed.lab.tasks.perplexity.val_loss`, the loss the context study scores too: ``val_loss``
and ``perplexity``). Those windows hold different text at each length, so a ratio between two
lengths mixes the text with the context; ``matched_loss`` scores the same characters at every
length instead (:func:`posembed.lab.tasks.perplexity.matched_loss`: the last L characters of windows that
end at the same places, every ``longest`` characters, read with each length's context), the
number the lab's length ratios are taken from.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from posembed.lab.config import TrialConfig
from posembed.lab.data import CharCorpus, check_text_file, load_text, resolve_text_path
from posembed.lab.tasks.base import TABLE_LIMIT, Batch, EvalPoint, eval_lengths
from posembed.lab.tasks.perplexity import matched_loss, matched_losses, val_loss

__all__ = ["CharLMTask", "load_corpus"]

SHORT_VAL = "n/a (validation split too short)"
#: what the task records at each evaluated length
_METRICS = ("val_loss", "perplexity", "matched_loss")


@functools.lru_cache(maxsize=4)
def _cached_corpus(path: str, mtime: float, min_chars: int) -> CharCorpus:
    return CharCorpus(load_text(path, min_chars=min_chars))


def load_corpus(text: str, context: int) -> CharCorpus:
    """The corpus of a config's ``text`` (cached), checked to hold ``context + 1`` chars in each split."""
    path = check_text_file(resolve_text_path(text))
    return _cached_corpus(str(path), path.stat().st_mtime, 10 * (context + 2))


class CharLMTask:
    """Next-character prediction with a decoder."""

    num_classes = None

    def __init__(self, cfg: TrialConfig) -> None:
        self.cfg, self.name = cfg, cfg.task  # the name is the registry's
        self.corpus = load_corpus(cfg.text, cfg.context)
        self.vocab_size = self.corpus.vocab_size
        self.lengths = eval_lengths(cfg)

    def max_length(self) -> int:
        return max([self.cfg.context, *self.lengths])

    def train_batch(self, generator: torch.Generator, batch_size: int) -> Batch:
        data, block = self.corpus.train, self.cfg.context
        starts = torch.randint(0, len(data) - block, (batch_size,), generator=generator)
        windows = torch.stack([data[s : s + block + 1] for s in starts.tolist()])  # (B, T + 1)
        return Batch(windows[:, :-1], windows[:, 1:])

    @torch.no_grad()
    def evaluate(self, model: nn.Module, generator: torch.Generator, limit: int | None) -> list[EvalPoint]:
        points = []
        for length in self.lengths:
            if limit is not None and length > limit:
                points += [EvalPoint(m, length, None, TABLE_LIMIT) for m in _METRICS]
                continue
            loss, matched = self._losses(model, length)
            if loss is None or matched is None:
                points += [EvalPoint(m, length, None, SHORT_VAL) for m in _METRICS]
                continue
            points += [
                EvalPoint("val_loss", length, loss),
                EvalPoint("perplexity", length, math.exp(loss)),
                EvalPoint("matched_loss", length, matched),
            ]
        return points

    def _losses(self, model: nn.Module, length: int) -> tuple[float | None, float | None]:
        """``(val_loss, matched_loss)`` at ``length``; at the longest length both come from one pass,
        since the consecutive windows of ``val_loss`` are then the matched windows."""
        windows, span, scored = self.cfg.eval_batches * self.cfg.batch, max(self.lengths), min(self.cfg.context, length)
        if length == span:
            return matched_losses(
                model,
                self.corpus.val,
                length,
                scored=(length, scored),
                span=span,
                windows=windows,
                batch=self.cfg.batch,
            )
        return (
            val_loss(model, self.corpus.val, length, windows=windows, batch=self.cfg.batch),
            matched_loss(
                model, self.corpus.val, length, scored=scored, span=span, windows=windows, batch=self.cfg.batch
            ),
        )
