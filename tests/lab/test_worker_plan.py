"""The default worker count follows the work: one process for a small sweep, the device's slots
for a large one; on CUDA the slots are bounded by the cores, the GPU memory and a cap."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from posembed.lab.config import TrialConfig
from posembed.lab.presets import get_preset
from posembed.lab.sweep import worker_plan
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


@pytest.mark.parametrize(
    "cores, threads, expected", [(1, 1, 1), (2, 1, 2), (4, 1, 4), (16, 1, 16), (16, 4, 4), (2, 2, 1)]
)
def test_quick_fills_the_cores_over_the_threads(quick, cores, threads, expected):
    assert len(quick) == 84
    assert plan_workers(quick, "cpu", cores=cores, threads=threads) == expected


def test_more_work_never_means_fewer_workers():
    base = TrialConfig(task="copy", dim=32, depth=1, steps=50, context=6, batch=16)
    counts = [
        plan_workers([dataclasses.replace(base, seed=s) for s in range(n)], "cpu", cores=8) for n in range(1, 200, 7)
    ]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] == 8
    longer = [
        plan_workers([dataclasses.replace(base, seed=s, steps=steps) for s in range(8)], "cpu", cores=8)
        for steps in (10, 50, 200, 1000, 5000)
    ]
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
    assert trial_seconds(dataclasses.replace(base, dim=1024), "cuda") < trial_seconds(
        dataclasses.replace(base, dim=1024)
    )


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


@pytest.mark.slow
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


# --- pinned values (issue 33 item 5: mutants of the plan that the tests above let through) ---


@pytest.mark.parametrize("task", ["order", "copy", "reverse", "sort", "addition", "charlm"])
@pytest.mark.parametrize("context", [3, 7])
def test_the_estimated_sequence_length_is_the_tasks_own(task, context, tinyshakespeare):
    from posembed.lab.tasks import make_task
    from posembed.lab.training.trial_cost import sequence_length

    cfg = TrialConfig(task=task, context=context, text=str(tinyshakespeare))
    # (B, T): a batch this large holds the longest operand (algorithmic batches pad to it)
    inputs = make_task(cfg).train_batch(torch.Generator().manual_seed(0), 256).input_ids
    assert sequence_length(cfg) == inputs.shape[1]


def test_trial_seconds_is_the_dispatch_plus_the_matmuls_to_the_digit():
    cfg = TrialConfig(task="charlm", dim=256, depth=3, steps=7, context=50, batch=4)  # 200 tokens a step
    flops = 6 * 12 * 3 * 256**2 * 200  # forward and backward of the blocks' matmuls
    assert flops == 2_831_155_200
    for device, rate in (("cpu", 5e10), ("cuda", 1e13), (torch.device("cuda", 1), 1e13)):
        expected = 7 * ((3 + 2) * 3e-3 + flops / rate)
        assert trial_seconds(cfg, device) == pytest.approx(expected, rel=1e-12)
    assert trial_seconds(cfg) == pytest.approx(7 * (0.015 + 0.056623104), rel=1e-12)


def test_start_seconds_per_device_kind():
    assert worker_plan.start_seconds("cpu") == worker_plan.CPU_START_SECONDS == 6.0
    assert worker_plan.start_seconds("cuda:0") == worker_plan.GPU_START_SECONDS == 12.0
    assert worker_plan.start_seconds(torch.device("meta")) == 6.0


def test_available_cores_reads_the_affinity_mask_else_the_cpu_count(monkeypatch):
    asked = []
    monkeypatch.setattr(worker_plan.os, "sched_getaffinity", lambda pid: asked.append(pid) or {0, 2, 5}, raising=False)
    assert worker_plan.available_cores() == 3 and asked == [0]  # this process's mask
    monkeypatch.setattr(worker_plan.os, "sched_getaffinity", lambda pid: set(), raising=False)
    assert worker_plan.available_cores() == 1
    monkeypatch.delattr(worker_plan.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(worker_plan.os, "cpu_count", lambda: 5)
    assert worker_plan.available_cores() == 5
    monkeypatch.setattr(worker_plan.os, "cpu_count", lambda: None)
    assert worker_plan.available_cores() == 1


def test_gpu_free_bytes_is_the_free_half_of_mem_get_info(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: asked.append(device) or (123, 456))
    assert worker_plan.gpu_free_bytes(torch.device("cuda", 1)) == 123 and asked == [torch.device("cuda", 1)]


def test_only_cuda_devices_are_shared_by_memory(monkeypatch):
    def no_gpu(device):
        raise AssertionError("read GPU memory for a device that is not CUDA")

    monkeypatch.setattr(worker_plan, "gpu_free_bytes", no_gpu)
    for device in ("cpu", "meta", torch.device("cpu")):
        assert device_slots(device, cores=6, threads=2) == 3


def _planned(monkeypatch, seconds: list[float], **kwargs) -> int:
    """The plan for trials whose estimates are ``seconds`` (one-thread seconds each)."""
    estimates = dict(enumerate(seconds))
    monkeypatch.setattr(worker_plan, "trial_seconds", lambda cfg, device: estimates[cfg.seed])
    return plan_workers([TrialConfig(task="copy", seed=s) for s in estimates], "cpu", **kwargs)


def test_several_workers_only_when_they_save_a_fifth(monkeypatch):
    # 16 trials of 1 s on 2 cores: two workers take 6 + 0.5 + 8 = 14.5 s < 16 s, but save less than a fifth
    assert _planned(monkeypatch, [1.0] * 16, cores=2) == 1
    # 24 s: 6.5 + 12 = 18.5 <= 0.8 * 24 = 19.2
    assert _planned(monkeypatch, [1.0] * 24, cores=2) == 2
    # exactly a fifth saved is enough: 2 trials of 25.5 s and 14.5 s: 6.5 + 25.5 = 32 = 0.8 * 40
    assert _planned(monkeypatch, [25.5, 14.5], cores=2) == 2


def test_the_fewest_workers_win_a_tie_and_threads_divide_each_trial(monkeypatch):
    # 105 trials of 1 s: 6 + 0.25 w + 105 / w is 16.25 s at both w = 20 and w = 21 (the least): 20
    assert _planned(monkeypatch, [1.0] * 105, cores=32) == 20
    # 16 trials of 1 s at 2 threads: 0.5 s each, 8 s in all; 4 slots: the best, 9 s at 4, saves nothing
    assert _planned(monkeypatch, [1.0] * 16, cores=8, threads=2) == 1
    assert _planned(monkeypatch, [2.0] * 16, cores=8, threads=2) == 4  # 16 s: 6 + 1 + 4 = 11 <= 12.8


def test_the_plan_logs_its_estimate_and_a_one_slot_plan_weighs_nothing(monkeypatch, caplog):
    with caplog.at_level(logging.DEBUG, logger=worker_plan.__name__):
        assert _planned(monkeypatch, [1.0] * 24, cores=2) == 2
        assert _planned(monkeypatch, [1.0] * 16, cores=2) == 1
        assert _planned(monkeypatch, [1.0] * 16, cores=1) == 1  # one slot: nothing to weigh, nothing logged
    assert [r.getMessage() for r in caplog.records] == [
        "plan: 24 trials, about 24 s in one process; 2 worker(s), about 18 s",
        "plan: 16 trials, about 16 s in one process; 1 worker(s), about 16 s",
    ]
