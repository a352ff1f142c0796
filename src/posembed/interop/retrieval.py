"""What a longer position table buys: long-document retrieval with and without extension.

:func:`evaluate_extension` embeds benchmark documents (:mod:`posembed.interop.retrieval_data`)
and their queries with a sentence-embedding model (mean pooling over tokens, then L2
normalisation, as sentence-transformers does for all-MiniLM-L6-v2) under several *systems*:

``truncate-T``
    the original model, the document cut to its first ``T`` tokens (sentence-transformers cuts
    all-MiniLM-L6-v2 inputs at 256 by default; 512 is the table's size);
``chunk-C``
    the original model on consecutive ``C``-token chunks, the mean of the chunk embeddings;
``copy`` / ``interpolate`` / ``hierarchical``
    the model extended by :func:`posembed.interop.extend.extend_checkpoint` to ``N``, the smallest
    of ``targets`` (1024, 2048, 4096) that holds the document (longer ones are cut to the
    largest), so a method is measured at the size one would extend to for that length.

For each document length every query ranks all documents of that length by cosine
similarity: accuracy is the fraction whose own document ranks first (ties count as misses),
MRR the mean reciprocal rank of it. The protocol is fixed by :class:`BenchmarkConfig` and
its seed; nothing is tuned on the results.
"""

from __future__ import annotations

import logging
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from posembed.interop.extend import extend_checkpoint, read_layout
from posembed.interop.retrieval_data import Document, corpus_tokens, default_text, make_facts, plant_documents
from posembed.interop.retrieval_report import summarise

__all__ = ["BenchmarkConfig", "build_documents", "evaluate_extension", "rank_scores"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchmarkConfig:
    """The benchmark protocol (defaults: about 4 minutes on 2 CPU cores for all-MiniLM-L6-v2)."""

    lengths: tuple[int, ...] = (256, 512, 1024, 2048, 4096)  # document lengths in tokens, specials included
    depths: tuple[float, ...] = (0.1, 0.5, 0.9)
    queries_per_depth: int = 8  # candidates per query: len(depths) * queries_per_depth
    targets: tuple[int, ...] = (1024, 2048, 4096)  # sizes the extension methods extend to
    methods: tuple[str, ...] = ("copy", "interpolate", "hierarchical")
    truncate: tuple[int, ...] = (256, 512)
    chunk: int = 512
    seed: int = 0
    batch_tokens: int = 8192

    def __post_init__(self) -> None:
        for name in ("lengths", "targets", "truncate"):
            values = getattr(self, name)
            if not values or any(not isinstance(v, int) or v < 8 for v in values):
                raise ValueError(f"{name} must be ints of at least 8 tokens, got {values!r}")
        if any(not 0.0 <= d <= 1.0 for d in self.depths) or not self.depths:
            raise ValueError(f"depths must lie in [0, 1], got {self.depths!r}")
        if not isinstance(self.queries_per_depth, int) or self.queries_per_depth < 1:
            raise ValueError(f"queries_per_depth must be a positive int, got {self.queries_per_depth!r}")
        make_facts(self.queries)  # checks the count
        if self.chunk < 8:
            raise ValueError(f"chunk must be at least 8 tokens, got {self.chunk!r}")

    @property
    def queries(self) -> int:
        return len(self.depths) * self.queries_per_depth

    def target_for(self, length: int) -> int:
        """The extension size used for documents of ``length`` tokens."""
        fitting = [t for t in sorted(self.targets) if t >= length]
        return fitting[0] if fitting else max(self.targets)


# ---------------------------------------------------------------------- data


def build_documents(tokenizer, config: BenchmarkConfig, text: str) -> dict[int, list[Document]]:
    """Documents per length: ``config.queries`` each, fact ``i`` at depth ``depths[i // queries_per_depth]``."""
    tokens, starts = corpus_tokens(tokenizer, text)
    facts = make_facts(config.queries)
    fact_ids = [tokenizer(f.sentence, add_special_tokens=False)["input_ids"] for f in facts]
    depths = [d for d in config.depths for _ in range(config.queries_per_depth)]
    rng = random.Random(config.seed)
    return {
        length: plant_documents(tokens, starts, fact_ids, facts, depths, length - 2, rng)
        for length in config.lengths
    }


def _wrap(tokenizer, body: Sequence[int]) -> list[int]:
    return [tokenizer.cls_token_id, *body, tokenizer.sep_token_id]


# ---------------------------------------------------------------------- embedding


def _pooled(model, batch: list[list[int]], pad_id: int) -> Tensor:
    width = max(len(ids) for ids in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, seq in enumerate(batch):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, C)
    summed = (hidden * mask.unsqueeze(-1)).sum(1)
    return torch.nn.functional.normalize(summed / mask.sum(1, keepdim=True), dim=-1)


@torch.inference_mode()
def embed(model, inputs: list[list[int]], pad_id: int, batch_tokens: int) -> Tensor:
    """Mean-pooled, L2-normalised embeddings, shape ``(len(inputs), C)``, in input order."""
    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
    out: list[Tensor | None] = [None] * len(inputs)
    batch: list[int] = []
    for i in order + [None]:
        if batch and (i is None or len(inputs[i]) * (len(batch) + 1) > batch_tokens):
            for j, vector in zip(batch, _pooled(model, [inputs[j] for j in batch], pad_id)):
                out[j] = vector
            batch = []
        if i is not None:
            batch.append(i)
    return torch.stack(out)


def _chunked(model, tokenizer, documents: list[Document], size: int, batch_tokens: int) -> Tensor:
    body = size - 2
    pieces, owner = [], []
    for index, doc in enumerate(documents):
        for begin in range(0, len(doc.body), body):
            pieces.append(_wrap(tokenizer, doc.body[begin : begin + body]))
            owner.append(index)
    vectors = embed(model, pieces, tokenizer.pad_token_id, batch_tokens)
    owner_t = torch.tensor(owner)
    means = torch.stack([vectors[owner_t == i].mean(0) for i in range(len(documents))])
    return torch.nn.functional.normalize(means, dim=-1)


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


# ---------------------------------------------------------------------- evaluation


def _load(folder: Path):
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(folder)).eval()


