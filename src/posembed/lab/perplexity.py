"""The lab's one validation loss: mean next-token cross-entropy over consecutive held-out windows.

The char-LM task (:class:`posembed.lab.tasks.charlm.CharLMTask`, ``val_loss`` and ``perplexity``)
and the context study (:mod:`posembed.lab.context`, ``perplexity``) both score a model here.

A held-out token stream ``tokens`` of ``N`` ids is cut into ``count = min((N - 1) // length,
windows)`` consecutive, non-overlapping windows: window ``r`` feeds ``tokens[r L : r L + L]`` and
is scored on the next token at every position, ``tokens[r L + 1 : r L + L + 1]`` (so a window's
last target is the first input of the next). No window is padded and none runs past the end: the
characters after the last whole window are not scored. The windows go through the model
``batch`` at a time (the last batch may be smaller); the per-token losses are summed in fp32 and
divided by the ``count * length`` targets. Nothing is ignored: a token stream holds no padding,
so every target counts.

Example (a model that is uniform over 4 characters has loss ``ln 4`` and perplexity 4):
    >>> import torch
    >>> uniform = lambda ids: torch.zeros(*ids.shape, 4)  # (B, T) -> (B, T, V) logits
    >>> round(val_loss(uniform, torch.tensor([0, 1, 2, 3, 0, 1, 2]), 3, windows=8), 6), round(math.log(4), 6)
    (1.386294, 1.386294)
    >>> round(lm_perplexity(uniform, torch.tensor([0, 1, 2, 3, 0, 1, 2]), 3, windows=8), 6)
    4.0
    >>> val_loss(uniform, torch.tensor([0, 1, 2]), 3, windows=8) is None  # not one window of 3 + 1
    True
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

__all__ = ["val_loss", "lm_perplexity"]


@torch.no_grad()
def val_loss(model: Callable[[Tensor], Tensor], tokens: Tensor, length: int, *, windows: int,
             batch: int = 8) -> float | None:
    """Mean next-token cross-entropy (nats) of ``model`` over at most ``windows`` windows of ``length``.

    Args:
        model: ``(B, T)`` ids -> ``(B, T, V)`` logits.
        tokens: ``(N,)`` the held-out token ids.
        length: ``T``, the tokens each window feeds the model (>= 1).
        windows: at most this many windows are scored (>= 0).
        batch: windows per forward call (>= 1).

    Returns:
        The mean loss, or ``None`` when ``tokens`` holds not even one window of ``length + 1``
        (or ``windows`` is 0).
    """
    for name, value, least in (("length", length, 1), ("windows", windows, 0), ("batch", batch, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    count = min((len(tokens) - 1) // length, windows)
    if count <= 0:
        return None
    total, scored = 0.0, 0
    for first in range(0, count, batch):
        rows = range(first, min(first + batch, count))
        chunk = torch.stack([tokens[r * length : r * length + length + 1] for r in rows])  # (B, T + 1)
        logits = model(chunk[:, :-1])  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), chunk[:, 1:].flatten(), reduction="sum")
        total += float(loss)
        scored += chunk[:, 1:].numel()
    return total / scored


def lm_perplexity(model: Callable[[Tensor], Tensor], tokens: Tensor, length: int, *, windows: int,
                  batch: int = 8) -> float | None:
    """``exp`` of :func:`val_loss` (same arguments), or ``None`` where it is."""
    loss = val_loss(model, tokens, length, windows=windows, batch=batch)
    return None if loss is None else math.exp(loss)
