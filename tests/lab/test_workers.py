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
from posembed.lab import workers as workers_module
from posembed.lab.runner import run_experiment
from posembed.lab.store import load_results
from posembed.lab.workers import TrialPool, WorkerError, default_workers
from tests.lab.conftest import tiny_trial


def _stored(out: Path) -> dict[str, tuple]:
    """Every stored number of every trial, by trial id (times left out: they differ run to run)."""
    return {
        r.trial_id: (r.final_loss, r.curve, [(p.metric, p.length, p.value, p.note) for p in r.evals], r.drift,
                     r.num_params, r.checkpoint)
        for r in load_results(out).trials
    }


def test_two_workers_give_the_sequential_numbers_and_weights(tmp_path, tiny_experiment):
    exp = dataclasses.replace(tiny_experiment, schemes=("learned",))  # 2 tasks x 2 seeds
    run_experiment(exp, tmp_path / "one", progress=False, workers=1)
    summary = run_experiment(exp, tmp_path / "two", progress=False, workers=2, threads=1)
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
            tmp_path / "two" / folder / "posembed_model.json").read_text()
    assert not list((tmp_path / "two").rglob("*.tmp"))


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


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_no_worker_outlives_a_killed_parent(tmp_path):
    args = [sys.executable, "-m", "posembed.cli", "lab", "run", "--preset", "smoke", "--out", str(tmp_path),
            "--no-checkpoints", "--threads", "1", "--workers", "2", "--quiet", "--set", "tasks=copy",
            "--set", "schemes=learned,nope", "--set", "dim=16", "--set", "depth=1", "--set", "batch=4",
            "--set", "eval_batches=1", "--set", "steps=100000"]
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
