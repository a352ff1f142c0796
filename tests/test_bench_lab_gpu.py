"""benchmarks/bench_lab_gpu.py: the lab's GPU targets in one command; checked here on the CPU
(a reduced dry run), the section it writes, and the targets' arithmetic."""

from __future__ import annotations

import importlib
import json

import pytest

bench = importlib.import_module("benchmarks.bench_lab_gpu")


def test_targets_are_issue_28s():
    quick = bench.Target("quick", 36.0, "s", bench.QUICK_FRACTION * bench.CPU_QUICK_SECONDS, "cpu")
    assert quick.limit == pytest.approx(36.58) and quick.met
    assert not bench.Target("context", 15.1, "s", bench.CONTEXT_SMOKE_SECONDS, "cpu").met
    assert bench.Target("calibration", 11.0, "ms/iteration", bench.CALIBRATION_MS, "cpu").met


def test_markdown_names_the_device_and_each_target():
    rows = [bench.Target("`lab run --preset quick`", 40.04, "s", 36.58, "182.9 s on 2 CPU cores", "reduced: steps=2")]
    text = bench.markdown(rows, "cuda:0 (NVIDIA H200, CUDA 13.0, torch 2.11)", "2026-11-26 10:00 UTC")
    assert "on cuda:0 (NVIDIA H200, CUDA 13.0, torch 2.11)" in text
    assert "| `lab run --preset quick` | 40.0 s | <= 36.6 s | 182.9 s on 2 CPU cores | no | reduced: steps=2 |" in text


@pytest.mark.slow
def test_a_reduced_dry_run_on_the_cpu_writes_json_and_markdown(tmp_path, capsys):
    out_json, out_md = tmp_path / "gpu.json", tmp_path / "gpu.md"
    argv = [
        "--device",
        "cpu",
        "--skip-context",
        "--skip-calibration",
        "--json",
        str(out_json),
        "--markdown",
        str(out_md),
    ]
    for override in (
        "tasks=copy",
        "schemes=learned",
        "variants=base",
        "seeds=0",
        "steps=2",
        "dim=16",
        "depth=1",
        "batch=4",
        "eval_batches=1",
    ):
        argv += ["--set", override]
    assert bench.main(argv) == 0
    data = json.loads(out_json.read_text())
    assert data["device"].startswith("cpu (torch ")
    (row,) = data["targets"]
    assert (
        row["work"] == "`lab run --preset quick`"
        and row["measured"] > 0
        and row["met"] is (row["measured"] <= row["limit"])
    )
    assert row["note"].startswith("reduced: tasks=copy")
    assert out_md.read_text() in capsys.readouterr().out


def test_repeats_must_be_positive():
    with pytest.raises(SystemExit):
        bench.main(["--repeats", "0"])


@pytest.mark.slow
def test_a_failing_lab_command_is_one_error_naming_it():
    with pytest.raises(RuntimeError, match="posembed lab run --preset quick .*failed \\(2\\).*unknown key 'stepz'"):
        bench.main(["--device", "cpu", "--skip-context", "--skip-calibration", "--set", "stepz=1"])


def test_the_timeline_splits_a_sweeps_wall_time(monkeypatch):
    """Two kinds, two trials each on 2 workers: startup, span, parallelism, each kind's first-trial extra, tail."""
    from types import SimpleNamespace

    import posembed.lab.sweep.store as store

    def trial(scheme, end, seconds):
        return SimpleNamespace(
            finished_at=f"2026-11-27T10:00:{end:02d}+00:00", seconds=seconds, config=SimpleNamespace(scheme=scheme)
        )

    trials = [trial("alibi", 20, 12.0), trial("rope", 18, 10.0), trial("alibi", 24, 4.0), trial("rope", 23, 5.0)]
    monkeypatch.setattr(store, "load_results", lambda out: SimpleNamespace(trials=trials))
    import datetime

    t0 = datetime.datetime.fromisoformat("2026-11-27T10:00:05+00:00").timestamp()
    spent = bench.timeline(None, t0, t0 + 21.0)  # the process: 10:00:05 to 10:00:26
    assert spent["startup"] == pytest.approx(3.0)  # the first start: alibi's, 10:00:08
    assert spent["trials"] == pytest.approx(16.0) and spent["parallel"] == pytest.approx(31.0 / 16.0)
    assert spent["tail"] == pytest.approx(2.0) and spent["count"] == 4
    assert spent["first_of_kind"] == pytest.approx((12.0 - 4.0) + (10.0 - 5.0))
