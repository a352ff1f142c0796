"""Training: deterministic on CPU, drift of the position table, variants, randomized positions."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch

from posembed.lab.config import TrialConfig
from posembed.lab.tasks import make_task
from posembed.lab.training.train import build_trial_model, build_trial_scheme, lr_at, train_trial
from tests.helpers import assert_close
from tests.lab.conftest import tiny_trial


def test_same_config_same_numbers():
    """Bit for bit on the CPU, where the lab asks for deterministic algorithms (train.py's docstring);
    on CUDA it does not (atomic scatter-adds in the embedding backward move the last bits: the first
    GPU run, an H200, saw the drift differ in the 9th digit)."""
    cfg = tiny_trial(task="copy", scheme="learned", randomized_positions=True)
    first, model_a = train_trial(cfg, device="cpu")
    second, model_b = train_trial(cfg, device="cpu")
    assert first.curve == second.curve
    assert first.evals == second.evals
    assert first.drift == second.drift
    for (name, a), (_, b) in zip(model_a.state_dict().items(), model_b.state_dict().items()):
        assert torch.equal(a, b), name
    other, _ = train_trial(tiny_trial(task="copy", scheme="learned", randomized_positions=True, seed=1), device="cpu")
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
    from posembed.lab.training.train import drift

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
    monkeypatch.setattr("posembed.lab.training.train.rank_and_world", lambda: (0, 3))
    with pytest.raises(ValueError, match="batch=8 must be divisible by the number of processes \\(3\\)"):
        train_trial(tiny_trial())


def test_cpu_training_is_never_compiled(monkeypatch):
    from posembed.lab.training.train import compile_training

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
    from posembed.lab.training.train import compile_training

    cuda = torch.device("cuda")
    assert not any(compile_training(cuda, cfg) for cfg in expand(get_preset("quick")))
    assert not compile_training(cuda, NANOGPT_CPU)
    gpt2 = TrialConfig(task="charlm", dim=768, depth=12, heads=12, context=1024, batch=8, steps=5000)
    assert compile_training(cuda, gpt2) and compile_training(torch.device("cuda", 1), gpt2)
    decisions = [
        compile_training(cuda, dataclasses.replace(NANOGPT_CPU, steps=steps)) for steps in (10, 10**3, 10**5, 10**7)
    ]
    assert decisions == sorted(decisions) and decisions[-1]


def test_the_trained_module_is_the_compiled_one_when_the_policy_says_so(monkeypatch):
    """With the policy mocked to compile, the loop trains what ``torch.compile`` returned (here the
    model itself, recorded), and the numbers are the eager ones."""
    import posembed.lab.training.train as train_module

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


def _loop_inputs(steps: int = 6, **overrides):
    """A tiny decoder, its training config and a batch source (fixed by the seed)."""
    from posembed.lab.config import TrainingConfig
    from posembed.nn.model.transformer import Decoder

    cfg = TrainingConfig(
        **{
            "dim": 16,
            "depth": 1,
            "heads": 2,
            "context": 8,
            "batch": 4,
            "steps": steps,
            "lr": 3e-3,
            "warmup": 2,
            "grad_clip": 0.5,
            **overrides,
        }
    )
    torch.manual_seed(0)
    model = Decoder(11, dim=cfg.dim, depth=cfg.depth, num_heads=cfg.heads)
    rows = torch.randint(0, 11, (steps, cfg.batch, cfg.context + 1), generator=torch.Generator().manual_seed(1))
    return cfg, model, lambda step: (rows[step, :, :-1], rows[step, :, 1:])


def test_the_one_loop_is_the_plain_training_loop_to_the_bit():
    """AdamW with decay on matrices, nanoGPT's warmup-cosine, clipping: restated here without the lab."""
    from posembed.lab.training.train import train_model

    cfg, model, batches = _loop_inputs()
    logged = []
    losses = train_model(
        model,
        cfg,
        batches,
        device=torch.device("cpu"),
        min_lr=3e-4,
        log_every=4,
        on_log=lambda step, mean: logged.append((step, mean)),
    )
    _, reference, _ = _loop_inputs()
    matrices = [p for p in reference.parameters() if p.dim() >= 2]
    rest = [p for p in reference.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": matrices, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], betas=(0.9, 0.99)
    )
    expected = []
    for step in range(6):
        lr = 3e-3 * (step + 1) / 3 if step < 2 else 3e-4 + 0.5 * (1 + math.cos(math.pi * (step - 2) / 4)) * 2.7e-3
        for group in optimizer.param_groups:
            group["lr"] = lr
        inputs, targets = batches(step)
        logits = reference(inputs)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5, foreach=False)
        optimizer.step()
        expected.append(loss.item())
    assert losses == expected
    assert logged == [(4, sum(expected[:4]) / 4), (6, sum(expected[4:]) / 2)]  # every log_every steps and the last
    for (name, a), (_, b) in zip(model.state_dict().items(), reference.state_dict().items()):
        assert torch.equal(a, b), name


def test_the_loop_reads_the_losses_back_once_per_logged_step(monkeypatch):
    from posembed.lab.training.train import train_model

    cfg, model, batches = _loop_inputs(steps=7)
    reads, tolist = [], torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append(t.shape) or tolist(t))
    losses = train_model(model, cfg, batches, device=torch.device("cpu"), min_lr=3e-4, log_every=3)
    assert reads == [torch.Size([3]), torch.Size([3]), torch.Size([1])] and len(losses) == 7


