"""The four-term decomposition of first-layer attention logits (Ke, He, Liu, "Rethinking Positional
Encoding in Language Pre-training" (TUPE), ICLR 2021).

With absolute positions added to the input, the first layer's logits between tokens ``i`` and ``j`` are
``((w_i + p_i) W^Q)((w_j + p_j) W^K)^T / sqrt(D)``, which splits into four terms:
word-word ``(w_i W^Q)(w_j W^K)^T``, word-position ``(w_i W^Q)(p_j W^K)^T``, position-word
``(p_i W^Q)(w_j W^K)^T`` and position-position ``(p_i W^Q)(p_j W^K)^T``.

A real model puts a LayerNorm between the sum and ``W^Q``/``W^K`` (BERT after the embeddings,
GPT-2 at the start of the block). LayerNorm is linear once its per-token mean and standard deviation
are fixed, so we take them from the real sum ``e = w + p (+ s)`` and split exactly:
``LN(e) = g * (w + s - mean(w + s)) / sd(e) + b   +   g * (p - mean(p)) / sd(e)``
(word part, with the segment vector, the LayerNorm bias and the projection biases counted as
"word"; position part). The four terms then add up to the model's real first-layer logits.

Example:
    >>> import torch
    >>> torch.manual_seed(0) and None
    >>> w, p = torch.randn(5, 8), torch.randn(5, 8)
    >>> wq, wk = torch.randn(8, 8), torch.randn(8, 8)
    >>> xw, xp = layernorm_split(w, p, torch.ones(8), torch.zeros(8), 1e-12)
    >>> terms = four_terms(xw, xp, wq, None, wk, None, num_heads=2)
    >>> x = torch.nn.functional.layer_norm(w + p, (8,), eps=1e-12)
    >>> q, k = (x @ wq.T).view(5, 2, 4).transpose(0, 1), (x @ wk.T).view(5, 2, 4).transpose(0, 1)
    >>> torch.allclose(sum(terms.values()), q @ k.transpose(-1, -2) / 2.0, atol=1e-5)
    True
"""

from __future__ import annotations

import math

import torch

__all__ = ["TERMS", "layernorm_split", "four_terms", "term_shares", "add_or_concat"]

#: the four terms, in the order TUPE writes them
TERMS = ("word-word", "word-position", "position-word", "position-position")
#: mixed-term share below which adding counts as "close to concatenation", and above which the mixing matters
#: (with unrelated word and position parts of equal size, each term would hold a quarter: mixed = 50%)
MIXED_SMALL, MIXED_LARGE = 0.2, 0.4


def layernorm_split(
    content: torch.Tensor, position: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``LayerNorm(content + position)`` exactly into a content part and a position part.

    Shape:
        content, position ``(..., T, C)`` -> two ``(..., T, C)`` tensors summing to the LayerNorm output.
    """
    if content.shape != position.shape:
        raise ValueError(f"content {tuple(content.shape)} and position {tuple(position.shape)} shapes differ")
    total = content + position
    scale = torch.sqrt(total.var(dim=-1, unbiased=False, keepdim=True) + eps)
    word = weight * (content - content.mean(dim=-1, keepdim=True)) / scale + bias
    where = weight * (position - position.mean(dim=-1, keepdim=True)) / scale
    return word, where


def _heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    *lead, length, width = x.shape
    return x.reshape(*lead, length, num_heads, width // num_heads).transpose(-2, -3)  # (..., H, T, D)


def four_terms(
    word: torch.Tensor,
    position: torch.Tensor,
    wq: torch.Tensor,
    bq: torch.Tensor | None,
    wk: torch.Tensor,
    bk: torch.Tensor | None,
    num_heads: int,
) -> dict[str, torch.Tensor]:
    """The four scaled logit terms per head.

    Args:
        word, position: the two parts of the attention input (see :func:`layernorm_split`).
        wq, wk: query/key projection weights in ``nn.Linear`` layout ``(H*D, C)``; bq, bk: biases or None
            (biases are counted with the word part).

    Shape:
        word, position ``(..., T, C)`` -> each term ``(..., H, T, T)``.
    """
    if wq.shape[0] % num_heads:
        raise ValueError(f"projection width {wq.shape[0]} is not divisible by num_heads={num_heads}")
    scale = 1.0 / math.sqrt(wq.shape[0] // num_heads)
    q_word = _heads(torch.nn.functional.linear(word, wq, bq), num_heads)  # (..., H, T, D)
    q_pos = _heads(torch.nn.functional.linear(position, wq), num_heads)
    k_word = _heads(torch.nn.functional.linear(word, wk, bk), num_heads)
    k_pos = _heads(torch.nn.functional.linear(position, wk), num_heads)
    pairs = ((q_word, k_word), (q_word, k_pos), (q_pos, k_word), (q_pos, k_pos))
    return {name: (q @ k.transpose(-1, -2)) * scale for name, (q, k) in zip(TERMS, pairs)}


def term_shares(terms: dict[str, torch.Tensor]) -> dict[str, float]:
    """Each term's share: ``mean |term| / sum over the four terms of mean |term|``."""
    sizes = {name: float(term.abs().mean()) for name, term in terms.items()}
    total = sum(sizes.values())
    return {name: (size / total if total > 0 else 0.0) for name, size in sizes.items()}


def add_or_concat(shares: dict[str, float]) -> tuple[str, str]:
    """TUPE's answer to "why add instead of concatenate?" from the measured shares: ``(verdict, sentence)``.

    Adding ``w + p`` puts the mixed word-position and position-word terms into every logit;
    concatenating ``[w | p]`` with separate word and position projections (TUPE's untied attention)
    keeps only word-word and position-position. Small mixed terms mean adding acts close to concatenation.

    Example:
        >>> add_or_concat({"word-word": 0.6, "word-position": 0.05, "position-word": 0.05, "position-position": 0.3})[0]
        'close to concatenation'
    """
    mixed = shares["word-position"] + shares["position-word"]
    pure = shares["word-word"] + shares["position-position"]
    ratio = mixed / pure if pure > 0 else float("inf")
    if mixed < MIXED_SMALL:
        verdict = "close to concatenation"
        meaning = (
            "they are small, so here adding acts close to concatenation: the model makes little use of the "
            "word-position mixing that adding allows, which is TUPE's case for untying the two"
        )
    elif mixed < MIXED_LARGE:
        verdict = "partly mixed"
        meaning = (
            "they are a sizeable minority, so adding is more than a cheap concatenation here: part of the first "
            "layer's attention comes from word-position interplay that separate projections would drop"
        )
    else:
        verdict = "mixed"
        meaning = (
            "they are as large as the pure terms, so the first layer relies on the mixing that adding allows; "
            "concatenation with separate word and position projections would remove it"
        )
    sentence = (
        "Why add instead of concatenate? Adding w + p lets every logit mix word and position (the word-position "
        "and position-word terms); concatenating [w | p] with separate word and position projections, as TUPE's "
        f"untied attention does, keeps only the pure word-word and position-position terms. Here the mixed terms "
        f"hold {mixed:.1%} of the logit magnitude against {pure:.1%} for the pure ones ({ratio:.2f}x): {meaning}."
    )
    return verdict, sentence
