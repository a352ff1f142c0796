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

:func:`matched_loss` scores the *same* characters at every length, for ratios between lengths
(Press et al. 2022 compare perplexity at 1x and 8x the training context): window ``r`` ends at
``(r + 1) * span`` whatever its length, and only its last ``scored`` targets count, so the
characters scored are those of the windows of the longest length's last ``scored`` positions, read
with ``length`` characters of context. A model that ignores context farther away than ``scored``
reads the same loss at every length.

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
from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["val_loss", "lm_perplexity", "matched_loss", "matched_losses"]


@torch.no_grad()
def val_loss(
    model: Callable[[Tensor], Tensor], tokens: Tensor, length: int, *, windows: int, batch: int = 8
) -> float | None:
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
    # consecutive windows (the argument checks are matched_loss's, ``length`` first): each ends where the next
    # begins, every target scored
    return matched_loss(model, tokens, length, scored=length, span=length, windows=windows, batch=batch)


def lm_perplexity(
    model: Callable[[Tensor], Tensor], tokens: Tensor, length: int, *, windows: int, batch: int = 8
) -> float | None:
    """``exp`` of :func:`val_loss` (same arguments), or ``None`` where it is."""
    loss = val_loss(model, tokens, length, windows=windows, batch=batch)
    return None if loss is None else math.exp(loss)


@torch.no_grad()
def matched_loss(
    model: Callable[[Tensor], Tensor],
    tokens: Tensor,
    length: int,
    *,
    scored: int,
    span: int,
    windows: int,
    batch: int = 8,
) -> float | None:
    """Mean next-token cross-entropy (nats) of the last ``scored`` targets of windows of ``length``
    that end every ``span`` tokens: the same targets for every ``length`` <= ``span``.

    Args:
        model: ``(B, T)`` ids -> ``(B, T, V)`` logits.
        tokens: ``(N,)`` the held-out token ids.
        length: ``T``, the tokens each window feeds the model (``scored <= length <= span``).
        scored: the targets scored at the end of each window (the training context L).
        span: the spacing of the windows' ends (the longest length compared).
        windows: at most this many windows are scored (>= 0).
        batch: windows per forward call (>= 1).

    Returns:
        The mean loss, or ``None`` when ``tokens`` holds not even one window of ``span + 1`` (or
        ``windows`` is 0).

    Example (window ``r`` ends at ``(r + 1) * span``; its last ``scored`` targets are the same at
    every length, so a model blind to context reads one number):

        >>> import torch
        >>> tokens = torch.arange(20) % 4
        >>> bigram = lambda ids: torch.nn.functional.one_hot((ids + 1) % 4, 4).float() * 9  # (B, T, V)
        >>> [round(matched_loss(bigram, tokens, n, scored=2, span=8, windows=4), 6) for n in (2, 4, 8)]
        [0.00037, 0.00037, 0.00037]
        >>> matched_loss(bigram, tokens, 9, scored=2, span=8, windows=4)
        Traceback (most recent call last):
        ...
        ValueError: need scored <= length <= span, got scored=2, length=9, span=8
    """
    return matched_losses(model, tokens, length, scored=(scored,), span=span, windows=windows, batch=batch)[0]


@torch.no_grad()
def matched_losses(
    model: Callable[[Tensor], Tensor],
    tokens: Tensor,
    length: int,
    *,
    scored: tuple[int, ...],
    span: int,
    windows: int,
    batch: int = 8,
) -> tuple[float | None, ...]:
    """:func:`matched_loss` for several ``scored`` counts from one pass of the windows: one number per
    entry of ``scored``, each exactly what :func:`matched_loss` gives for it (the same logits, the same
    sums). At ``length == span`` the consecutive windows of :func:`val_loss` are these windows, so
    ``scored=(length, L)`` gives the validation loss and the matched loss at the longest length from one
    forward each.

        >>> import torch
        >>> tokens = torch.arange(20) % 4
        >>> bigram = lambda ids: torch.nn.functional.one_hot((ids + 1) % 4, 4).float() * 9  # (B, T, V)
        >>> both = matched_losses(bigram, tokens, 8, scored=(8, 2), span=8, windows=4)
        >>> both == (val_loss(bigram, tokens, 8, windows=4),
        ...          matched_loss(bigram, tokens, 8, scored=2, span=8, windows=4))
        True
    """
    if not isinstance(scored, tuple) or not scored:
        raise ValueError(f"scored must be a non-empty tuple of integers, got {scored!r}")
    for name, value, least in (
        ("length", length, 1),
        *(("scored", s, 1) for s in scored),
        ("span", span, 1),
        ("windows", windows, 0),
        ("batch", batch, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    for s in scored:
        if not s <= length <= span:
            raise ValueError(f"need scored <= length <= span, got scored={s}, length={length}, span={span}")
    count = min((len(tokens) - 1) // span, windows)
    if count <= 0:
        return (None,) * len(scored)
    totals, counted = [0.0] * len(scored), [0] * len(scored)
    for first in range(0, count, batch):
        ends = [(r + 1) * span for r in range(first, min(first + batch, count))]
        chunk = torch.stack([tokens[end - length : end + 1] for end in ends])  # (B, T + 1)
        logits = model(chunk[:, :-1])  # (B, T, V)
        for i, s in enumerate(scored):
            targets = chunk[:, -s:]  # (B, s)
            loss = torch.nn.functional.cross_entropy(
                logits[:, -s:].flatten(0, 1).float(), targets.flatten(), reduction="sum"
            )
            totals[i] += float(loss)
            counted[i] += targets.numel()
    return tuple(total / n for total, n in zip(totals, counted))
