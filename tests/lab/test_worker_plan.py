"""The default worker count follows the work: one process for a small sweep, the device's slots
for a large one; on CUDA the slots are bounded by the cores, the GPU memory and a cap."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from posembed.lab.sweep import worker_plan
from posembed.lab.config import TrialConfig
from posembed.lab.presets import get_preset
from posembed.lab.sweep.runner import expand, run_experiment
from posembed.lab.sweep.store import load_results
from posembed.lab.sweep.worker_plan import GPU_WORKER_BYTES, MAX_GPU_WORKERS, device_slots, plan_workers, trial_seconds


@pytest.fixture(scope="module")
def smoke() -> list[TrialConfig]:
    return expand(get_preset("smoke"))


@pytest.fixture(scope="module")
def quick() -> list[TrialConfig]:
    return expand(get_preset("quick"))


def _gpu_free(monkeypatch, free: int) -> None:
    """The device policy's view of the GPU: ``free`` bytes free (no CUDA needed)."""
    monkeypatch.setattr(worker_plan, "gpu_free_bytes", lambda device: free)


@pytest.mark.parametrize("cores", [1, 2, 4, 16, 64])
def test_smoke_trains_in_one_process_on_any_cpu(smoke, cores):
    assert len(smoke) == 15
    assert plan_workers(smoke, "cpu", cores=cores) == 1


@pytest.mark.parametrize("cores, threads, expected", [(1, 1, 1), (2, 1, 2), (4, 1, 4), (16, 1, 16), (16, 4, 4), (2, 2, 1)])
def test_quick_fills_the_cores_over_the_threads(quick, cores, threads, expected):
    assert len(quick) == 70
    assert plan_workers(quick, "cpu", cores=cores, threads=threads) == expected


def test_more_work_never_means_fewer_workers():
    base = TrialConfig(task="copy", dim=32, depth=1, steps=50, context=6, batch=16)
    counts = [plan_workers([dataclasses.replace(base, seed=s) for s in range(n)], "cpu", cores=8) for n in range(1, 200, 7)]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] == 8
    longer = [plan_workers([dataclasses.replace(base, seed=s, steps=steps) for s in range(8)], "cpu", cores=8)
              for steps in (10, 50, 200, 1000, 5000)]
    assert longer == sorted(longer) and longer[0] == 1 and longer[-1] == 8


def test_one_long_trial_is_not_split_and_the_trial_count_caps_the_workers():
    long = TrialConfig(task="charlm", dim=128, depth=4, steps=5000, context=64, batch=12)
    assert plan_workers([long], "cpu", cores=16) == 1
    assert plan_workers([dataclasses.replace(long, seed=s) for s in range(3)], "cpu", cores=16) == 3
    assert plan_workers([], "cpu", cores=16) == 1


def test_trial_seconds_grow_with_steps_depth_width_and_length():
    base = TrialConfig(task="copy", dim=32, depth=1, steps=50, context=6, batch=16)
    seconds = trial_seconds(base)
    for change in ({"steps": 100}, {"depth": 2}, {"dim": 256}, {"context": 60}, {"batch": 512}):
        assert trial_seconds(dataclasses.replace(base, **change)) > seconds, change
    assert trial_seconds(dataclasses.replace(base, steps=100)) == pytest.approx(2 * seconds)
    assert trial_seconds(dataclasses.replace(base, dim=1024), "cuda") < trial_seconds(dataclasses.replace(base, dim=1024))


def test_threads_must_be_positive(smoke):
    with pytest.raises(ValueError, match="threads must be at least 1, got 0"):
        plan_workers(smoke, "cpu", cores=2, threads=0)


def test_cuda_workers_share_the_gpu_up_to_memory_and_the_cap(monkeypatch, quick, smoke):
    _gpu_free(monkeypatch, 80 * GPU_WORKER_BYTES)
    assert device_slots("cuda", cores=16) == MAX_GPU_WORKERS
    assert device_slots("cuda:1", cores=3) == 3  # one host core per worker
    assert plan_workers(quick, torch.device("cuda"), cores=16) == MAX_GPU_WORKERS
    assert plan_workers(smoke, torch.device("cuda"), cores=16) == 1  # starting CUDA workers costs more than smoke
    _gpu_free(monkeypatch, 3 * GPU_WORKER_BYTES + 5)
    assert plan_workers(quick, "cuda", cores=16) == 3
    _gpu_free(monkeypatch, GPU_WORKER_BYTES // 2)
    assert device_slots("cuda", cores=16) == 1 and plan_workers(quick, "cuda", cores=16) == 1


def test_the_cpu_plan_asks_nothing_of_cuda(monkeypatch, quick):
    def no_gpu(device):
        raise AssertionError("the CPU plan read GPU memory")

    monkeypatch.setattr(worker_plan, "gpu_free_bytes", no_gpu)
    assert plan_workers(quick, "cpu", cores=4) == 4


def test_the_runner_plans_when_workers_is_none_and_stores_the_same_numbers(tmp_path, monkeypatch, tiny_experiment):
    """``workers=None`` asks the plan (here told to say 2, then 1): the stored numbers are those of ``workers=1``."""
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",))
    asked = []

    def plan(todo, device, *, threads):
        asked.append((len(todo), torch.device(device).type, threads))
        return 2 if len(asked) == 1 else 1

    monkeypatch.setattr(worker_plan, "plan_workers", plan)
    run_experiment(exp, tmp_path / "two", progress=False, checkpoints=False, workers=None, threads=1, device="cpu")
    run_experiment(exp, tmp_path / "one", progress=False, checkpoints=False, workers=None, threads=1, device="cpu")
    run_experiment(exp, tmp_path / "given", progress=False, checkpoints=False, workers=1, threads=1, device="cpu")
    assert asked == [(4, "cpu", 1), (4, "cpu", 1)]  # a given count is not planned

    def stored(out):
        return {r.trial_id: (r.final_loss, r.curve, r.evals, r.drift) for r in load_results(out).trials}

    assert stored(tmp_path / "two") == stored(tmp_path / "one") == stored(tmp_path / "given")
