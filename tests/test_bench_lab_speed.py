"""benchmarks/bench_lab_speed.py's ``profile`` mode: where each model's step spends its time."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

bench = importlib.import_module("benchmarks.bench_lab_speed")


@pytest.fixture(scope="module")
def profiled():
    threads = torch.get_num_threads()
    try:
        return bench.bench_profile(2)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_profile_covers_the_three_steps_and_every_part(profiled):
    assert list(profiled) == [
        "nanoGPT-style reference",
        "posembed Decoder, lab defaults",
        "posembed Decoder, calibration preset",
    ]
    parts = [part for part, _ in bench.PARTS] + ["other"]
    for row in profiled.values():
        assert list(row["self_cpu_ms_by_part"]) == parts
        assert math.isclose(sum(row["share_by_part"].values()), 1.0, rel_tol=1e-9)
        assert row["thread_cpu_ms"] > 0
        # every model multiplies matrices, attends, applies GELU and LayerNorm, and steps AdamW
        for part in ("matrix products", "attention", "GELU", "LayerNorm", "optimizer"):
            assert row["self_cpu_ms_by_part"][part] > 0, part


def test_profile_counts_the_biases_copies_only_where_there_are_biases(profiled):
    """``addmm`` copies its bias into the output: the lab's defaults (biases) copy far more than
    the bias-free reference."""
    copies = {name: row["self_cpu_ms_by_part"]["copies"] for name, row in profiled.items()}
    assert copies["posembed Decoder, lab defaults"] > 5 * copies["nanoGPT-style reference"]


def test_compile_variants_time_the_full_trial_eager_fused_and_compiled_in_each_mode():
    variants = dict(bench.compile_variants(("default", "max-autotune-no-cudagraphs")))
    assert list(variants) == [
        "full trial, eager",
        "full trial, eager, fused AdamW",
        "full trial, compiled (default)",
        "full trial, compiled (max-autotune-no-cudagraphs)",
        "full trial, compiled (default), fused AdamW",
        "full trial, compiled (default), compiled AdamW",
    ]
    assert variants["full trial, eager"] == {"optimizer": "adamw", "mode": None, "compile_optimizer": False}
    assert variants["full trial, compiled (default), compiled AdamW"]["compile_optimizer"] is True
    assert [how["mode"] for how in variants.values()].count(None) == 2


def test_the_full_trial_is_the_studys_trial():
    from posembed.lab.presets import get_preset

    trial = bench.full_trial()
    assert trial == get_preset("full").bases[0]
    assert (trial.dim, trial.depth, trial.heads, trial.context, trial.batch, trial.steps) == (128, 4, 4, 64, 12, 1500)
    assert (trial.bias, trial.optimizer) == (False, "adamw")


@pytest.mark.slow
def test_trial_losses_are_the_lab_trials_losses_bit_for_bit():
    """The determinism bench's eager losses are what ``train_trial`` trains on the CPU: its logged
    mean over the shortened trial's steps is the mean of these losses, exactly."""
    import dataclasses

    from posembed.lab.training.train import train_trial

    threads = torch.get_num_threads()
    try:
        losses = bench.trial_losses(3, compiled=False)
        again = bench.trial_losses(3, compiled=False)
        cfg = dataclasses.replace(bench.full_trial(), steps=3, eval_batches=1)
        result, _ = train_trial(cfg, device="cpu")
    finally:
        torch.set_num_threads(threads)
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert losses == again
    assert result.curve == [(3, sum(losses) / 3)]


@pytest.mark.slow
def test_compiled_trial_losses_stay_within_rounding_of_eager():
    """The measurement's claim for ``torch.compile`` on the CPU: a few steps of the ``full`` trial
    compiled land within fp32 rounding of the eager losses (not bit for bit: fused kernels sum in
    another order). Compiles the model: a minute or more cold."""
    threads = torch.get_num_threads()
    try:
        compiled = bench.trial_losses(3, compiled=True)
        eager = bench.trial_losses(3, compiled=False)
    finally:
        torch.set_num_threads(threads)
    assert max(abs(a - b) for a, b in zip(compiled, eager)) < 1e-5


def test_the_matmuls_bench_times_the_full_trial_in_fp32_and_bf16_as_the_lab_sets_them():
    variants = dict(bench.matmul_variants())
    assert {how["matmuls"] for how in variants.values()} == {"fp32", "bf16"}
    assert variants["full trial, fp32"] == {"optimizer": "adamw", "matmuls": "fp32"}  # the study's own recipe
    threads = torch.get_num_threads()
    try:
        timed = bench.bench_matmuls(1, 1)
    finally:
        torch.set_num_threads(threads)
    assert list(timed) == ["nanoGPT-style reference", *variants]
    for name in variants:
        assert timed[name]["thread_cpu_ms"] > 0 and timed[name]["speedup (reference / this), wall"] > 0
