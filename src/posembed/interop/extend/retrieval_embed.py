"""How ``posembed extend-eval`` turns token sequences into vectors and rankings.

:class:`Encoder` mean-pools a model's last hidden states (each distinct sequence encoded once);
:func:`document_vectors` embeds a cell's documents the way a system reads them (truncated, in
chunks weighted by their tokens, in parallel context windows, or whole); :func:`rank_scores` says
whether each query ranks its own document first.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from posembed.interop.extend.retrieval_data import Document

__all__ = ["Encoder", "document_vectors", "rank_scores", "wrap", "normalise"]


def wrap(tokenizer, body: Sequence[int]) -> tuple[int, ...]:
    """``body`` between the tokenizer's ``[CLS]`` and ``[SEP]``."""
    return (tokenizer.cls_token_id, *body, tokenizer.sep_token_id)


def _pooled(model, batch: list[tuple[int, ...]], pad_id: int) -> Tensor:
    width = max(len(ids) for ids in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, seq in enumerate(batch):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, C)
    return (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)  # (B, C)


class Encoder:
    """Mean-pooled (unnormalised) embeddings of token sequences, each distinct one encoded once.

    ``shared`` is a cache for sequences of at most ``exact_up_to`` tokens, shared between
    models that encode such inputs identically; longer inputs use this encoder's own cache.
    """

    def __init__(self, model, pad_id: int, batch_tokens: int, shared: dict | None = None, exact_up_to: int = 0):
        self.model, self.pad_id, self.batch_tokens = model, pad_id, batch_tokens
        self.shared = shared if shared is not None else {}
        self.exact_up_to = exact_up_to if shared is not None else 0
        self.own: dict[tuple[int, ...], Tensor] = {}

    def _cache(self, seq: tuple[int, ...]) -> dict:
        return self.shared if len(seq) <= self.exact_up_to else self.own

    @torch.inference_mode()
    def __call__(self, inputs: Sequence[tuple[int, ...]]) -> Tensor:
        todo = sorted({seq for seq in inputs if seq not in self._cache(seq)}, key=len)
        batch: list[tuple[int, ...]] = []
        for seq in [*todo, None]:
            if batch and (seq is None or len(seq) * (len(batch) + 1) > self.batch_tokens):
                for done, vector in zip(batch, _pooled(self.model, batch, self.pad_id)):
                    self._cache(done)[done] = vector
                batch = []
            if seq is not None:
                batch.append(seq)
        return torch.stack([self._cache(seq)[seq] for seq in inputs])


def normalise(vectors: Tensor) -> Tensor:
    return torch.nn.functional.normalize(vectors, dim=-1)


def _windows(body: Sequence[int], size: int, full_last: bool) -> list[Sequence[int]]:
    """Consecutive ``size``-token pieces of ``body``; with ``full_last``, the last one ends at the end, full."""
    if len(body) <= size:
        return [body]
    pieces = [body[begin : begin + size] for begin in range(0, len(body), size)]
    if full_last:
        pieces[-1] = body[-size:]
    return pieces


def document_vectors(system, encoder: Encoder, tokenizer, documents: list[Document], used: int) -> Tensor:
    """Unit vectors of ``documents`` (shape ``(D, C)``) as ``system`` (a ``retrieval.System``) reads
    them: ``chunk`` and ``pcw`` in pieces of ``system.size`` tokens, else the first ``used`` tokens."""
    if system.kind in ("chunk", "pcw"):
        owners, pieces = [], []
        for index, doc in enumerate(documents):
            for piece in _windows(doc.body, system.size - 2, full_last=system.kind == "pcw"):
                pieces.append(wrap(tokenizer, piece))
                owners.append(index)
        vectors, owner = encoder(pieces), torch.tensor(owners)
        if system.kind == "pcw":
            return normalise(torch.stack([vectors[owner == i].mean(0) for i in range(len(documents))]))
        weights = torch.tensor([[len(piece) - 2.0] for piece in pieces])  # (pieces, 1): the body tokens each covers
        vectors = normalise(vectors) * weights
        return normalise(
            torch.stack([vectors[owner == i].sum(0) / weights[owner == i].sum() for i in range(len(documents))])
        )
    return normalise(encoder([wrap(tokenizer, d.body[: used - 2]) for d in documents]))


def rank_scores(queries: Tensor, documents: Tensor) -> tuple[list[bool], list[float]]:
    """Per query ``i``: whether document ``i`` strictly outscores all others, and 1 / its rank.

    >>> q = torch.eye(3); d = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [0, 0, 1.0]])
    >>> rank_scores(q, d)
    ([False, False, True], [0.5, 0.3333333333333333, 1.0])
    """
    scores = queries @ documents.T  # (Q, Q)
    own = scores.diagonal().unsqueeze(1)
    others = scores.masked_fill(torch.eye(len(scores), dtype=torch.bool), float("-inf"))
    better_or_tied = (others >= own).sum(1)  # ties rank the own document last among equals
    return [int(b) == 0 for b in better_or_tied], [1.0 / (1 + int(b)) for b in better_or_tied]
