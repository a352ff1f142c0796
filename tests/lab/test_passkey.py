"""Passkey retrieval: exact lengths and depths, no key in the filler, exact-match scoring."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from posembed.lab.tasks.passkey import (
    DIGITS,
    FILLER_SENTENCES,
    KEY_PREFIX,
    MAX_ALIGN,
    QUESTION,
    answer_correct,
    depth_grid,
    encode,
    exact_match,
    key_sentence,
    make_example,
    min_length,
    passkey_vocabulary,
    training_rows,
)

VOCAB = passkey_vocabulary(sorted(set("".join(FILLER_SENTENCES) + QUESTION + KEY_PREFIX + ".")))
STOI = {ch: i for i, ch in enumerate(VOCAB)}


def _room(length: int, digits: int = 5) -> int:
    return length - len(key_sentence("0" * digits)) - len(QUESTION) - digits


@pytest.mark.parametrize("length", [min_length(), min_length() + 1, 97, 128, 500, 1031])
@pytest.mark.parametrize("depth", [0.0, 0.1, 0.25, 1 / 3, 0.5, 0.9, 1.0])
def test_length_is_exact_and_key_sits_at_the_requested_depth(length, depth):
    ex = make_example(length, depth, torch.Generator().manual_seed(3))
    assert len(ex.text) == length
    assert ex.text[ex.key_offset :].startswith(key_sentence(ex.key))
    assert ex.text.endswith(QUESTION + ex.key)
    assert ex.answer_start == length - 5
    wanted = round(depth * _room(length))
    assert abs(ex.key_offset - wanted) <= MAX_ALIGN
    if depth in (0.0, 1.0):
        assert ex.key_offset == wanted


def test_key_starts_on_a_filler_sentence_boundary_below_depth_one():
    for depth in depth_grid(9):
        ex = make_example(400, depth, torch.Generator().manual_seed(1))
        before = ex.text[: ex.key_offset]
        assert before == "" or before.endswith(". ") or (depth == 1.0 and ex.key_offset == _room(400))


def test_generator_is_deterministic_from_the_seed():
    a = [make_example(200, 0.5, torch.Generator().manual_seed(7)) for _ in range(2)]
    b = make_example(200, 0.5, torch.Generator().manual_seed(8))
    assert a[0] == a[1]
    assert a[0].key != b.key
    assert len(a[0].key) == 5 and a[0].key[0] != "0"


@pytest.mark.parametrize("seed", range(20))
def test_digits_appear_only_in_the_key_and_the_answer(seed):
    generator = torch.Generator().manual_seed(seed)
    ex = make_example(300, float(torch.rand((), generator=generator)), generator, digits=4)
    digit_positions = [i for i, ch in enumerate(ex.text) if ch in DIGITS]
    key_start = ex.key_offset + len(KEY_PREFIX)
    assert digit_positions == [*range(key_start, key_start + 4), *range(296, 300)]
    filler = ex.text[: ex.key_offset] + ex.text[ex.key_offset + len(key_sentence(ex.key)) : -len(QUESTION) - 4]
    assert not any(ch in DIGITS for ch in filler)
    assert not any(ch in DIGITS for ch in "".join(FILLER_SENTENCES) + QUESTION + KEY_PREFIX)


def test_bad_arguments_name_the_value_and_the_limit():
    generator = torch.Generator()
    with pytest.raises(ValueError, match=f"below the minimum {min_length()}"):
        make_example(min_length() - 1, 0.5, generator)
    with pytest.raises(ValueError, match=r"depth must be a number in \[0, 1\], got 1.5"):
        make_example(200, 1.5, generator)
    with pytest.raises(ValueError, match="lacks the passkey characters"):
        passkey_vocabulary(list("abc"))
    with pytest.raises(ValueError, match="'7' is not in the vocabulary"):
        encode("7", {"a": 0})


def test_exact_match_needs_every_digit_in_order():
    assert exact_match("48213", "48213")
    assert exact_match("48213.", "48213")  # what follows the key does not matter
    assert not exact_match("4821", "48213")  # a digit missing
    assert not exact_match("48231", "48213")  # order matters
    assert not exact_match("58213", "48213")
    assert not exact_match("", "48213")


class Oracle(nn.Module):
    """Predicts the next character of fixed documents, wrong at index ``wrong`` (if any)."""

    def __init__(self, docs: torch.Tensor, wrong: int | None = None) -> None:
        super().__init__()
        self.docs, self.wrong = docs, wrong

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[1]
        nxt = torch.cat([self.docs[:, 1:], self.docs[:, :1]], dim=1)[:, :length].clone()  # (B, T)
        if self.wrong is not None and self.wrong < length:
            nxt[:, self.wrong] = (nxt[:, self.wrong] + 1) % len(VOCAB)
        return nn.functional.one_hot(nxt, len(VOCAB)).float()  # (B, T, V)


def _greedy(model: nn.Module, prompt: torch.Tensor, digits: int) -> str:
    ids = prompt.clone()
    for _ in range(digits):
        ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return "".join(VOCAB[i] for i in ids[0, prompt.shape[1] :].tolist())


@pytest.mark.parametrize("wrong_digit", [None, 0, 2, 4])
def test_one_teacher_forced_pass_scores_like_greedy_decoding(wrong_digit):
    ex = make_example(120, 0.5, torch.Generator().manual_seed(4))
    ids = encode(ex.text, STOI).unsqueeze(0)  # (1, T)
    wrong = None if wrong_digit is None else ex.answer_start - 1 + wrong_digit
    model = Oracle(ids, wrong)
    greedy = _greedy(model, ids[:, : ex.answer_start], 5)
    assert bool(answer_correct(model(ids), ids, 5)) == exact_match(greedy, ex.key) == (wrong_digit is None)


def test_teacher_forcing_agrees_with_greedy_on_a_random_model():
    from posembed.nn.model.transformer import Decoder
    from posembed.schemes.rotary.rope import RotaryEmbedding

    torch.manual_seed(0)
    model = Decoder(len(VOCAB), dim=16, depth=1, num_heads=2, scheme=RotaryEmbedding(8)).eval()
    for seed in range(3):
        ex = make_example(90, 0.3, torch.Generator().manual_seed(seed), digits=2)
        ids = encode(ex.text, STOI).unsqueeze(0)
        with torch.no_grad():
            greedy = _greedy(model, ids[:, : ex.answer_start], 2)
            assert bool(answer_correct(model(ids), ids, 2)) == exact_match(greedy, ex.key)


def test_training_rows_score_everything_but_the_planted_key():
    inputs, targets = training_rows(torch.Generator().manual_seed(0), 6, 100, STOI, digits=5)
    assert inputs.shape == targets.shape == (6, 100)
    for row in range(6):
        ignored = (targets[row] == -100).nonzero().flatten().tolist()
        assert len(ignored) == 5 and ignored == list(range(ignored[0], ignored[0] + 5))
        text = "".join(VOCAB[i] for i in inputs[row].tolist())
        assert text[ignored[0] - len(KEY_PREFIX) + 1 : ignored[0] + 1] == KEY_PREFIX
        assert "".join(VOCAB[i] for i in targets[row, -5:].tolist()).isdigit()  # the answer is scored
