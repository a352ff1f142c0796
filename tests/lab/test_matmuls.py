"""``matmuls="bf16"``: the lab's training step runs its forward and backward matrix products in oneDNN's bf16
math mode (:func:`posembed.kernels.cpu_matmul.bf16_matmuls`), restores the mode afterwards, and trains to
numbers that differ from fp32's by rounding only; at ``"fp32"`` nothing changes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from posembed.kernels.cpu_matmul import bf16_matmuls_enabled
from posembed.lab.config import TrialConfig
from posembed.lab.training import train as train_module
from posembed.lab.training.train import train_trial

CFG = TrialConfig(task="charlm", scheme="rope", dim=32, depth=1, heads=2, context=16, batch=4, steps=6, seed=3)


def _modes_seen(monkeypatch) -> list[tuple[str, bool]]:
    """Spy on the loss function (inside the forward's context) and on backward (a gradient hook)."""
    seen: list[tuple[str, bool]] = []
    loss_fn = train_module.loss_fn

    def spied(logits, targets):
        seen.append(("forward", bf16_matmuls_enabled()))
        logits.register_hook(lambda grad: seen.append(("backward", bf16_matmuls_enabled())))
        return loss_fn(logits, targets)

    monkeypatch.setattr(train_module, "loss_fn", spied)
    return seen


@pytest.mark.parametrize("matmuls, expected", [("fp32", False), ("bf16", True)])
def test_the_forward_and_backward_run_in_the_mode_asked_and_it_is_restored(monkeypatch, matmuls, expected):
    seen = _modes_seen(monkeypatch)
    train_trial(dataclasses.replace(CFG, matmuls=matmuls), device="cpu")
    training = seen[: 2 * CFG.steps]  # then the evaluation's forwards
    assert {where for where, _ in training} == {"forward", "backward"}
    assert all(mode is expected for _, mode in training), training
    assert not bf16_matmuls_enabled()  # restored after training


def test_bf16_trains_to_other_numbers_that_are_close_and_fp32_is_bit_for_bit_the_default():
    default, _ = train_trial(CFG, device="cpu")
    fp32, _ = train_trial(dataclasses.replace(CFG, matmuls="fp32"), device="cpu")
    bf16, _ = train_trial(dataclasses.replace(CFG, matmuls="bf16"), device="cpu")
    assert fp32.final_loss == default.final_loss  # the default is fp32, bit for bit
    if torch.backends.mkldnn.is_available():
        assert bf16.final_loss != fp32.final_loss  # the inputs were rounded to bf16
    assert bf16.final_loss == pytest.approx(fp32.final_loss, rel=0.02)
