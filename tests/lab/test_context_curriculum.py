"""The context study's training mix: the passkey-only curriculum and an all-passkey batch."""

from __future__ import annotations

import pytest
import torch

from posembed.lab.context.corpus import ContextData
from posembed.lab.context.presets import ContextConfig, get_context_preset
from posembed.lab.context.store import train_id_of
from posembed.lab.context.train import IGNORE, _batch, finetune_config
from posembed.lab.tasks.passkey import KEY_PREFIX, QUESTION, min_length


@pytest.fixture(scope="module")
def data():
    return ContextData.load("tinyshakespeare")


def _passkey_rows(targets: torch.Tensor) -> int:
    """Rows holding a planted key (its digits are the only IGNORE targets; LM windows have none)."""
    return int((targets == IGNORE).any(dim=1).sum())


@pytest.mark.parametrize("step, expected", [(0, 8), (3, 8), (4, 2), (9, 2)])
def test_batches_hold_only_passkey_rows_during_the_curriculum(data, step, expected):
    settings = ContextConfig(
        name="x",
        steps=10,
        context=80,
        batch=8,
        lr=1e-3,
        passkey_fraction=0.25,
        passkey_only_steps=4,
        passkey_adjacent_steps=0,
    )
    inputs, targets = _batch(data, torch.Generator().manual_seed(0), settings, step)
    assert inputs.shape == targets.shape == (8, 80)
    assert _passkey_rows(targets) == expected
    assert int((targets == IGNORE).sum()) == 5 * expected  # five planted digits per passkey row


def test_an_all_passkey_batch_has_no_lm_window(data):
    settings = ContextConfig(
        name="x",
        steps=1,
        context=80,
        batch=4,
        lr=1e-3,
        passkey_fraction=1.0,
        passkey_only_steps=0,
        passkey_adjacent_steps=0,
    )
    inputs, targets = _batch(data, torch.Generator().manual_seed(0), settings, 0)
    assert inputs.shape == (4, 80) and _passkey_rows(targets) == 4


def test_curriculum_is_a_training_field_and_checked():
    cfg = get_context_preset("context")
    assert cfg.passkey_only_steps == 800 and cfg.passkey_samples == 16
    other = ContextConfig(name="x", passkey_only_steps=0, passkey_adjacent_steps=0)
    assert other.train_id != ContextConfig(name="x").train_id  # models trained differently are not reused
    with pytest.raises(ValueError, match="passkey_only_steps must be an integer >= 0, got -1"):
        ContextConfig(name="x", passkey_only_steps=-1)


@pytest.mark.parametrize("step", [0, 2])
def test_adjacent_steps_place_the_key_sentence_right_before_the_question_in_half_the_rows(data, step):
    settings = ContextConfig(
        name="x",
        steps=10,
        context=80,
        batch=16,
        lr=1e-3,
        passkey_fraction=0.5,
        passkey_only_steps=4,
        passkey_adjacent_steps=3,
    )
    inputs, targets = _batch(data, torch.Generator().manual_seed(step), settings, step)
    # the shortest document fills the row's end: its planted digits sit at one fixed place in rows 0-7
    first = 80 - min_length(5) + len(KEY_PREFIX)
    planted = (targets == IGNORE).nonzero()[:, 1].view(16, 5)
    assert planted[:8].tolist() == [list(range(first, first + 5))] * 8
    for row in range(8):
        text = data.decode(inputs[row, first + 1 :].tolist()) + data.decode(targets[row, -1:].tolist())
        key = text[:5]
        assert text == f"{key}. {QUESTION}{key}"
    # the other half are documents of random lengths and depths, as after the adjacent steps
    assert len({tuple(row) for row in planted[8:].tolist()}) > 2


def test_after_the_adjacent_steps_the_key_moves(data):
    settings = ContextConfig(
        name="x",
        steps=10,
        context=80,
        batch=16,
        lr=1e-3,
        passkey_fraction=0.5,
        passkey_only_steps=4,
        passkey_adjacent_steps=3,
    )
    _, targets = _batch(data, torch.Generator().manual_seed(0), settings, 3)
    starts = {row.nonzero()[0].item() for row in targets == IGNORE}
    assert len(starts) > 4  # documents of random lengths and depths again


def test_adjacent_steps_are_checked_and_hashed_only_when_set():
    with pytest.raises(
        ValueError, match=r"passkey_adjacent_steps must be an integer in \[0, passkey_only_steps=800\], got 900"
    ):
        ContextConfig(name="x", passkey_adjacent_steps=900)
    old = ContextConfig(name="x", passkey_adjacent_steps=0)
    body = {k: v for k, v in old.to_dict().items() if k != "passkey_adjacent_steps"}  # a store from before the field
    assert train_id_of(body) == old.train_id
    assert ContextConfig(name="x").train_id != old.train_id
    assert get_context_preset("context").passkey_adjacent_steps == 300


def test_a_finetune_trains_the_study_longer_without_its_curriculum():
    study = get_context_preset("context")
    tune = finetune_config(study, steps=100, context=384, lr=1e-3, seed=1)
    assert (tune.steps, tune.context, tune.lr, tune.seed, tune.warmup) == (100, 384, 1e-3, 1, 10)
    assert (tune.passkey_only_steps, tune.passkey_adjacent_steps) == (0, 0)  # passkey rows mixed in from the first step
    assert (tune.passkey_fraction, tune.digits, tune.batch) == (study.passkey_fraction, study.digits, study.batch)
    assert finetune_config(study, steps=1000, context=384, lr=1e-3, seed=1).warmup == 20


def test_the_passkey_length_is_checked_only_where_passkey_rows_are_drawn():
    plain = ContextConfig(name="x", context=20, passkey_fraction=0.0, passkey_only_steps=0, passkey_adjacent_steps=0)
    assert plain.context == 20  # a char LM at a length no passkey document fits in (lab extend of a charlm checkpoint)
    with pytest.raises(ValueError, match="context=20 is below the passkey minimum"):
        ContextConfig(name="x", context=20, passkey_fraction=0.0, passkey_only_steps=1, passkey_adjacent_steps=0)
