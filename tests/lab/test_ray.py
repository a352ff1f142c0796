"""Trials as Ray tasks: the local run's numbers and weights, a lost worker retried, the driver
the only writer. The cluster is one ``ray start --head`` on loopback, started once for the
module and killed (its process group) at the end; the tests skip where Ray is not installed."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from posembed.cli import main
from posembed.lab.sweep import ray_runner
from posembed.lab.sweep.runner import run_experiment
from posembed.lab.sweep.store import load_results

START_TIMEOUT = 90  # seconds for `ray start` on a busy 2-core machine (it takes ~8)
#: CI sets POSEMBED_REQUIRE_RAY=1 (.ci/run installs Ray): there a missing Ray or a head that does not start fails
REQUIRED = os.environ.get("POSEMBED_REQUIRE_RAY") == "1"


def _unavailable(reason: str):
    """Skip, or fail where Ray is required."""
    if REQUIRED:
        pytest.fail(f"POSEMBED_REQUIRE_RAY=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _ray():
    """The ray module (skips without it, fails where it is required)."""
    try:
        import ray
    except ImportError as error:
        _unavailable(f"Ray is not installed ({error}): pip install 'posembed[ray]'")
    return ray


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """``127.0.0.1:PORT`` of a 2-CPU Ray head on loopback only (no dashboard, no auth token)."""
    _ray()
    from ray._private import ray_constants

    ray_bin = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    port, temp = _free_port(), tempfile.mkdtemp(prefix="pe-ray-")  # short: Ray's socket paths must fit
    # loopback only: Ray would swap 127.0.0.1 for the machine's address (the test's private switch for that)
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    command = [
        ray_bin,
        "start",
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=2",
        "--include-dashboard=false",
        f"--temp-dir={temp}",
        "--disable-usage-stats",
        "--block",
    ]
    head = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    before = ray_constants.ENABLE_RAY_CLUSTER
    try:
        _wait_started(head)
        ray_constants.ENABLE_RAY_CLUSTER = False  # this driver, too, stays on 127.0.0.1
        yield f"127.0.0.1:{port}"
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
        _disconnect()
        os.killpg(head.pid, signal.SIGKILL)  # the head's own session: gcs, raylet, its workers
        head.wait(timeout=30)
        shutil.rmtree(temp, ignore_errors=True)


def _wait_started(head: subprocess.Popen) -> None:
    deadline, seen = time.monotonic() + START_TIMEOUT, []
    os.set_blocking(head.stdout.fileno(), False)
    while time.monotonic() < deadline:
        line = head.stdout.readline()
        if line:
            seen.append(line)
            if "Ray runtime started" in line:
                return
        elif head.poll() is not None:
            _unavailable(f"`ray start --head` failed here (exit {head.returncode}): {''.join(seen[-5:])}")
        else:
            time.sleep(0.1)
    _unavailable(f"`ray start --head` did not start in {START_TIMEOUT} s: {''.join(seen[-5:])}")


def _disconnect() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


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


def _assert_same_runs(one: Path, two: Path) -> None:
    first_run, second_run = _stored(one), _stored(two)
    assert first_run == second_run  # metrics, curves, drift and the checkpoint folder names
    for folder in {record[-1] for record in first_run.values()}:
        first, second = load_file(one / folder / "model.safetensors"), load_file(two / folder / "model.safetensors")
        assert first.keys() == second.keys()
        for name in first:
            assert torch.equal(first[name], second[name]), (folder, name)


def _dies_once(marker: Path, victim: str):
    """A trial function whose worker process dies (``os._exit``) on its first attempt at
    ``victim``; defined in a closure so that Ray ships it by value."""

    def train(cfg, keep_model):
        import os

        from posembed.lab.sweep.workers import train_packed

        if cfg.trial_id == victim:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass  # the retry: train
            else:
                os._exit(1)
        return train_packed(cfg, keep_model)

    return train


@pytest.mark.slow
@pytest.mark.ray
def test_ray_auto_starts_a_bounded_local_instance_and_shuts_it_down(tmp_path, tiny_experiment, monkeypatch, caplog):
    """``auto`` finds no cluster on the machine and starts one. Ray's ``auto`` also joins any ``gcs_server``
    process it sees running; another test worker's ``cluster`` may be one (and is killed when that worker's
    module ends, which takes this worker down with it), so the search sees no process here."""
    ray = _ray()
    from ray._private import ray_constants, services

    # no other test's cluster (cached as Ray's own is: ray.init clears that cache)
    monkeypatch.setattr(services, "find_gcs_addresses", functools.cache(lambda: []))
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)  # the new instance listens on 127.0.0.1 only
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # leave ~/.ray alone
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    temp = tempfile.mkdtemp(prefix="pe-ray-")  # Ray's session files go here, not to /tmp/ray
    monkeypatch.setenv("RAY_TMPDIR", temp)
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",), schemes=("learned",), seeds=(0,))
    try:
        with caplog.at_level("INFO", logger="posembed.lab.sweep.ray_runner"):
            summary = run_experiment(exp, tmp_path, progress=False, checkpoints=False, workers=1, threads=1, ray="auto")
    finally:
        _disconnect()
        shutil.rmtree(temp, ignore_errors=True)
    assert summary.trained == 1
    assert "starting a local instance with 1 CPUs" in caplog.text
    assert not ray.is_initialized()  # started here, so shut down here


@pytest.mark.slow
@pytest.mark.ray
def test_ray_tasks_give_the_local_numbers_and_weights_even_when_a_worker_dies(
    cluster, tiny_experiment, tmp_path, monkeypatch
):
    exp = dataclasses.replace(tiny_experiment, schemes=("learned",))  # copy + charlm, 2 seeds
    run_experiment(exp, tmp_path / "local", progress=False, workers=1)
    victim, marker = sorted(_stored(tmp_path / "local"))[0], tmp_path / "died-once"
    monkeypatch.setattr(ray_runner, "train_packed", _dies_once(marker, victim))
    summary = run_experiment(exp, tmp_path / "ray", progress=False, threads=1, workers=None, ray=cluster)
    assert marker.exists(), "the victim's first attempt never ran"
    assert (summary.planned, summary.trained) == (4, 4)  # the lost task was retried
    _assert_same_runs(tmp_path / "local", tmp_path / "ray")
    assert not list((tmp_path / "ray").rglob("*.tmp"))
    again = run_experiment(exp, tmp_path / "ray", progress=False, threads=1, workers=None, ray=cluster)
    assert (again.skipped, again.trained) == (4, 0)  # resume: nothing left, Ray not even joined


@pytest.mark.slow
@pytest.mark.ray
def test_cli_ray_auto_joins_the_cluster_with_progress_lines(cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAY_ADDRESS", cluster)  # --ray auto finds the cluster through it
    out = tmp_path / "out"
    code = main(
        [
            "lab",
            "run",
            "--preset",
            "smoke",
            "--out",
            str(out),
            "--ray",
            "auto",
            "--no-checkpoints",
            "--set",
            "tasks=copy",
            "--set",
            "schemes=learned,alibi",
            "--set",
            "seeds=0",
            "--set",
            "dim=16",
            "--set",
            "depth=1",
            "--set",
            "batch=4",
            "--set",
            "steps=4",
            "--set",
            "eval_batches=1",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "2 trials trained" in captured.out
    assert "lab trials: 1/2 done (copy/" in captured.err and "lab trials: 2/2 done" in captured.err
    assert len(load_results(out).trials) == 2


@pytest.mark.ray
def test_an_address_nothing_listens_on_is_one_line(tmp_path, capsys):
    _ray()
    nowhere = f"127.0.0.2:{_free_port()}"  # loopback, nothing listening
    code = main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path / "out"), "--ray", nowhere])
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot reach the Ray cluster at '127.0.0.2:" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # checked before the out folder is claimed


def test_without_ray_the_cli_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    assert main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path / "out"), "--ray", "auto"]) == 2
    err = capsys.readouterr().err
    assert "--ray needs Ray: pip install 'posembed[ray]' 'torch==" in err and len(err.strip().splitlines()) == 1
    assert err.strip().endswith("-c constraints.txt does the same)")  # the pin that keeps a CPU-only torch
    assert not (tmp_path / "out").exists()
    with pytest.raises(ImportError, match=r"pip install 'posembed\[ray\]'"):
        run_experiment(get_smoke(), tmp_path / "api", progress=False, ray="auto")
    assert not (tmp_path / "api").exists()


def test_ray_is_refused_under_torchrun(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun sets it; refused before any process group
    assert main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path / "out"), "--ray", "auto"]) == 2
    assert "--ray does not run under torchrun" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def get_smoke():
    from posembed.lab.presets import get_preset

    return get_preset("smoke")
