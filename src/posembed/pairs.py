"""BERT inputs for one text or a sentence pair: ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``.

Segment (token type) ids are 0 for ``[CLS] A [SEP]`` and 1 for ``B [SEP]`` (Devlin et al. 2019,
Figure 2); padding gets segment 0, attention mask 0 and position 0. Position ids count
``0..n-1`` over each row's real tokens (:func:`posembed.positions.positions_from_mask`), so
left and right padding embed the same. The result equals what the Hugging Face tokenizer
itself returns for the same texts, plus the position ids, and a text too long for the position
table is an error rather than a silent truncation (``truncation=True`` asks for it).

Example (any tokenizer with ``[CLS]``/``[SEP]``/``[PAD]`` ids works; here a toy one):

    >>> class Toy:
    ...     cls_token_id, sep_token_id, pad_token_id, model_max_length = 1, 2, 0, 16
    ...     def __call__(self, texts, add_special_tokens=False):
    ...         return {"input_ids": [[len(w) + 2 for w in t.split()] for t in texts]}
    >>> batch = encode_texts(Toy(), ["the cat sat", "hi"], ["yes", "no"])
    >>> batch.input_ids
    tensor([[1, 5, 5, 5, 2, 5, 2],
            [1, 4, 2, 4, 2, 0, 0]])
    >>> batch.token_type_ids
    tensor([[0, 0, 0, 0, 0, 1, 1],
            [0, 0, 0, 1, 1, 0, 0]])
    >>> batch.position_ids
    tensor([[0, 1, 2, 3, 4, 5, 6],
            [0, 1, 2, 3, 4, 0, 0]])

``truncation=True`` cuts rows to ``max_length``, a pair's longer text first:

    >>> encode_texts(Toy(), "a bb ccc dddd", "ee", max_length=6, truncation=True).input_ids
    tensor([[1, 3, 4, 2, 4, 2]])
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import Tensor

from posembed.positions import positions_from_mask

__all__ = ["EncodedBatch", "encode_texts", "TextTooLongError"]

#: Hugging Face's "no limit" model_max_length is a huge sentinel; above this means no limit
_NO_LIMIT = 1_000_000


@dataclass(frozen=True)
class EncodedBatch:
    """Model inputs for a batch of texts or pairs, each ``(B, T)`` long."""

    input_ids: Tensor
    token_type_ids: Tensor
    position_ids: Tensor
    attention_mask: Tensor
    #: tokens each row had before truncation (special tokens included); equal to the row's
    #: length when nothing was cut
    full_lengths: tuple[int, ...] = ()

    @property
    def truncated(self) -> bool:
        """Whether any row was cut to fit ``max_length``."""
        return any(full > int(mask.sum()) for full, mask in zip(self.full_lengths, self.attention_mask))

    def embedding_inputs(self) -> dict[str, Tensor]:
        """``input_ids``, ``token_type_ids`` and ``position_ids``: ``emb(**batch.embedding_inputs())``."""
        return {"input_ids": self.input_ids, "token_type_ids": self.token_type_ids, "position_ids": self.position_ids}


def encode_texts(
    tokenizer: Any,
    texts_a: str | Sequence[str],
    texts_b: str | Sequence[str] | None = None,
    *,
    max_length: int | None = None,
    padding: bool | str = True,
    truncation: bool = False,
) -> EncodedBatch:
    """Tokenize texts (or pairs) into BERT inputs, batched and padded.

    Args:
        tokenizer: a Hugging Face tokenizer with ``[CLS]``, ``[SEP]`` and ``[PAD]`` tokens.
        texts_a: one text or a list of texts (first segment).
        texts_b: ``None``, or as many second-segment texts as ``texts_a``.
        max_length: most tokens a row may have (with the special tokens): the position
            table's size. ``None`` uses ``tokenizer.model_max_length`` when it is set.
        padding: ``True`` (or ``"longest"``) pads to the longest row, ``"max_length"`` to
            ``max_length``, ``False`` requires rows of equal length. The side follows
            ``tokenizer.padding_side``.
        truncation: cut rows longer than ``max_length`` instead of refusing them; a pair loses
            tokens from its longer text first (``"longest_first"``, as Hugging Face tokenizers do).

    Returns:
        :class:`EncodedBatch` with ``(B, T)`` tensors.

    Raises:
        TextTooLongError: a row longer than ``max_length`` without ``truncation`` (a ``ValueError``
            naming both numbers).
        ValueError: mismatched lists, a text that is not valid Unicode (a lone surrogate; naming it).
    """
    list_a, list_b = _as_lists(texts_a, texts_b)
    cls_id, sep_id = _special_ids(tokenizer)
    pieces_a = _tokenize(tokenizer, list_a)
    pieces_b = _tokenize(tokenizer, list_b) if list_b is not None else [None] * len(list_a)
    limit = _limit(tokenizer, max_length)
    extra = 2 if list_b is None else 3
    full_lengths = tuple(len(a) + len(b or ()) + extra for a, b in zip(pieces_a, pieces_b))
    if truncation and limit is not None:
        pieces = [_truncate(a, b, limit) for a, b in zip(pieces_a, pieces_b)]
        pieces_a, pieces_b = [a for a, _ in pieces], [b for _, b in pieces]
    rows = [_with_special_tokens(cls_id, sep_id, a, b) for a, b in zip(pieces_a, pieces_b)]
    _check_lengths(rows, limit, pair=list_b is not None)
    return _pad(rows, tokenizer, _target_length(rows, padding, limit), full_lengths)


class TextTooLongError(ValueError):
    """A row longer than ``max_length`` without ``truncation``: which one, its tokens and the limit."""

    def __init__(self, index: int, tokens: int, limit: int, layout: str) -> None:
        self.index, self.tokens, self.limit, self.layout = index, tokens, limit, layout
        super().__init__(
            f"text {index} encodes to {tokens} tokens ({layout}), but the position table holds "
            f"max_length={limit} positions; shorten the text, or use a position scheme without a length limit"
        )


def _as_lists(texts_a, texts_b) -> tuple[list[str], list[str] | None]:
    list_a = [texts_a] if isinstance(texts_a, str) else list(texts_a)
    list_b = None if texts_b is None else ([texts_b] if isinstance(texts_b, str) else list(texts_b))
    if not list_a:
        raise ValueError("texts_a is empty: give at least one text")
    bad = [t for t in list_a + (list_b or []) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"texts must be strings, got {type(bad[0]).__name__}: {bad[0]!r}")
    if list_b is not None and len(list_b) != len(list_a):
        raise ValueError(f"texts_a has {len(list_a)} texts but texts_b has {len(list_b)}; pairs need equal counts")
    for name, texts, given in (("texts_a", list_a, texts_a), ("texts_b", list_b or [], texts_b)):
        for index, text in enumerate(texts):
            _check_encodable(text, name if isinstance(given, str) else f"{name}[{index}]")
    return list_a, list_b


def _check_encodable(text: str, name: str) -> None:
    """Tokenizers need valid Unicode: a lone surrogate (e.g. from undecodable bytes) is named here."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{name} cannot be encoded: character {text[error.start]!r} at index {error.start} is a lone "
            f"surrogate, not valid Unicode (was the text decoded from non-UTF-8 bytes?)"
        ) from None


