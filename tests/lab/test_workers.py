"""Trials in worker processes: the same numbers and weights as the sequential run, the parent
the only writer, no worker outliving a killed parent."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from posembed.cli import main
from posembed.errors import WorkerError
from posembed.lab.sweep import workers as workers_module
from posembed.lab.sweep.runner import run_experiment
from posembed.lab.sweep.store import load_results
from posembed.lab.sweep.workers import TrialPool, default_workers
from tests.lab.conftest import tiny_trial


def _stored(out: Path) -> dict[str, tuple]:
    """Every stored number of every trial, by trial id (times left out: they differ run to run)."""
    return {
        r.trial_id: (
            r.final_loss,
            r.curve,
            [(p.metric, p.length, p.value, p.note) for p in r.evals],
            r.drift,
            r.num_params,
            r.checkpoint,
        )
        for r in load_results(out).trials
    }


@pytest.mark.slow
def test_two_workers_give_the_sequential_numbers_and_weights(tmp_path, tiny_experiment):
    """On the CPU, bit for bit (on CUDA: within bf16 tolerance, the cuda test below)."""
    exp = dataclasses.replace(tiny_experiment, schemes=("learned",))  # 2 tasks x 2 seeds
    run_experiment(exp, tmp_path / "one", progress=False, workers=1, device="cpu")
    summary = run_experiment(exp, tmp_path / "two", progress=False, workers=2, threads=1, device="cpu")
    assert (summary.planned, summary.trained) == (4, 4)
    one, two = _stored(tmp_path / "one"), _stored(tmp_path / "two")
    assert one == two  # metrics, curves, drift, and the same checkpoint folder names
    for folder in {record[-1] for record in one.values()}:
        first = load_file(tmp_path / "one" / folder / "model.safetensors")
        second = load_file(tmp_path / "two" / folder / "model.safetensors")
        assert first.keys() == second.keys()
        for name in first:
            assert torch.equal(first[name], second[name]), (folder, name)
        assert (tmp_path / "one" / folder / "posembed_model.json").read_text() == (
            tmp_path / "two" / folder / "posembed_model.json"
        ).read_text()
    assert not list((tmp_path / "two").rglob("*.tmp"))


@pytest.mark.slow
def test_an_interrupted_parallel_run_resumes(tmp_path, tiny_experiment):
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",))  # 2 schemes x 2 seeds

    class Stop(Exception):
        pass

    def stop(result):
        raise Stop

    with pytest.raises(Stop):
        run_experiment(exp, tmp_path, progress=False, checkpoints=False, workers=2, threads=1, on_trial=stop)
    assert len(load_results(tmp_path).trials) == 1
    summary = run_experiment(exp, tmp_path, progress=False, checkpoints=False, workers=2, threads=1)
    assert (summary.skipped, summary.trained) == (1, 3)


def test_default_workers_fill_the_cores(monkeypatch):
    monkeypatch.setattr(workers_module, "available_cores", lambda: 16)
    assert (default_workers(1), default_workers(4), default_workers(5), default_workers(32)) == (16, 4, 3, 1)


def test_workers_must_be_positive(tmp_path, capsys):
    assert main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path / "out"), "--workers", "0"]) == 2
    assert "--workers must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_worker_killed_mid_trial_is_one_clear_error():
    cfg = tiny_trial(steps=100000)  # runs until killed
    with pytest.raises(WorkerError, match="a trial worker died while training copy/learned/base/seed0"):
        with TrialPool(1, 1, keep_models=False) as pool:
            results = pool.run([cfg])  # submitted now: its worker is started
            for process in list(pool._executor._processes.values()):  # noqa: SLF001 - the test's handle on it
                process.kill()
            next(results)


def _children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(child) for child in (task / "children").read_text().split()}
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_no_worker_outlives_a_killed_parent(tmp_path):
    args = [
        sys.executable,
        "-m",
        "posembed.cli",
        "lab",
        "run",
        "--preset",
        "smoke",
        "--out",
        str(tmp_path),
        "--no-checkpoints",
        "--threads",
        "1",
        "--workers",
        "2",
        "--quiet",
        "--set",
        "tasks=copy",
        "--set",
        "schemes=learned,nope",
        "--set",
        "dim=16",
        "--set",
        "depth=1",
        "--set",
        "batch=4",
        "--set",
        "eval_batches=1",
        "--set",
        "steps=100000",
    ]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, workers = time.monotonic() + 120, set()
        while len(workers) < 2 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = {pid for pid in _children(process.pid) if b"spawn_main" in _cmdline(pid)}
        assert len(workers) == 2, process.stderr.read() if process.poll() is not None else "no workers started"
        time.sleep(1.0)  # the workers are training now
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in workers if _alive(pid)], "a worker outlived its parent"
    finally:
        if process.poll() is None:
            process.kill()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


class _RecordingPool:
    """Stands in for :class:`TrialPool` where the device policy says CUDA on a CPU machine: records how
    the runner built it, and trains each trial on the CPU (the policy is mocked, not the training)."""

    built: list[tuple[int, str]] = []

    def __init__(self, workers, threads, *, keep_models=True, device="auto"):
        self.workers, self.keep_models, self.device = workers, keep_models, device
        _RecordingPool.built.append((workers, device))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def run(self, todo):
        from posembed.lab.training.train import train_trial

        for cfg in todo:
            result, model = train_trial(cfg, device="cpu")
            yield cfg, result, model if self.keep_models else None


def test_on_cuda_workers_share_the_device(tmp_path, monkeypatch, tiny_experiment):
    """With the device policy saying CUDA, ``workers=2`` is a pool of two processes on that device
    (no longer one trial at a time), and ``workers=None`` asks the plan with the CUDA device."""
    from posembed._utils import devices
    from posembed.lab.sweep import worker_plan

    monkeypatch.setattr(devices, "resolve_device", lambda spec="auto": torch.device("cuda"))
    monkeypatch.setattr(workers_module, "TrialPool", _RecordingPool)
    _RecordingPool.built = []
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",), schemes=("learned",))
    run_experiment(exp, tmp_path / "given", progress=False, checkpoints=False, workers=2, threads=1)
    assert _RecordingPool.built == [(2, "cuda")]
    asked = []
    monkeypatch.setattr(worker_plan, "plan_workers", lambda todo, device, *, threads: asked.append(str(device)) or 2)
    run_experiment(exp, tmp_path / "planned", progress=False, checkpoints=False, workers=None, threads=1)
    assert asked == ["cuda"] and _RecordingPool.built == [(2, "cuda"), (2, "cuda")]
    assert len(load_results(tmp_path / "planned").trials) == 2


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_trials_side_by_side_on_cuda_match_each_trial_alone(tmp_path, tiny_experiment):
    """Two worker processes sharing the GPU: each trial's losses equal those of the trial trained
    alone on it, within bf16 tolerance (autocast bf16; CUDA promises no bit-for-bit determinism)."""
    exp = dataclasses.replace(tiny_experiment, schemes=("learned", "rope"))  # copy and charlm, 2 seeds
    run_experiment(exp, tmp_path / "alone", progress=False, checkpoints=False, workers=1, device="cuda")
    summary = run_experiment(
        exp, tmp_path / "shared", progress=False, checkpoints=False, workers=2, threads=1, device="cuda"
    )
    assert summary.trained == 8
    alone = {r.trial_id: r for r in load_results(tmp_path / "alone").trials}
    shared = {r.trial_id: r for r in load_results(tmp_path / "shared").trials}
    assert alone.keys() == shared.keys()
    for trial_id, record in shared.items():
        expected = alone[trial_id]
        assert [step for step, _ in record.curve] == [step for step, _ in expected.curve]
        assert [loss for _, loss in record.curve] == pytest.approx(
            [loss for _, loss in expected.curve], rel=2e-2, abs=2e-2
        )
        for point, reference in zip(record.evals, expected.evals):
            assert (point.metric, point.length) == (reference.metric, reference.length)
            if point.metric in ("val_loss", "perplexity"):
                assert point.value == pytest.approx(reference.value, rel=2e-2, abs=2e-2), (trial_id, point)
