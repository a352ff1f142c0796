"""posembed.lab.context.evaluate beyond perplexity: the corpus split, passkey_grid's cells, where a
model runs, and what train_steps returns (the loop itself is lab.train's, tested there)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from posembed._utils.devices import OnDevice, model_device, on_device
from posembed.lab.context import evaluate
from posembed.lab.context import train as context_train
from posembed.lab.context.corpus import ContextData
from posembed.lab.context.evaluate import passkey_grid
from posembed.lab.context.models import build_context_model
from posembed.lab.context.presets import ContextConfig
from posembed.lab.context.train import train_steps
from posembed.lab.tasks.passkey import DIGITS, FILLER_SENTENCES, QUESTION, key_sentence, passkey_accuracy

CFG = ContextConfig(name="x", context=70, dim=8, depth=1, heads=2)


def _text(chars: int) -> str:
    """A text of exactly ``chars`` characters holding every passkey character but the digits."""
    base = " ".join(FILLER_SENTENCES) + key_sentence("") + QUESTION + "\n"
    return (base * (chars // len(base) + 1))[:chars]


def test_a_text_of_exactly_1000_characters_loads_and_splits_at_nine_tenths(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(_text(1000), encoding="utf-8")
    data = ContextData.load(str(path))
    assert data.chars == tuple(sorted(set(_text(1000)) | set(DIGITS)))
    assert (len(data.train), len(data.val)) == (900, 100)
    assert data.decode(data.train.tolist()) + data.decode(data.val.tolist()) == _text(1000)
    path = tmp_path / "b.txt"
    path.write_text(_text(1001), encoding="utf-8")
    assert (len(ContextData.load(str(path)).train), len(ContextData.load(str(path)).val)) == (900, 101)  # int(900.9)
    path = tmp_path / "c.txt"
    path.write_text(_text(999), encoding="utf-8")
    with pytest.raises(ValueError, match="has 999 characters, shorter than the 1000 needed"):
        ContextData.load(str(path))


def test_passkey_grid_seeds_each_cell_by_seed_length_and_depth_index(monkeypatch):
    data = ContextData.load("tinyshakespeare")
    model = build_context_model(CFG, "rope", data.vocab_size).eval()
    calls = []

    def recording(*args, **kwargs):
        calls.append((args[2], args[3], kwargs["seed"], kwargs["digits"]))
        return passkey_accuracy(*args, **kwargs)

    monkeypatch.setattr(evaluate, "passkey_accuracy", recording)
    depths = (0.0, 0.5, 1.0)
    grid = passkey_grid(model, data.stoi, 70, depths, samples=2, seed=3)
    # the stored studies were scored with these seeds: seed * 7919 + length * 31 + depth index
    assert calls == [
        (70, 0.0, 3 * 7919 + 70 * 31, 5),
        (70, 0.5, 3 * 7919 + 70 * 31 + 1, 5),
        (70, 1.0, 3 * 7919 + 70 * 31 + 2, 5),
    ]
    assert list(grid) == list(depths)
    for depth, (_, _, seed, _) in zip(depths, calls):
        assert grid[depth] == passkey_accuracy(model, data.stoi, 70, depth, samples=2, seed=seed, digits=5)
    calls.clear()
    passkey_grid(model, data.stoi, 90, (0.25,), samples=1, seed=0, digits=3)
    assert calls == [(90, 0.25, 90 * 31, 3)]


def test_model_device_and_on_device_for_a_model_elsewhere_and_one_without_parameters():
    assert model_device(nn.ReLU()) == torch.device("cpu")  # no parameters: the CPU
    meta = nn.Linear(2, 2, device="meta")
    assert model_device(meta) == torch.device("meta")
    wrapped = on_device(meta)
    assert isinstance(wrapped, OnDevice) and wrapped.model is meta and wrapped.device == torch.device("meta")
    cpu = nn.Linear(2, 2)
    assert model_device(cpu) == torch.device("cpu") and on_device(cpu) is cpu
    relu = nn.ReLU()
    assert on_device(relu) is relu


@pytest.mark.parametrize("steps, tail", [(20, 2), (5, 1), (11, 1)])
def test_train_steps_returns_the_mean_loss_of_the_last_tenth_and_decays_to_a_tenth_of_lr(monkeypatch, steps, tail):
    data = ContextData.load("tinyshakespeare")
    cfg = dataclasses.replace(
        CFG,
        steps=steps,
        batch=2,
        lr=2e-3,
        warmup=0,
        passkey_fraction=0.5,
        passkey_only_steps=0,
        passkey_adjacent_steps=0,
    )
    seen = {}
    real = context_train.train_model

    def recording(model, config, batches, **kwargs):
        seen.update(kwargs, config=config)
        seen["losses"] = real(model, config, batches, **kwargs)
        return seen["losses"]

    monkeypatch.setattr(context_train, "train_model", recording)
    model = build_context_model(CFG, "rope", data.vocab_size)
    loss = train_steps(model, data, cfg)
    losses = seen["losses"]
    assert len(losses) == steps and len(set(losses)) > 1
    assert loss == pytest.approx(sum(losses[-tail:]) / tail, rel=1e-12)
    assert seen["config"] is cfg and seen["min_lr"] == pytest.approx(2e-4, rel=1e-12) and seen["log_every"] == tail
    assert seen["device"] == torch.device("cpu") and not model.training


def test_lm_windows_are_whole_slices_of_the_training_split_from_its_first_character():
    """A 100-character training split and 70-character windows: every char-LM row is ``train[s : s + 70]``
    with its targets one further, ``s`` from 0 up to 28 (the last window that fits, ``s = 29``, is never
    drawn: the range stops one short)."""
    train = torch.arange(100) % 74
    data = ContextData(chars=ContextData.load("tinyshakespeare").chars, train=train, val=train[:10])
    cfg = dataclasses.replace(CFG, batch=8, passkey_fraction=0.0, passkey_only_steps=0, passkey_adjacent_steps=0)
    generator, starts = torch.Generator().manual_seed(0), set()
    for step in range(40):
        inputs, targets = context_train._batch(data, generator, cfg, step)
        assert inputs.shape == targets.shape == (8, 70)
        for row, target in zip(inputs, targets):
            start = int(row[0])  # train[s] = s here
            assert torch.equal(row, train[start : start + 70]) and torch.equal(target, train[start + 1 : start + 71])
            starts.add(start)
    assert starts == set(range(29))  # 320 draws of 29 starts: each comes up


def test_evaluate_rows_measures_passkey_from_the_shortest_document_on_and_means_its_depths(monkeypatch):
    """The grid is measured only when asked (``passkey``) and the length holds the shortest document
    (``min_length``, that length included); ``passkey_mean`` is the mean of the depths' accuracies."""
    from posembed.lab.tasks.passkey import min_length

    data = ContextData.load("tinyshakespeare")
    model = build_context_model(CFG, "rope", data.vocab_size).eval()
    asked = []
    monkeypatch.setattr(
        evaluate,
        "passkey_grid",
        lambda model, stoi, length, depths, **kw: asked.append(length) or dict(zip(depths, (1.0, 0.5))),
    )
    shortest = min_length(5)

    def metrics(length, **kw):
        return [
            (m, d, v)
            for m, d, v in evaluate.evaluate_rows(
                model, data, length, windows=1, depths=2, samples=1, seed=0, digits=5, **kw
            )
            if m != "perplexity"
        ]

    assert metrics(shortest) == [("passkey", 0.0, 1.0), ("passkey", 1.0, 0.5), ("passkey_mean", -1.0, 0.75)]
    assert metrics(shortest - 1) == [] and metrics(shortest, passkey=False) == []
    assert asked == [shortest]
