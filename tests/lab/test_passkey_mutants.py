"""Passkey documents, keys, scoring and training rows to the character: the cases that kill the
mutants ``python tools/mutate.py passkey`` found surviving ``tests/lab/test_passkey.py``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from posembed.lab.tasks.passkey import (
    DIGITS,
    FILLER_SENTENCES,
    KEY_PREFIX,
    QUESTION,
    depth_grid,
    encode,
    key_sentence,
    make_example,
    min_length,
    passkey_accuracy,
    passkey_vocabulary,
    training_rows,
)  # fmt: skip

VOCAB = passkey_vocabulary(sorted(set("".join(FILLER_SENTENCES) + QUESTION + KEY_PREFIX + ".")))
STOI = {ch: i for i, ch in enumerate(VOCAB)}


def test_min_length_is_key_sentence_question_and_answer():
    # "The pass key is " (16) + key + ". " (2), the question (38), the answer: 56 + 2 x digits
    assert (len(KEY_PREFIX), len(QUESTION)) == (16, 38)
    assert [min_length(d) for d in (1, 5, 18)] == [58, 66, 92]
    assert min_length() == 66


@pytest.mark.parametrize(
    ("length", "depth", "offset", "before", "after"),
    [
        # room = 120 - 23 - 38 - 5 = 54, wanted 27: sentence starts 0, 20, 37 -> 20 (7 away, not 10)
        (120, 0.5, 20, "The grass is green. ", "The sky is blue. The sun is yellow"),
        # wanted round(10 / 54 x 54) = 10: halfway between the starts 0 and 20, the earlier one wins
        (120, 10 / 54, 0, "", "The grass is green. The sky is blue. The sun is yellow"),
        # depth 1: the key sentence right before the question, the filler before it cut mid-sentence
        (120, 1.0, 54, "The grass is green. The sky is blue. The sun is yellow", ""),
        # room = 200 - 66 = 134, wanted 67: starts 0 20 37 56 68 90 107 124 -> 68 ("There and back again. ")
        (
            200,
            0.5,
            68,
            "The grass is green. The sky is blue. The sun is yellow. Here we go. ",
            "There and back again. The grass is green. The sky is blue. The sun",
        ),
    ],
    ids=["middle", "tie", "end", "fifth_sentence"],
)
def test_documents_to_the_character(length, depth, offset, before, after):
    ex = make_example(length, depth, torch.Generator().manual_seed(0))
    assert ex.key_offset == offset
    assert ex.text == before + key_sentence(ex.key) + after + QUESTION + ex.key


def test_the_filler_runs_through_every_published_sentence_in_order():
    ex = make_example(500, 0.0, torch.Generator().manual_seed(1))
    filler = ex.text[len(key_sentence(ex.key)) : -len(QUESTION) - 5]
    cycle = "".join(FILLER_SENTENCES)
    assert len(filler) == 500 - 66 and filler == (cycle * 6)[: len(filler)]


def test_keys_use_every_digit_and_never_lead_with_zero():
    generator = torch.Generator().manual_seed(5)
    keys = [make_example(80, 0.5, generator).key for _ in range(300)]
    assert all(len(key) == 5 and key.isdigit() for key in keys)
    assert {key[0] for key in keys} == set("123456789")
    assert {ch for key in keys for ch in key[1:]} == set(DIGITS)
    assert {len(make_example(min_length(d), 0.0, generator, digits=d).key) for d in (1, 18)} == {1, 18}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"digits": 0}, "digits must be an int in 1..18, got 0"),
        ({"digits": 19}, "digits must be an int in 1..18, got 19"),
        ({"digits": 5.0}, "digits must be an int in 1..18, got 5.0"),
        ({"length": 100.0}, "length=100.0 is below the minimum 66"),
        ({"length": 66.0}, "length=66.0 is below the minimum 66"),
        ({"length": 65}, "length=65 is below the minimum 66"),
        ({"depth": -0.01}, r"depth must be a number in \[0, 1\], got -0.01"),
        ({"depth": 1.01}, r"depth must be a number in \[0, 1\], got 1.01"),
        ({"depth": "0.5"}, r"depth must be a number in \[0, 1\], got '0.5'"),
    ],
)
def test_each_bad_argument_is_refused_by_name(kwargs, message):
    args = {"length": 100, "depth": 0.5, **kwargs}
    digits = {"digits": kwargs["digits"]} if "digits" in kwargs else {}
    with pytest.raises(ValueError, match=message):
        make_example(args["length"], args["depth"], torch.Generator(), **digits)


def test_the_bounds_themselves_are_accepted():
    generator = torch.Generator().manual_seed(0)
    for digits in (1, 18):
        assert len(make_example(min_length(digits), 0.5, generator, digits=digits).text) == min_length(digits)
    for depth in (0, 1, 0.0, 1.0):
        assert len(make_example(min_length(), depth, generator).text) == min_length()


def test_the_vocabulary_is_the_chars_plus_the_digits():
    chars = sorted(set("".join(FILLER_SENTENCES) + QUESTION + KEY_PREFIX + ".") | {"z"})
    assert passkey_vocabulary(chars) == sorted(set(chars) | set(DIGITS))
    with pytest.raises(ValueError, match=r"lacks the passkey characters 'T'"):
        passkey_vocabulary([ch for ch in chars if ch != "T"])


class KeyReader(nn.Module):
    """Reads the planted key from each document and predicts it as the answer, except where the key's
    first digit is odd; records every document it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.batches: list[int] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.batches.append(ids.shape[0])
        logits = torch.zeros(*ids.shape, len(VOCAB))  # (B, T, V)
        for row, document in enumerate(ids.tolist()):
            text = "".join(VOCAB[i] for i in document)
            self.seen.append(text)
            start = text.index(KEY_PREFIX) + len(KEY_PREFIX)
            key = text[start : text.index(".", start)]
            answer = key if int(key[0]) % 2 == 0 else key[::-1] + "0"
            for i, ch in enumerate(answer[: len(key)]):
                logits[row, len(text) - len(key) - 1 + i, STOI[ch]] = 1.0
        return logits