@pytest.mark.parametrize("grad_clip, clipped", [(0.0, 0), (0.5, 3)])
def test_the_loop_clips_only_when_asked(monkeypatch, grad_clip, clipped):
    from posembed.lab.training.train import train_model

    cfg, model, batches = _loop_inputs(steps=3, grad_clip=grad_clip)
    calls, clip = [], torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: calls.append(a[1]) or clip(*a, **k))
    train_model(model, cfg, batches, device=torch.device("cpu"), min_lr=3e-4, log_every=3)
    assert calls == [grad_clip] * clipped


def test_the_loop_passes_position_ids_and_names_a_non_finite_run(caplog):
    from posembed.lab.training.train import train_model

    cfg, model, batches = _loop_inputs(steps=2)
    seen = []
    model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs["position_ids"]), with_kwargs=True)
    positions = torch.arange(8).expand(4, 8) * 2
    with torch.no_grad():
        model.head.weight.fill_(float("nan"))
    with caplog.at_level("WARNING", logger="posembed.lab.training.train"):
        losses = train_model(
            model,
            cfg,
            lambda step: (*batches(step), positions),
            device=torch.device("cpu"),
            min_lr=3e-4,
            log_every=1,
            label="run x",
        )
    assert len(seen) == 2 and all(torch.equal(p, positions) for p in seen)
    assert all(math.isnan(loss) for loss in losses) and "run x: training loss became non-finite" in caplog.text


def test_trials_and_the_context_study_train_by_the_one_loop(monkeypatch):
    import posembed.lab.context.train as context_eval
    import posembed.lab.training.train as lab_train
    from posembed.lab.context.presets import ContextConfig
    from posembed.lab.context.run import build_context_model

    calls, loop = [], lab_train.train_model

    def recorded(model, cfg, batches, **kwargs):
        calls.append((type(cfg).__name__, kwargs["min_lr"], kwargs["log_every"]))
        return loop(model, cfg, batches, **kwargs)

    monkeypatch.setattr(lab_train, "train_model", recorded)
    monkeypatch.setattr(context_eval, "train_model", recorded)
    trial = tiny_trial(min_lr=2e-4, log_every=3)
    train_trial(trial, device="cpu")
    study = ContextConfig(
        name="x",
        context=70,
        dim=8,
        depth=1,
        heads=2,
        steps=20,
        batch=2,
        lr=2e-3,
        warmup=0,
        passkey_only_steps=0,
        passkey_adjacent_steps=0,
    )
    data = context_eval.ContextData.load("tinyshakespeare")
    context_eval.train_steps(build_context_model(study, "rope", data.vocab_size), data, study)
    assert calls == [
        ("TrialConfig", 2e-4, 3),
        ("ContextConfig", 2e-3 / 10, 2),
    ]  # the study: to lr / 10, a log line per 10 %


def test_evaluations_during_training_change_nothing_and_read_the_model_at_their_step(tinyshakespeare):
    """``eval_at`` evaluates after 10 % and 30 % of the steps as well as at the end: the run's curve,
    final numbers and weights are those of the same config evaluated at the end only; each point
    measures every metric and length the end does, on the model as it was then."""
    base = tiny_trial(task="charlm", text=str(tinyshakespeare), context=8, steps=20, eval_scales=(1.0, 2.0))
    staged = dataclasses.replace(base, eval_at=(0.1, 0.3, 1.0))
    plain, plain_model = train_trial(base, device="cpu")
    result, model = train_trial(staged, device="cpu")
    assert result.curve == plain.curve
    assert [(p.metric, p.length, p.value) for p in result.evals] == [(p.metric, p.length, p.value) for p in plain.evals]
    assert {p.step for p in result.evals} == {20} and plain.during == []
    for (name, a), (_, b) in zip(model.state_dict().items(), plain_model.state_dict().items()):
        assert torch.equal(a, b), name
    assert sorted({p.step for p in result.during}) == [2, 6]
    assert {(p.metric, p.length) for p in result.during if p.step == 2} == {(p.metric, p.length) for p in result.evals}
    early = {(p.metric, p.length): p.value for p in result.during if p.step == 2}
    late = {(p.metric, p.length): p.value for p in result.evals}
    assert early[("val_loss", 8)] > late[("val_loss", 8)]  # it learns between the points


@pytest.mark.parametrize(
    "eval_at, message",
    [
        ((0.5,), "ending at 1.0"),
        ((0.3, 0.1, 1.0), "increasing"),
        ((0.0, 1.0), "in (0, 1]"),
        ((1.5,), "in (0, 1]"),
        ((True,), "got (True,)"),
        (("0.5", 1.0), "got ('0.5', 1.0)"),
        ((), "got ()"),
    ],
)
def test_eval_at_must_be_increasing_fractions_ending_at_one(eval_at, message):
    with pytest.raises(ValueError, match=re.escape(message) if "(" in message else message):
        tiny_trial(eval_at=eval_at)


def test_eval_at_fractions_that_round_to_one_step_evaluate_once_there():
    cfg = tiny_trial(steps=6, eval_at=(0.1, 0.15, 1.0))
    assert cfg.eval_steps == (1, 6)
    result, _ = train_trial(cfg, device="cpu")
    assert {p.step for p in result.during} == {1}
    assert len(result.during) == len(result.evals)


def test_eval_at_survives_the_config_round_trip_and_keeps_old_trial_ids():
    cfg = tiny_trial(eval_at=(0.1, 0.3, 1.0))
    assert TrialConfig.from_dict(cfg.to_dict()) == cfg
    assert "eval_at" not in tiny_trial().to_dict()  # the default leaves every stored trial id as it was
    assert cfg.trial_id != tiny_trial().trial_id
