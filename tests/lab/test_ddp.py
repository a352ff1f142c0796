"""One trial data-parallel under torchrun (2 processes, gloo, loopback) vs a single process."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys

import pytest

from posembed.lab.sweep.ddp_trial import main as ddp_main

ARGS = [
    "--preset",
    "smoke",
    "--task",
    "copy",
    "--scheme",
    "learned",
    "--set",
    "steps=6",
    "--set",
    "dim=16",
    "--set",
    "depth=1",
    "--set",
    "batch=8",
    "--set",
    "eval_batches=1",
    "--set",
    "log_every=2",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _skip_without_the_launcher() -> None:
    """Skip exactly when what the tests run cannot run: ``python -m torch.distributed.run`` with gloo.

    (They do not call a ``torchrun`` executable, so whether one is on PATH does not matter.)
    """
    import importlib.util

    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("this torch build has no torch.distributed")
    if importlib.util.find_spec("torch.distributed.run") is None:
        pytest.skip("torch.distributed.run (the module torchrun runs) cannot be imported")
    if not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")


@pytest.mark.slow
def test_two_process_ddp_matches_single_process_in_kind(tmp_path):
    _skip_without_the_launcher()
    out = tmp_path / "ddp.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        "-m",
        "posembed.lab.sweep.ddp_trial",
        *ARGS,
        "--out",
        str(out),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    single_out = tmp_path / "single.json"
    assert ddp_main([*ARGS, "--out", str(single_out)]) == 0
    ddp, single = json.loads(out.read_text()), json.loads(single_out.read_text())
    assert ddp["world_size"] == 2 and single["world_size"] == 1
    assert ddp.keys() == single.keys() and ddp["config"] == single["config"] and ddp["trial_id"] == single["trial_id"]
    assert [step for step, _ in ddp["curve"]] == [step for step, _ in single["curve"]] == [2, 4, 6]
    assert [(e["metric"], e["length"]) for e in ddp["evals"]] == [(e["metric"], e["length"]) for e in single["evals"]]
    assert all(math.isfinite(loss) for _, loss in ddp["curve"])
    assert abs(ddp["final_loss"] - single["final_loss"]) < 0.1
    assert ddp["drift"].keys() == single["drift"].keys() and ddp["drift"]["rel_frobenius"] > 0


@pytest.mark.slow
def test_lab_run_under_torchrun_trains_each_trial_once_data_parallel(tmp_path):
    """`torchrun -m posembed.cli lab run`: 2 ranks train every trial together; rank 0 alone writes."""
    from posembed.lab.sweep.store import load_results

    _skip_without_the_launcher()
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        "-m",
        "posembed.cli",
        "lab",
        "run",
        "--preset",
        "smoke",
        "--out",
        str(out),
        "--set",
        "tasks=copy",
        "--set",
        "schemes=learned,nope",
        "--set",
        "steps=4",
        "--set",
        "dim=16",
        "--set",
        "depth=1",
        "--set",
        "batch=8",
        "--set",
        "eval_batches=1",
        "--set",
        "log_every=2",
        "--set",
        "copy.context=3",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("2 trials trained, 0 already stored (2 processes)") == 1, done.stdout
    results = load_results(out)
    assert sorted(r.config.scheme for r in results.trials) == ["learned", "nope"] and results.skipped == []
    assert {r.world_size for r in results.trials} == {2}
    assert all((out / r.checkpoint / "model.safetensors").is_file() for r in results.trials)
