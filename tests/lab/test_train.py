"""Training: deterministic on CPU, drift of the position table, variants, randomized positions."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from posembed.lab.config import TrialConfig
from posembed.lab.tasks import make_task
from posembed.lab.train import build_trial_model, build_trial_scheme, lr_at, train_trial
from tests.helpers import assert_close
from tests.lab.conftest import tiny_trial


def test_same_config_same_numbers():
    cfg = tiny_trial(task="copy", scheme="learned", randomized_positions=True)
    first, model_a = train_trial(cfg)
    second, model_b = train_trial(cfg)
    assert first.curve == second.curve
    assert first.evals == second.evals
    assert first.drift == second.drift
    for (name, a), (_, b) in zip(model_a.state_dict().items(), model_b.state_dict().items()):
        assert torch.equal(a, b), name
    other, _ = train_trial(tiny_trial(task="copy", scheme="learned", randomized_positions=True, seed=1))
    assert other.curve != first.curve


def test_training_lowers_the_loss():
    result, _ = train_trial(tiny_trial(task="copy", scheme="learned", steps=40, log_every=10, lr=3e-3, batch=16))
    losses = [loss for _, loss in result.curve]
    assert [step for step, _ in result.curve] == [10, 20, 30, 40]
    assert losses[-1] < losses[0] - 0.3, losses
    assert all(math.isfinite(x) for x in losses)
    # counted by hand (width 16, one block, MLP 64, copy task: 14 tokens, 17 positions):
    # tokens 14*16 + positions 17*16 + embedding LN 2*16 + block (2 LNs 4*16, q/k/v/out 4*(16*16 + 16),
    # MLP 16*64 + 64 + 64*16 + 16) + final LN 2*16 + head 16*14 (no bias)
    assert result.num_params == 14 * 16 + 17 * 16 + 32 + (64 + 4 * 272 + 1088 + 1040) + 32 + 224 == 4064


def test_frozen_table_does_not_drift_and_trained_one_does():
    frozen, model = train_trial(tiny_trial(scheme="learned", freeze_positions=True))
    trained, _ = train_trial(tiny_trial(scheme="learned"))
    assert frozen.drift == {"rel_frobenius": 0.0, "cosine": 1.0}
    assert not any(p.requires_grad for p in model.scheme.parameters())
    assert trained.drift["rel_frobenius"] > 1e-3 and trained.drift["cosine"] < 1.0
    # the frozen table is still its init: rebuild the init with the same seed and compare in full
    torch.manual_seed(0)
    fresh = build_trial_model(tiny_trial(scheme="learned", freeze_positions=True), make_task(tiny_trial()))
    assert_close(model.scheme.weight.detach().cpu(), fresh.scheme.weight)  # trained on the default device


@pytest.mark.parametrize(
    "initial, final, rel, cosine",
    [
        ([3.0, 4.0], [3.0, 4.0], 0.0, 1.0),
        ([3.0, 4.0], [0.0, 4.0], 0.6, 0.8),  # |(-3, 0)| / 5; (0*3 + 4*4) / (5 * 4)
        ([3.0, 4.0], [-3.0, -4.0], 2.0, -1.0),
        ([1.0, 0.0], [0.0, 2.0], 5**0.5, 0.0),
        ([2.0, 0.0, 0.0], [2.0, 0.0, 0.0 + 1.0], 0.5, 2 / 5**0.5),
    ],
)
def test_drift_hand_values(initial, final, rel, cosine):
    from posembed.lab.train import drift

    got = drift(torch.tensor(initial, dtype=torch.float64), torch.tensor(final, dtype=torch.float64))
    assert got == {"rel_frobenius": pytest.approx(rel, abs=1e-12), "cosine": pytest.approx(cosine, abs=1e-12)}
    assert drift(None, torch.ones(2)) is None and drift(torch.ones(2), None) is None


def test_drift_is_none_without_position_parameters():
    result, _ = train_trial(tiny_trial(scheme="alibi"))
    assert result.drift is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"combine": "concat"},
        {"combine": "concat", "concat_dim": 4},
        {"inject": "every_layer"},
        {"untied": True},
        {"task": "order", "scheme": "alibi"},
        {"task": "order", "scheme": "rope", "randomized_positions": True},
        {"task": "addition", "scheme": "sinusoidal"},
    ],
)
def test_variants_train_and_evaluate(overrides):
    result, model = train_trial(tiny_trial(**{"scheme": "learned", "steps": 2, **overrides}))
    assert result.evals and all(p.value is not None and 0.0 <= p.value <= 1.0 for p in result.evals)
    if overrides.get("combine") == "concat":
        assert model.scheme.dim == overrides.get("concat_dim", 8)


def test_scheme_arguments_are_filled_from_the_model_shape():
    learned = build_trial_scheme(tiny_trial(scheme="learned"), table_size=33)
    assert (learned.max_len, learned.dim) == (33, 16)
    rope = build_trial_scheme(tiny_trial(scheme="rope", scheme_kwargs=(("base", 500.0),)), table_size=33)
    assert (rope.head_dim, rope.base) == (8, 500.0)
    assert build_trial_scheme(tiny_trial(scheme="alibi", task="order"), 9).symmetric is True
    assert build_trial_scheme(tiny_trial(scheme="alibi", task="copy"), 9).symmetric is False
    assert build_trial_scheme(tiny_trial(scheme="t5_bias", task="copy"), 9).bidirectional is False
    assert build_trial_scheme(tiny_trial(scheme="t5_bias", task="order"), 9).bidirectional is True
    assert type(build_trial_scheme(tiny_trial(scheme="nope"), 9)).__name__ == "NoPE"  # the explicit scheme
    assert build_trial_scheme(tiny_trial(scheme="none"), 9) is None  # no scheme at all
    scoped = (("rope.base", 700.0), ("learned.init_std", 0.5))
    assert build_trial_scheme(tiny_trial(scheme="rope", scheme_kwargs=scoped), 9).base == 700.0
    assert build_trial_scheme(tiny_trial(scheme="learned", scheme_kwargs=scoped), 9).init_std == 0.5
    assert build_trial_scheme(tiny_trial(scheme="alibi", scheme_kwargs=scoped), 9).num_heads == 2
    with pytest.raises(ValueError, match="scheme 'learned' takes no argument 'base'.*it takes: max_len, dim, init_std"):
        build_trial_scheme(tiny_trial(scheme="learned", scheme_kwargs=(("base", 1.0),)), 9)
    with pytest.raises(ValueError, match=r"unknown scheme 'rop' \(did you mean 'rope'\?\); known: .*rope") as error:
        build_trial_scheme(tiny_trial(scheme="rop"), 9)
    known = str(error.value).split("known: ")[1].split(", ")
    assert known == sorted(set(known)) and "nope" in known and "none" in known  # each name once


def test_learning_rate_schedule_is_nanogpts():
    cfg = TrialConfig(steps=2000, warmup=100, lr=1e-3, min_lr=1e-4)

    def nanogpt(it):  # nanoGPT train.py get_lr, restated
        if it < 100:
            return 1e-3 * (it + 1) / 101
        ratio = (it - 100) / (2000 - 100)
        return 1e-4 + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (1e-3 - 1e-4)

    for it in (0, 50, 99, 100, 101, 1000, 1999, 2000):
        assert lr_at(it, cfg) == pytest.approx(nanogpt(it), rel=1e-12)


def test_batch_must_split_over_processes(monkeypatch):
    monkeypatch.setattr("posembed.lab.train.rank_and_world", lambda: (0, 3))
    with pytest.raises(ValueError, match="batch=8 must be divisible by the number of processes \\(3\\)"):
        train_trial(tiny_trial())


def test_cpu_training_is_never_compiled(monkeypatch):
    from posembed.lab.train import compile_training

    real, compiled = torch.compile, []

    def record(target=None, *args, **kwargs):  # kernels (attention, RoPE) may compile; the model must not
        compiled.append(target)
        return real(target, *args, **kwargs) if target is not None else real(*args, **kwargs)

    monkeypatch.setattr(torch, "compile", record)
    result, model = train_trial(tiny_trial(scheme="rope"), device="cpu")
    assert result.curve and not [target for target in compiled if isinstance(target, torch.nn.Module)]
    huge = TrialConfig(steps=10**6, dim=1024, depth=24, context=1024)
    assert compile_training(torch.device("cpu"), huge) is False


def test_cuda_compiles_only_trials_that_repay_the_compile():
    """The policy with the device named (no GPU needed): the presets' trials train eagerly, a long
    GPT-2-sized run compiles, and a longer trial never turns compiling off."""
    from posembed.lab.calibration import NANOGPT_CPU
    from posembed.lab.presets import get_preset
    from posembed.lab.sweep.runner import expand
    from posembed.lab.train import compile_training

    cuda = torch.device("cuda")
    assert not any(compile_training(cuda, cfg) for cfg in expand(get_preset("quick")))
    assert not compile_training(cuda, NANOGPT_CPU)
    gpt2 = TrialConfig(task="charlm", dim=768, depth=12, heads=12, context=1024, batch=8, steps=5000)
    assert compile_training(cuda, gpt2) and compile_training(torch.device("cuda", 1), gpt2)
    decisions = [compile_training(cuda, dataclasses.replace(NANOGPT_CPU, steps=steps)) for steps in (10, 10**3, 10**5, 10**7)]
    assert decisions == sorted(decisions) and decisions[-1]


def test_the_trained_module_is_the_compiled_one_when_the_policy_says_so(monkeypatch):
    """With the policy mocked to compile, the loop trains what ``torch.compile`` returned (here the
    model itself, recorded), and the numbers are the eager ones."""
    import posembed.lab.train as train_module

    compiled = []

    def record(module, *args, **kwargs):
        compiled.append(module)
        return module

    cfg = tiny_trial(scheme="learned")
    eager, _ = train_trial(cfg, device="cpu")
    monkeypatch.setattr(train_module, "compile_training", lambda device, trial: True)
    monkeypatch.setattr(torch, "compile", record)
    again, model = train_trial(cfg, device="cpu")
    assert compiled == [model] and again.curve == eager.curve and again.evals == eager.evals