def _systems(config: BenchmarkConfig) -> list[tuple[str, dict]]:
    systems = [(f"truncate-{t}", {"kind": "truncate", "positions": t}) for t in config.truncate]
    systems.append((f"chunk-{config.chunk}", {"kind": "chunk", "positions": config.chunk}))
    for method in config.methods:
        systems.append((method, {"kind": "extend", "method": method}))
    return systems


def _run_system(name, spec, model, tokenizer, documents, queries, config, length):
    if spec["kind"] == "chunk":
        doc_vectors = _chunked(model, tokenizer, documents, config.chunk, config.batch_tokens)
        used = config.chunk
    else:
        used = spec["positions"] if spec["kind"] == "truncate" else config.target_for(length)
        inputs = [_wrap(tokenizer, d.body[: used - 2]) for d in documents]
        doc_vectors = embed(model, inputs, tokenizer.pad_token_id, config.batch_tokens)
    hits, reciprocal = rank_scores(queries, doc_vectors)
    rows = []
    for depth in config.depths:
        picked = [i for i, d in enumerate(documents) if d.depth == depth]
        rows.append({
            "system": name, "length": length, "positions_used": min(used, length), "depth": depth,
            "accuracy": sum(hits[i] for i in picked) / len(picked),
            "mrr": sum(reciprocal[i] for i in picked) / len(picked),
            "queries": len(picked), "candidates": len(documents),
        })
    return rows


def _model_jobs(model_path: Path, config: BenchmarkConfig, workdir: Path):
    """(model folder, [(system name, spec, lengths)]) in the order they run; extended folders built lazily."""
    base = [(n, s, list(config.lengths)) for n, s in _systems(config) if s["kind"] != "extend"]
    yield (lambda: model_path), base
    for name, spec in _systems(config):
        if spec["kind"] != "extend":
            continue
        for target in sorted(set(config.targets)):
            lengths = [L for L in config.lengths if config.target_for(L) == target]
            if lengths:
                out = workdir / f"{name}-{target}"
                yield (lambda m=spec["method"], t=target, o=out: extend_checkpoint(model_path, o, t, m).out), [
                    (name, spec, lengths)
                ]


def evaluate_extension(
    model_path: str | Path,
    config: BenchmarkConfig | None = None,
    *,
    text: str | Path | None = None,
    progress: bool = False,
) -> dict:
    """Run the benchmark on a BERT-family sentence-embedding checkpoint folder.

    Args:
        model_path: checkpoint folder (e.g. all-MiniLM-L6-v2).
        config: the protocol (default :class:`BenchmarkConfig`).
        text: filler text file (default: the shipped tinyshakespeare).
        progress: show a tqdm bar on stderr.

    Returns:
        a JSON-able dict: ``protocol``, ``rows`` (one per system, length and depth),
        ``by_length``, ``by_depth``, ``summary`` (ranked on documents longer than
        the table), ``seconds``.
    """
    from transformers import AutoTokenizer

    config = config or BenchmarkConfig()
    model_path = Path(model_path)
    positions = read_layout(model_path).positions
    _check_sizes(config, positions)
    text_path = Path(text) if text is not None else default_text()
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    documents = build_documents(tokenizer, config, text_path.read_text(encoding="utf-8"))
    facts = make_facts(config.queries)
    query_inputs = [_wrap(tokenizer, tokenizer(f.query, add_special_tokens=False)["input_ids"]) for f in facts]
    rows, seconds = [], {}
    with tempfile.TemporaryDirectory(prefix="posembed-extend-eval-") as scratch:
        job_list = list(_model_jobs(model_path, config, Path(scratch)))
        total = sum(len(lengths) for _, systems in job_list for *_, lengths in systems)
        bar = _progress(total, progress)
        for make_folder, systems in job_list:
            model = _load(make_folder())
            for name, spec, lengths in systems:
                started = time.perf_counter()
                queries = embed(model, query_inputs, tokenizer.pad_token_id, config.batch_tokens)
                for length in lengths:
                    bar.set_postfix_str(f"{name} @ {length}")
                    rows += _run_system(name, spec, model, tokenizer, documents[length], queries, config, length)
                    bar.update(1)
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started
            del model
        bar.close()
    protocol = {
        **asdict(config), "model": str(model_path), "original_positions": positions, "text": str(text_path),
        "pooling": "mean, L2-normalised", "facts": [asdict(f) for f in facts],
    }
    seconds = {k: round(v, 2) for k, v in seconds.items()}
    logger.info("extend-eval on %s: %d rows in %.0f s", model_path, len(rows), sum(seconds.values()))
    return {"protocol": protocol, "rows": rows, "seconds": seconds, **summarise(rows, positions)}


def _check_sizes(config: BenchmarkConfig, positions: int) -> None:
    too_long = [t for t in (*config.truncate, config.chunk) if t > positions]
    if too_long:
        raise ValueError(f"truncation/chunk sizes {too_long} exceed the checkpoint's {positions} positions")
    too_short = [t for t in config.targets if t <= positions]
    if too_short:
        raise ValueError(f"extension targets {too_short} must be larger than the checkpoint's {positions} positions")


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="extend-eval", unit="pass", disable=not enabled, leave=False)