def test_passkey_accuracy_scores_every_sample_in_batches():
    model = KeyReader()
    accuracy = passkey_accuracy(model, STOI, 90, 0.25, samples=37, seed=11, batch=16)  # batches of 16, 16, 5
    generator = torch.Generator().manual_seed(11)
    expected = [make_example(90, 0.25, generator) for _ in range(37)]
    assert model.seen == [ex.text for ex in expected] and model.batches == [16, 16, 5]  # each document once, in order
    right = [ex for ex in expected if int(ex.key[0]) % 2 == 0 or ex.key == ex.key[::-1]]
    assert 0 < len(right) < 37 and accuracy == len(right) / 37
    again = KeyReader()
    assert passkey_accuracy(again, STOI, 90, 0.25, samples=37, seed=11) == accuracy  # the defaults: 5 digits
    assert again.seen == model.seen


def test_training_rows_prefix_is_one_window_of_the_text():
    context, base = 80, 1000
    prefix_text = torch.arange(base, base + 16)  # ids no document holds: the prefix is easy to see
    inputs, targets = training_rows(torch.Generator().manual_seed(2), 300, context, STOI, prefix_text=prefix_text)
    assert inputs.shape == targets.shape == (300, context)
    pads, starts = [], []
    for row in range(300):
        ids = torch.cat([inputs[row], targets[row, -1:]])  # the whole row: context + 1 ids
        pad = int((ids >= base).sum())
        prefix = ids[:pad]
        assert torch.equal(prefix, torch.arange(int(prefix[0]), int(prefix[0]) + pad)) if pad else True  # contiguous
        assert bool((ids[pad:] < len(VOCAB)).all())  # then the document, in the vocabulary
        assert torch.equal(targets[row, : max(pad - 1, 0)], ids[1:pad])  # the prefix's next ids are scored
        text = "".join(VOCAB[i] for i in ids[pad:].tolist())
        assert text.endswith(QUESTION + text[-5:]) and text[-6] == " " and len(text) >= min_length()  # 5 digits
        assert int((targets[row] == -100).sum()) == 5
        pads.append(pad)
        starts.append(int(prefix[0]) - base if pad else None)
    assert min(pads) == 0 and max(pads) == context + 1 - min_length()  # document lengths span min_length .. context + 1
    assert 0 in starts and all(
        s is None or s + p <= 16 for s, p in zip(starts, pads)
    )  # windows start at 0, stay inside


def test_training_rows_without_a_prefix_pad_with_filler():
    inputs, targets = training_rows(torch.Generator().manual_seed(3), 50, 100, STOI, digits=3, ignore=-7)
    for row in range(50):
        text = "".join(VOCAB[i] for i in inputs[row].tolist()) + VOCAB[int(targets[row, -1])]
        key_at = text.index(KEY_PREFIX) + len(KEY_PREFIX)
        n, stream = key_at - len(KEY_PREFIX), "".join(FILLER_SENTENCES) * 10
        assert any(
            text[:n] == stream[:pad] + stream[: n - pad] for pad in range(n + 1)
        )  # filler pad, the document's filler
        ignored = (targets[row] == -7).nonzero().flatten().tolist()
        assert ignored == [key_at - 1, key_at, key_at + 1]  # targets of the three planted digits, and only those


def test_depth_grid_values_and_its_lower_bound():
    assert depth_grid(2) == (0.0, 1.0)
    assert depth_grid(3) == (0.0, 0.5, 1.0)
    assert depth_grid(7) == (0.0, 0.166667, 0.333333, 0.5, 0.666667, 0.833333, 1.0)  # rounded to 6 places
    with pytest.raises(ValueError, match="a depth grid needs at least 2 depths, got 1"):
        depth_grid(1)


def test_encoding_names_the_missing_character():
    assert encode("The", STOI).tolist() == [STOI["T"], STOI["h"], STOI["e"]]
    with pytest.raises(ValueError, match="character '#' is not in the vocabulary"):
        encode("a#", STOI)
