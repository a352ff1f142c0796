"""Tune only the new rows of an extended position table: ``posembed extend --finetune STEPS``.

LongEmbed (Zhu et al. 2024, section 4.2 and appendix B) freezes every weight of an APE
embedding model, its original position rows included, and trains only the rows an extension
added; inputs within the original length then give exactly the original outputs. Training on
long documents is avoided as in PoSE (Zhu et al. 2023): a short passage is given the position
ids of a far part of the table (``[CLS]`` at 0, the passage from a sampled skip ``u`` on), so
short inputs train rows up to the new size.

Here the pairs come from a text file (the shipped tinyshakespeare by default, only its first nine
tenths, :func:`posembed.interop.extend.retrieval_data.split_text`; the benchmark's filler is the last
tenth): the *passage* is a ``passage``-token span that starts at a word, placed at positions
``u + 1 ..`` with ``u`` drawn so that the span reaches past the original rows; the *query* is a
``query``-token piece of that span, at the ordinary positions. The loss is InfoNCE over the
batch (the other passages are the negatives; temperature 0.05): the frozen model must still find
a passage's own words when the passage sits at the new positions. Adam without weight decay;
the gradient of the original rows is zeroed, and the original rows are copied back bit for bit
at the end.

Example (a random 1-layer BERT; the real use is ``posembed extend MODEL --to 2048 --finetune 300``):
    >>> import tempfile, pathlib, shutil, transformers, torch
    >>> from posembed.interop.extend.methods import copy_rows
    >>> from posembed.encode.report import default_model_path
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "bert"
    >>> config = transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    ...     intermediate_size=32, max_position_embeddings=32)
    >>> transformers.BertModel(config).save_pretrained(folder)
    >>> for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    ...     _ = shutil.copyfile(default_model_path() / name, folder / name)
    >>> table = transformers.BertModel.from_pretrained(folder).embeddings.position_embeddings.weight.detach()
    >>> tuned, record = tune_new_rows(folder, copy_rows(table, 64), 32, steps=2, batch=4, passage=16, query=4)
    >>> torch.equal(tuned[:32], table), bool((tuned[32:] != copy_rows(table, 64)[32:]).any()), record["steps"]
    (True, True, 2)
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path

import torch
from torch import Tensor

from posembed._utils.progress import Progress, progress_mode
from posembed.interop.extend.retrieval_data import corpus_tokens, default_text, read_text, split_text

__all__ = ["tune_new_rows", "TEMPERATURE"]

logger = logging.getLogger(__name__)

#: InfoNCE temperature (E5's and LongEmbed's 0.01-0.05 range)
TEMPERATURE = 0.05


def tune_new_rows(
    model_path: str | Path,
    table: Tensor,
    trained_rows: int,
    *,
    steps: int,
    text: str | Path | None = None,
    seed: int = 0,
    batch: int = 8,
    passage: int = 64,
    query: int = 12,
    lr: float = 5e-4,
    progress: bool | str | None = False,
) -> tuple[Tensor, dict]:
    """Train rows ``trained_rows ..`` of ``table`` with the rest of the model frozen.

    ``progress``: ``False`` (default) none; ``None`` a bar on a terminal and a line per step
    otherwise (INFO records of this module's logger); ``"bar"`` / ``"lines"`` that style.

    Args:
        model_path: the original checkpoint folder (weights and a fast tokenizer).
        table: the grown position table, shape ``(N, C)``; rows ``0 .. trained_rows-1`` are kept.
        trained_rows: rows that stay as they are (padding rows included, for RoBERTa-style models).
        steps: optimiser steps (each one batch of ``batch`` pairs).
        text: a UTF-8 text file for the pairs (default: the shipped tinyshakespeare).

    Returns:
        the tuned table (same dtype; rows below ``trained_rows`` bit-identical to ``table``) and
        a JSON-able record: steps, seed, first and last loss, seconds, the pair recipe.
    """
    from transformers import AutoModel, AutoTokenizer

    _check(table, trained_rows, steps, batch, passage, query)
    rows = table.shape[0]
    if rows - passage - 2 < max(0, trained_rows - passage // 2):  # _pairs' highest and lowest skip
        raise ValueError(f"a {passage}-token passage does not fit the {rows - trained_rows} new rows")
    text_path = Path(text) if text is not None else default_text()
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    tokens, starts = corpus_tokens(tokenizer, split_text(read_text(text_path))[0])
    model = AutoModel.from_pretrained(str(model_path)).float().eval()  # eval: no dropout
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    weight = torch.nn.Parameter(table.detach().float().clone())
    weight.register_hook(lambda grad: torch.cat([torch.zeros_like(grad[:trained_rows]), grad[trained_rows:]]))
    model = _with_table(model, weight)
    optimiser = torch.optim.Adam([weight], lr=lr, weight_decay=0.0)
    rng = random.Random(seed)
    losses, started = [], time.perf_counter()
    ticks = Progress(steps, mode=progress_mode(progress), desc="tuning new rows", unit="step", logger=logger)
    for _step in range(steps):
        passages, queries, skips = _pairs(tokens, starts, rng, batch, passage, query, trained_rows, rows)
        with torch.no_grad():
            query_vectors = _embed(model, tokenizer, queries, None)
        passage_vectors = _embed(model, tokenizer, passages, skips)
        logits = query_vectors @ passage_vectors.T / TEMPERATURE  # (B, B)
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(passages)))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
        ticks.advance(f"loss {losses[-1]:.4f}")
    ticks.close()
    tuned = weight.detach().to(table.dtype)
    tuned[:trained_rows] = table[:trained_rows]  # bit for bit, whatever the optimiser did
    record = {
        "steps": steps,
        "seed": seed,
        "batch": batch,
        "passage_tokens": passage,
        "query_tokens": query,
        "lr": lr,
        "temperature": TEMPERATURE,
        "loss_first": round(losses[0], 4),
        "loss_last_25": round(sum(losses[-25:]) / len(losses[-25:]), 4),
        "seconds": round(time.perf_counter() - started, 1),
        "text": str(text_path),
        "pairs": "query: a piece of the passage; passage: a span placed past the original rows (PoSE skip)",
    }
    rose = steps > 1 and record["loss_last_25"] >= record["loss_first"]
    logger.log(
        logging.WARNING if rose else logging.INFO,
        "tuned rows %d..%d in %d steps: %s",
        trained_rows,
        rows - 1,
        steps,
        describe_loss(record),
    )
    return tuned, record


def describe_loss(record: dict) -> str:
    """The tuning's loss in words, from its record: the first step's against the mean of the last
    25 (or fewer), and, where that did not fall, that it did not and what to do (one step has no
    trend to judge).

    >>> print(describe_loss({"steps": 5, "loss_first": 0.083, "loss_last_25": 0.163}))  # doctest: +NORMALIZE_WHITESPACE
    loss rose from 0.083 (first step) to 0.163 (mean of the last 5): 5 steps did not lower it, so the new rows fit the
    pairs no better than their starting copies; tune more steps, or none
    >>> describe_loss({"steps": 60, "loss_first": 0.41, "loss_last_25": 0.12})
    'loss fell from 0.41 (first step) to 0.12 (mean of the last 25)'
    """
    first, last, steps = record["loss_first"], record["loss_last_25"], record["steps"]
    if steps < 2:
        return f"loss {first:.4g} after one step (nothing to compare it with)"
    span = f"(first step) to {last:.4g} (mean of the last {min(25, steps)})"
    if last < first:
        return f"loss fell from {first:.4g} {span}"
    how = "rose" if last > first else "did not fall"
    return (
        f"loss {how} from {first:.4g} {span}: {steps} steps did not lower it, so the new rows fit the pairs no "
        f"better than their starting copies; tune more steps, or none"
    )


def _check(table: Tensor, trained_rows: int, steps: int, batch: int, passage: int, query: int) -> None:
    if table.dim() != 2:
        raise ValueError(f"a position table must be 2-D (N, C), got shape {tuple(table.shape)}")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"--finetune takes a positive number of steps, got {steps!r}")
    if not 0 < trained_rows < table.shape[0]:
        raise ValueError(f"trained_rows must lie in 1..{table.shape[0] - 1}, got {trained_rows!r}")
    if batch < 2:
        raise ValueError(f"batch must be at least 2 (the other pairs are the negatives), got {batch!r}")
    if not 0 < query < passage:
        raise ValueError(f"query ({query}) must be shorter than the passage ({passage}) and positive")


def _pairs(tokens, starts, rng: random.Random, batch: int, passage: int, query: int, trained_rows: int, rows: int):
    passages, queries, skips = [], [], []
    lowest = max(0, trained_rows - passage // 2)  # the span reaches the new rows
    highest = rows - passage - 2  # room for [SEP] after it
    for _ in range(batch):
        begin = rng.randint(0, len(tokens) - passage - 1)
        while begin > 0 and not starts[begin]:
            begin -= 1
        span = tokens[begin : begin + passage]
        inside = rng.randint(0, passage - query)
        passages.append(span)
        queries.append(span[inside : inside + query])
        skips.append(rng.randint(lowest, highest))
    return passages, queries, skips


def _embed(model, tokenizer, pieces: list[list[int]], skips: list[int] | None) -> Tensor:
    """L2-normalised mean-pooled embeddings; with ``skips``, piece ``i`` sits at ``skips[i] + 1 ..``."""
    ids = torch.tensor([[tokenizer.cls_token_id, *p, tokenizer.sep_token_id] for p in pieces])  # (B, T)
    if skips is None:
        hidden = model(input_ids=ids).last_hidden_state
    else:
        positions = torch.tensor([[0, *range(u + 1, u + ids.shape[1])] for u in skips])  # (B, T), [CLS] at 0
        hidden = model(input_ids=ids, position_ids=positions, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    return torch.nn.functional.normalize(hidden.mean(1), dim=-1)  # (B, C)


def _with_table(model, weight: torch.nn.Parameter):
    """``model`` reading its positions from ``weight`` (a BERT-style model that takes ``position_ids``)."""
    import inspect

    if "position_ids" not in inspect.signature(model.forward).parameters:
        raise ValueError(f"--finetune needs a model whose forward takes position_ids; {type(model).__name__} does not")
    table = torch.nn.Embedding(*weight.shape)
    table.weight = weight
    model.embeddings.position_embeddings = table
    return model
