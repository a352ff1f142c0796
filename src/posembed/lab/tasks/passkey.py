"""Passkey retrieval at the character level (Mohtashami & Jaggi 2023, "Landmark Attention"; the
test the YaRN, PI and LongRoPE papers report).

A document of exactly ``length`` characters::

    <filler ...> The pass key is 48213. <filler ...> What is the pass key? The pass key is 48213
    |---- key_offset ----|                                               |-- prompt --|-answer-|

The model reads the whole document in one forward pass; the key counts as retrieved when the
argmax at every answer position is the right digit. That is exactly greedy decoding's exact
match: greedy decoding emits the key iff each digit is the argmax given the right digits before
it (ties broken alike), so one teacher-forced pass replaces ``digits`` decoding passes
(``tests/lab/test_passkey.py`` checks both agree).

Filler: the published repeated sentences ("The grass is green. The sky is blue. ..."), not
tinyshakespeare windows. They hold no digit by construction (tinyshakespeare holds ``3``), so the
key can only come from the key sentence; they let the key start exactly on a sentence boundary;
and they are what the published figures used, so the task is the same one at a smaller scale.
Their characters all belong to tinyshakespeare's vocabulary; :func:`passkey_vocabulary` adds the
ten digits (tinyshakespeare has only ``3``), so one model can learn both the char LM and passkey.

Depth: the key sentence starts at ``round(depth * room)`` (``room = length - key sentence -
question - answer``), moved to the nearest filler sentence start; it therefore lies within half a
filler sentence (:data:`MAX_ALIGN` characters) of the requested offset, and exactly on it at
depth 0 and 1. The filler after the key continues the same sentence stream (cut where the
question begins).

>>> ex = make_example(120, 0.5, torch.Generator().manual_seed(0))
>>> len(ex.text), ex.text[ex.key_offset:].startswith("The pass key is " + ex.key), ex.text.endswith(ex.key)
(120, True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = [
    "FILLER_SENTENCES",
    "QUESTION",
    "DIGITS",
    "MAX_ALIGN",
    "PasskeyExample",
    "make_example",
    "key_sentence",
    "min_length",
    "passkey_vocabulary",
    "encode",
    "exact_match",
    "answer_correct",
    "passkey_accuracy",
    "training_rows",
    "depth_grid",
]

#: the published filler, repeated (digit-free)
FILLER_SENTENCES = (
    "The grass is green. ",
    "The sky is blue. ",
    "The sun is yellow. ",
    "Here we go. ",
    "There and back again. ",
)
KEY_PREFIX = "The pass key is "
QUESTION = "What is the pass key? The pass key is "
DIGITS = "0123456789"
#: the largest distance between the requested and the actual key offset (half the longest sentence)
MAX_ALIGN = max(len(s) for s in FILLER_SENTENCES) // 2 + 1


def key_sentence(key: str) -> str:
    """``"The pass key is <key>. "`` (the planted needle)."""
    return f"{KEY_PREFIX}{key}. "


def min_length(digits: int = 5) -> int:
    """The shortest document: key sentence, question and answer, no filler."""
    return len(key_sentence("0" * digits)) + len(QUESTION) + digits


@dataclass(frozen=True)
class PasskeyExample:
    """One document. ``text`` has the requested length; the answer is its last ``len(key)`` chars.

    Attributes:
        text: the whole document (prompt + answer).
        key: the planted number (decimal digits, no leading zero).
        key_offset: index in ``text`` where the key sentence starts.
        depth: the requested depth (0 = first character, 1 = just before the question).
    """

    text: str
    key: str
    key_offset: int
    depth: float

    @property
    def answer_start(self) -> int:
        """Index of the first answer digit in ``text``."""
        return len(self.text) - len(self.key)


def _filler(count: int) -> tuple[str, list[int]]:
    """The first ``count`` characters of the repeated filler and every sentence start in them."""
    starts, pieces, total, index = [], [], 0, 0
    while total < count:
        sentence = FILLER_SENTENCES[index % len(FILLER_SENTENCES)]
        starts.append(total)
        pieces.append(sentence)
        total += len(sentence)
        index += 1
    return "".join(pieces)[:count], starts


def _random_key(generator: torch.Generator, digits: int) -> str:
    first = int(torch.randint(1, 10, (1,), generator=generator))
    rest = torch.randint(0, 10, (digits - 1,), generator=generator).tolist()
    return "".join(str(d) for d in [first, *rest])


def make_example(length: int, depth: float, generator: torch.Generator, *, digits: int = 5) -> PasskeyExample:
    """A document of exactly ``length`` characters with a random ``digits``-digit key at ``depth``.

    Deterministic given the generator's state. ``ValueError`` if ``length`` is below
    :func:`min_length` or ``depth`` outside [0, 1].
    """
    if not isinstance(digits, int) or not 1 <= digits <= 18:
        raise ValueError(f"digits must be an int in 1..18, got {digits!r}")
    if not isinstance(length, int) or length < min_length(digits):
        raise ValueError(
            f"length={length!r} is below the minimum {min_length(digits)} (key sentence + question + answer)"
        )
    if not (isinstance(depth, (int, float)) and 0.0 <= depth <= 1.0):
        raise ValueError(f"depth must be a number in [0, 1], got {depth!r}")
    key = _random_key(generator, digits)
    needle = key_sentence(key)
    room = length - len(needle) - len(QUESTION) - digits
    filler, starts = _filler(room + len(FILLER_SENTENCES[0]) * 4)
    candidates = [s for s in starts if s <= room] + [room]
    wanted = round(depth * room)
    offset = min(candidates, key=lambda s: (abs(s - wanted), s))
    text = filler[:offset] + needle + filler[offset:room] + QUESTION + key
    return PasskeyExample(text=text, key=key, key_offset=offset, depth=float(depth))


def passkey_vocabulary(chars: Sequence[str]) -> list[str]:
    """``chars`` (a char LM's vocabulary) plus the ten digits, sorted; ``ValueError`` if a filler,
    key-sentence or question character is missing."""
    needed = set("".join(FILLER_SENTENCES) + key_sentence("") + QUESTION)
    missing = sorted(needed - set(chars))
    if missing:
        raise ValueError(f"the vocabulary lacks the passkey characters {''.join(missing)!r}")
    return sorted(set(chars) | set(DIGITS))


def encode(text: str, stoi: dict[str, int]) -> Tensor:
    """Token ids ``(T,)`` of ``text``; ``ValueError`` naming a character outside the vocabulary."""
    try:
        return torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    except KeyError as error:
        raise ValueError(f"character {error.args[0]!r} is not in the vocabulary") from None


def exact_match(predicted: str, key: str) -> bool:
    """All digits right, in order, and nothing missing: ``predicted[:len(key)] == key``.

    >>> exact_match("48213", "48213"), exact_match("4821", "48213"), exact_match("48203", "48213")
    (True, False, False)
    """
    return len(predicted) >= len(key) and predicted[: len(key)] == key


def answer_correct(logits: Tensor, ids: Tensor, digits: int) -> Tensor:
    """Whether every answer digit is the argmax of the logits at the position before it.

    Args:
        logits: ``(B, T, V)`` of the whole documents. ids: ``(B, T)``. digits: answer length.

    Returns:
        ``(B,)`` bool.
    """
    predicted = logits[:, -digits - 1 : -1].argmax(dim=-1)  # (B, digits)
    return (predicted == ids[:, -digits:]).all(dim=1)


@torch.no_grad()
def passkey_accuracy(
    model: nn.Module, stoi: dict[str, int], length: int, depth: float, *, samples: int, seed: int,
    digits: int = 5, batch: int = 16,
) -> float:  # fmt: skip
    """Fraction of ``samples`` documents of ``length`` (key at ``depth``) whose key is retrieved."""
    generator = torch.Generator().manual_seed(seed)
    examples = [make_example(length, depth, generator, digits=digits) for _ in range(samples)]
    correct = 0
    for first in range(0, samples, batch):
        ids = torch.stack([encode(ex.text, stoi) for ex in examples[first : first + batch]])  # (B, T)
        correct += int(answer_correct(model(ids), ids, digits).sum())
    return correct / samples


def training_rows(
    generator: torch.Generator, count: int, context: int, stoi: dict[str, int], *, digits: int = 5, ignore: int = -100,
    prefix_text: Tensor | None = None, adjacent: bool = False,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``count`` rows of ``context + 1`` characters ending in a passkey document, as (inputs, targets).

    Each document has a random length in ``[min_length(digits), context + 1]`` and a random depth
    (``adjacent``: the shortest document, the key sentence right before the question, no filler);
    the rest of the row, before it, is a random window of ``prefix_text`` (encoded text, e.g. the
    char-LM training split) or more filler. Varying where the key and the question fall is what
    makes the model retrieve by content: with one fixed document length a model learns the key's
    distance from the question instead, and fails at any other length.

    The planted key digits are unpredictable, so their targets are ``ignore``; every other next
    character (prefix, filler, question, answer) is scored.

    Shape: two tensors ``(count, context)``.
    """
    rows, targets = [], []
    for _ in range(count):
        longest = min_length(digits) if adjacent else context + 1
        length = int(torch.randint(min_length(digits), longest + 1, (), generator=generator))
        depth = float(torch.rand((), generator=generator))
        ex = make_example(length, depth, generator, digits=digits)
        pad = context + 1 - length
        if prefix_text is not None and pad:
            start = int(torch.randint(0, len(prefix_text) - pad, (), generator=generator))
            prefix = prefix_text[start : start + pad]
        else:
            prefix = encode(_filler(pad)[0], stoi)
        ids = torch.cat([prefix, encode(ex.text, stoi)])  # (context + 1,)
        target = ids[1:].clone()
        start = pad + ex.key_offset + len(KEY_PREFIX) - 1  # target index of the first planted digit
        target[start : start + digits] = ignore
        rows.append(ids[:-1])
        targets.append(target)
    return torch.stack(rows), torch.stack(targets)


def depth_grid(count: int) -> tuple[float, ...]:
    """``count`` evenly spaced depths from 0 to 1 (``count >= 2``), as published heatmaps use.

    >>> depth_grid(5)
    (0.0, 0.25, 0.5, 0.75, 1.0)
    """
    if count < 2:
        raise ValueError(f"a depth grid needs at least 2 depths, got {count}")
    return tuple(round(i / (count - 1), 6) for i in range(count))
