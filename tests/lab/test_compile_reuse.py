"""Compiled kernels are built once per shape and kind and reused by every trial of a sweep: the
workers compile into the parent's cache directory, and the lab never resets Dynamo between trials."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from posembed.lab.sweep import workers as workers_module
from posembed.lab.sweep.runner import run_experiment
from posembed.lab.sweep.workers import TrialPool, compile_cache_dir


def _probe() -> tuple[str | None, str | None]:
    """Run in a worker: the cache directory it was told, and the one Inductor resolves there."""
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR"), workers_module.compile_cache_dir()


@pytest.mark.slow
def test_workers_compile_into_the_parents_cache_directory(tmp_path, monkeypatch):
    """The directory is handed to each worker (not left to its environment), so every worker of the
    sweep reads and writes one FX-graph cache."""
    shared = str(tmp_path / "inductor")
    monkeypatch.setattr(workers_module, "compile_cache_dir", lambda: shared)  # the parent's choice, env untouched
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != shared
    with TrialPool(2, 1, keep_models=False) as pool:
        seen = {pool._executor.submit(_probe).result(timeout=120) for _ in range(4)}  # noqa: SLF001 - the test's handle
    assert seen == {(shared, shared)}


def test_the_default_cache_directory_is_inductors():
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    assert compile_cache_dir() == cache_dir() and os.path.isdir(compile_cache_dir())


def test_caches_switched_off_are_said_once_per_pool(caplog, torch_config):
    from torch._inductor import config

    torch_config(config, force_disable_caches=True)
    with caplog.at_level("WARNING", logger="posembed.lab.sweep.workers"):
        workers_module._warn_if_caches_are_off()  # noqa: SLF001
    assert "torch's compile caches are off" in caplog.text
    torch_config(config, force_disable_caches=False)
    caplog.clear()
    workers_module._warn_if_caches_are_off()  # noqa: SLF001
    assert caplog.text == ""


def test_the_lab_never_resets_dynamo_between_trials(tmp_path, monkeypatch, tiny_experiment):
    resets = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",))  # learned and alibi, 2 seeds
    summary = run_experiment(exp, tmp_path, progress=False, checkpoints=False, workers=1, device="cpu")
    assert summary.trained == 4 and resets == []


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_later_trials_of_a_kind_compile_nothing_new_on_cuda(tmp_path, tiny_experiment):
    """Three ALiBi trials (compiled FlexAttention, 16-channel heads) in one process: the second and
    third add no compiled graph to the first's."""
    from torch._dynamo.utils import counters

    base = dataclasses.replace(tiny_experiment.base("copy"), dim=32, heads=2)
    exp = dataclasses.replace(
        tiny_experiment, tasks=("copy",), schemes=("alibi", "t5_bias"), seeds=(0, 1, 2), bases=(base,)
    )
    graphs = []
    run_experiment(
        exp,
        tmp_path,
        progress=False,
        checkpoints=False,
        workers=1,
        device="cuda",
        on_trial=lambda result: graphs.append((result.config.scheme, counters["stats"]["unique_graphs"])),
    )
    by_scheme = {}
    for scheme, count in graphs:
        by_scheme.setdefault(scheme, []).append(count)
    for scheme, counts in by_scheme.items():
        assert counts[1:] == [counts[0]] * (len(counts) - 1), (scheme, counts)
