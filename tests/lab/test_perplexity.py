"""The lab's one validation loss (:mod:`posembed.lab.tasks.perplexity`: ``val_loss`` and ``lm_perplexity``,
used by the char-LM task and the context study) on models whose next-character distribution is
known, checked to the digit.

The computation under test is the perplexity (which windows are scored, how the loss is summed
and how many tokens it is divided by), so the models are hand-built: fixed logits from a table.
The loss is summed in fp32 (as the study computes it), hence a relative tolerance of 1e-6.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from posembed.lab.tasks.perplexity import lm_perplexity, val_loss


class TableModel(nn.Module):
    """Next-character log-probabilities ``log_p[current character]``: a bigram model, no training."""

    def __init__(self, probabilities: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("log_p", probabilities.log())
        self.calls: list[tuple[int, ...]] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, V)
        self.calls.append(tuple(ids.shape))
        return self.log_p[ids]


def _successor_model(vocab: int) -> TableModel:
    """P(next = current + 1 mod V) = 1/2, every other character 1/(2 (V - 1))."""
    table = torch.full((vocab, vocab), 0.5 / (vocab - 1), dtype=torch.float64)
    table[torch.arange(vocab), (torch.arange(vocab) + 1) % vocab] = 0.5
    return TableModel(table)


def test_uniform_next_character_distribution_has_perplexity_the_vocabulary_size():
    val = torch.randint(0, 7, (200,), generator=torch.Generator().manual_seed(0))
    model = TableModel(torch.full((7, 7), 1 / 7, dtype=torch.float64))
    for length, windows, batch in ((10, 5, 2), (16, 100, 8), (199, 3, 1)):
        assert lm_perplexity(model, val, length, windows=windows, batch=batch) == pytest.approx(7.0, rel=1e-6)


def test_bigram_perplexity_to_the_digit_over_exactly_the_scored_windows():
    val = torch.tensor([0, 1, 2, 3, 0, 1, 3, 2, 0, 3, 3])  # two windows of 4 fit (chars 0-4 and 4-8), not a third
    model = _successor_model(4)
    # window 0 predicts 1, 2, 3, 0 after 0, 1, 2, 3: four successors; window 1 predicts 1, 3, 2, 0 after
    # 0, 1, 3, 2: one successor (0 -> 1), three others at 1/6. 8 scored tokens in all.
    expected = math.exp(-(5 * math.log(0.5) + 3 * math.log(0.5 / 3)) / 8)
    assert expected == pytest.approx(2 ** (5 / 8) * 6 ** (3 / 8), rel=1e-15)
    assert lm_perplexity(model, val, 4, windows=10, batch=8) == pytest.approx(3.019607, abs=5e-7)
    assert lm_perplexity(model, val, 4, windows=10, batch=1) == pytest.approx(expected, rel=1e-6)
    assert model.calls == [(2, 4), (1, 4), (1, 4)]  # two windows, batched then one by one; no window past the end
    # one window only: 4 successors of 4, perplexity 2 exactly
    assert lm_perplexity(model, val, 4, windows=1) == pytest.approx(2.0, rel=1e-6)


def test_windows_are_consecutive_and_each_scores_its_own_last_character():
    # length 3: windows are chars 0-3 and 3-6 (the next window starts on the last target of this one)
    val = torch.tensor([0, 1, 2, 3, 3, 3, 3])
    model = _successor_model(4)
    # window 0: 0->1, 1->2, 2->3 all successors; window 1: 3->3, 3->3, 3->3 none (1/6 each)
    expected = math.exp(-(3 * math.log(0.5) + 3 * math.log(1 / 6)) / 6)
    assert lm_perplexity(model, val, 3, windows=2) == pytest.approx(expected, rel=1e-6)
    assert lm_perplexity(model, val, 3, windows=2) == pytest.approx(math.sqrt(12), rel=1e-6)


def test_windows_go_through_the_model_8_at_a_time_by_default():
    val = torch.randint(0, 4, (41,), generator=torch.Generator().manual_seed(1))  # 10 windows of 4, exactly
    model = _successor_model(4)
    by_default = lm_perplexity(model, val, 4, windows=10)
    assert model.calls == [(8, 4), (2, 4)]
    model.calls.clear()
    assert val_loss(model, val, 4, windows=10) == pytest.approx(math.log(by_default), rel=1e-6)
    assert model.calls == [(8, 4), (2, 4)]  # val_loss's own default too
    assert by_default == pytest.approx(lm_perplexity(model, val, 4, windows=10, batch=1), rel=1e-6)  # fp32 sums


def test_too_short_a_split_gives_none():
    model = _successor_model(4)
    assert lm_perplexity(model, torch.tensor([0, 1, 2]), 3, windows=4) is None
    assert model.calls == []


def test_val_loss_is_the_log_of_the_perplexity_and_sums_exactly_the_scored_targets():
    # 3 windows of 2 over 0 1 2 3 0 1 2 (7 chars: (7 - 1) // 2 = 3 windows, all 6 targets successors)
    val = torch.tensor([0, 1, 2, 3, 0, 1, 2])
    model = _successor_model(4)
    assert val_loss(model, val, 2, windows=5) == pytest.approx(math.log(2), rel=1e-6)
    # two non-successor targets (0 -> 0 and 0 -> 2, the last window) among the 6
    val = torch.tensor([0, 1, 2, 3, 0, 0, 2])
    expected = -(4 * math.log(0.5) + 2 * math.log(0.5 / 3)) / 6
    assert val_loss(model, val, 2, windows=5) == pytest.approx(expected, rel=1e-6)
    assert lm_perplexity(model, val, 2, windows=5) == pytest.approx(math.exp(expected), rel=1e-6)
    # the first two windows only: 4 successors, loss ln 2
    assert val_loss(model, val, 2, windows=2) == pytest.approx(math.log(2), rel=1e-6)


def test_no_window_is_padded_nor_runs_past_the_end():
    # 10 chars, length 4: (10 - 1) // 4 = 2 windows (targets up to index 8); index 9 is never fed nor scored
    val = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, 0, 2])
    model = _successor_model(4)
    assert val_loss(model, val, 4, windows=10) == pytest.approx(math.log(2), rel=1e-6)
    assert model.calls == [(2, 4)]
    # exactly length + 1 chars: one window; length chars: none
    assert val_loss(model, val[:5], 4, windows=3) == pytest.approx(math.log(2), rel=1e-6)
    assert val_loss(model, val[:4], 4, windows=3) is None
    assert val_loss(model, val[:0], 4, windows=3) is None
    assert val_loss(model, val, 4, windows=0) is None


def test_every_target_counts_whatever_its_id():
    # no ignore index: a target 0 (a padding id elsewhere) or the last id is scored like any other
    model = _successor_model(3)
    val = torch.tensor([2, 0, 0, 0])  # 2 -> 0 successor (1/2); 0 -> 0 and 0 -> 0 not (1/4 each)
    expected = -(math.log(0.5) + 2 * math.log(0.25)) / 3
    assert val_loss(model, val, 3, windows=1) == pytest.approx(expected, rel=1e-6)


def test_the_last_batch_is_smaller_and_a_batch_larger_than_the_windows_is_one_call():
    val = torch.randint(0, 4, (22,), generator=torch.Generator().manual_seed(2))  # 7 windows of 3
    model = _successor_model(4)
    one_by_one = val_loss(model, val, 3, windows=7, batch=1)
    for batch, calls in ((3, [(3, 3), (3, 3), (1, 3)]), (7, [(7, 3)]), (50, [(7, 3)])):
        model.calls.clear()
        assert val_loss(model, val, 3, windows=7, batch=batch) == pytest.approx(one_by_one, rel=1e-6)
        assert model.calls == calls
    # by hand: log-probabilities of the 21 targets from the table
    targets, inputs = val[1:22], val[:21]
    expected = -float(model.log_p[inputs, targets].sum()) / 21
    assert one_by_one == pytest.approx(expected, rel=1e-6)


def test_the_loss_is_computed_on_fp32_logits():
    class Half(nn.Module):
        def forward(self, ids):
            return torch.zeros(*ids.shape, 5, dtype=torch.bfloat16)

    assert val_loss(Half(), torch.arange(5).repeat(4), 4, windows=4) == pytest.approx(math.log(5), rel=1e-6)


@pytest.mark.parametrize(
    "key, value",
    [("length", 0), ("length", -2), ("length", 2.0), ("windows", -1), ("windows", True), ("batch", 0), ("batch", None)],
)
def test_bad_sizes_name_the_value_and_the_limit(key, value):
    given = {"length": 4, "windows": 2, "batch": 8, key: value}
    least = 0 if key == "windows" else 1
    with pytest.raises(ValueError, match=rf"^{key} must be an integer >= {least}, got {value!r}$"):
        val_loss(
            _successor_model(4), torch.arange(20) % 4, given["length"], windows=given["windows"], batch=given["batch"]
        )


@pytest.mark.parametrize("scored", [(), [2], (2, 0), (2, 9)])
def test_matched_losses_names_a_bad_scored(scored):
    from posembed.lab.tasks.perplexity import matched_losses

    with pytest.raises(ValueError, match="scored"):
        matched_losses(_successor_model(4), torch.arange(40) % 4, 8, scored=scored, span=8, windows=2)