def _special_ids(tokenizer: Any) -> tuple[int, int]:
    cls_id, sep_id = getattr(tokenizer, "cls_token_id", None), getattr(tokenizer, "sep_token_id", None)
    if cls_id is None or sep_id is None:
        raise ValueError(
            f"{type(tokenizer).__name__} has no [CLS]/[SEP] token (cls_token_id={cls_id}, sep_token_id={sep_id}); "
            f"encode_texts builds BERT-style inputs"
        )
    return cls_id, sep_id


def _tokenize(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    # verbose=False: transformers' own "Token indices sequence length is longer than ..." warning
    # would come before the length is checked here (where it is an error, or a truncation asked for)
    quiet = {"verbose": False} if _takes_verbose(tokenizer) else {}
    return tokenizer(texts, add_special_tokens=False, **quiet)["input_ids"]


def _takes_verbose(tokenizer: Any) -> bool:
    try:
        return "verbose" in inspect.signature(tokenizer).parameters
    except (TypeError, ValueError):  # no signature to read
        return False


def _with_special_tokens(cls_id: int, sep_id: int, a: list[int], b: list[int] | None) -> tuple[list[int], list[int]]:
    """``([CLS] A [SEP] (B [SEP]), segment ids)`` for one row."""
    ids = [cls_id, *a, sep_id]
    types = [0] * len(ids)
    if b is not None:
        ids += [*b, sep_id]
        types += [1] * (len(b) + 1)
    return ids, types


def _truncate(a: list[int], b: list[int] | None, limit: int) -> tuple[list[int], list[int] | None]:
    """Cut ``A`` (and ``B``) to fit ``limit`` tokens with the special tokens; a pair's longer text loses first.

    With both texts cut, the budget is split evenly, the odd token going to the text that was
    longer (to ``B`` on a tie): what Hugging Face's fast tokenizers do for ``"longest_first"``.
    """
    if b is None:
        return a[: max(limit - 2, 0)], None
    budget = limit - 3
    if budget < 0:
        raise ValueError(f"max_length={limit} leaves no room for a pair's [CLS] A [SEP] B [SEP]; give at least 3")
    if len(a) + len(b) <= budget:
        return a, b
    if len(a) > len(b):
        keep_b = min(len(b), budget // 2)
        return a[: budget - keep_b], b[:keep_b]
    keep_a = min(len(a), budget // 2)
    return a[:keep_a], b[: budget - keep_a]


def _limit(tokenizer: Any, max_length: int | None) -> int | None:
    if max_length is not None:
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
            raise ValueError(f"max_length must be an int >= 2 (room for [CLS] and [SEP]), got {max_length!r}")
        return max_length
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and limit < _NO_LIMIT else None


def _check_lengths(rows: list[tuple[list[int], list[int]]], limit: int | None, *, pair: bool) -> None:
    if limit is None:
        return
    for index, (ids, _) in enumerate(rows):
        if len(ids) > limit:
            raise TextTooLongError(index, len(ids), limit, "[CLS] A [SEP] B [SEP]" if pair else "[CLS] A [SEP]")


def _target_length(rows: list[tuple[list[int], list[int]]], padding: bool | str, limit: int | None) -> int:
    lengths = [len(ids) for ids, _ in rows]
    if padding is True or padding == "longest":
        return max(lengths)
    if padding == "max_length":
        if limit is None:
            raise ValueError("padding='max_length' needs max_length (the tokenizer sets no model_max_length)")
        return limit
    if padding is False:
        if len(set(lengths)) > 1:
            raise ValueError(f"padding=False but the rows have different lengths {lengths}; use padding=True")
        return lengths[0]
    raise ValueError(f"padding must be True, False, 'longest' or 'max_length', got {padding!r}")


def _pad(rows: list[tuple[list[int], list[int]]], tokenizer: Any, length: int,
         full_lengths: tuple[int, ...]) -> EncodedBatch:
    pad_id = getattr(tokenizer, "pad_token_id", None)
    if pad_id is None and any(len(ids) < length for ids, _ in rows):
        raise ValueError(f"{type(tokenizer).__name__} has no pad token; cannot pad rows to {length} tokens")
    pad_type = getattr(tokenizer, "pad_token_type_id", 0)
    left = getattr(tokenizer, "padding_side", "right") == "left"
    input_ids = torch.full((len(rows), length), pad_id if pad_id is not None else 0, dtype=torch.long)
    token_type_ids = torch.full((len(rows), length), pad_type, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
    for row, (ids, types) in enumerate(rows):
        span = slice(length - len(ids), length) if left else slice(0, len(ids))
        input_ids[row, span] = torch.tensor(ids)
        token_type_ids[row, span] = torch.tensor(types)
        attention_mask[row, span] = 1
    return EncodedBatch(input_ids, token_type_ids, positions_from_mask(attention_mask), attention_mask, full_lengths)
