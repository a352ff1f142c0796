"""``posembed lab run`` / ``lab report``: bad input ends in one clear line, exit 2, no traceback."""

from __future__ import annotations

import pytest

from posembed.cli import main
from posembed.lab.sweep.store import load_results

TINY = [
    "--set",
    "tasks=copy",
    "--set",
    "schemes=learned",
    "--set",
    "steps=2",
    "--set",
    "dim=16",
    "--set",
    "depth=1",
    "--set",
    "batch=4",
    "--set",
    "eval_batches=1",
    "--set",
    "copy.context=3",
]


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_run_writes_a_store_and_resumes(tmp_path, capsys):
    assert main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path), *TINY]) == 0
    assert "1 trials trained, 0 already stored" in capsys.readouterr().out
    assert main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path), *TINY]) == 0
    assert "0 trials trained, 1 already stored" in capsys.readouterr().out
    (record,) = load_results(tmp_path).trials
    assert (record.config.task, record.config.scheme, record.config.steps) == ("copy", "learned", 2)
    assert (tmp_path / record.checkpoint / "posembed_model.json").is_file()


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--preset", "smok"],
            "unknown preset 'smok' (did you mean 'smoke'?); known presets: calibration, full, lengthgen, quick, smoke",
        ),
        (["--preset", "smoke", "--set", "schemes=learned,ropee"], "unknown scheme 'ropee'"),
        (["--preset", "smoke", "--set", "stepz=3"], "unknown key 'stepz'"),
        (["--preset", "smoke", "--set", "steps=many"], "steps expects an integer, got 'many'"),
        (["--preset", "smoke", "--threads", "0"], "--threads must be at least 1, got 0"),
    ],
)
def test_bad_arguments(tmp_path, capsys, extra, message):
    err = _error(capsys, ["lab", "run", "--out", str(tmp_path), *extra])
    assert err.startswith("posembed lab: error: ") and message in err


@pytest.mark.parametrize(
    "override, message",
    [
        ("lr=nan", "lr must be a finite number, got nan"),
        ("lr=inf", "lr must be a finite number, got inf"),
        ("beta2=1.5", "beta2 must be in [0, 1), got 1.5"),
        ("weight_decay=-1", "weight_decay must be >= 0, got -1.0"),
        ("warmup=-3", "warmup must be >= 0, got -3"),
        ("backend=bogus", "backend='bogus' is not one of auto, "),
        ("eval_scales=nan", "eval_scales must be finite positive numbers, got nan"),
        ("seeds=1,1", "seeds lists 1 more than once"),
        ('scheme_kwargs={"bogus": 1}', "scheme 'learned' takes no argument 'bogus'"),
    ],
)
def test_bad_values_fail_before_the_out_dir_is_claimed(tmp_path, capsys, override, message):
    out = tmp_path / "out"
    err = _error(capsys, ["lab", "run", "--preset", "smoke", "--out", str(out), *TINY, "--set", override])
    assert message in err
    assert not out.exists()


def test_corrected_rerun_after_a_bad_value_uses_the_same_out_dir(tmp_path, capsys):
    _error(capsys, ["lab", "run", "--preset", "smoke", "--out", str(tmp_path), *TINY, "--set", "copy.lr=nan"])
    assert not (tmp_path / "results.sqlite").exists()
    assert main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path), "--no-checkpoints", *TINY]) == 0
    assert "1 trials trained" in capsys.readouterr().out


def test_threads_default_to_one(tmp_path, capsys, monkeypatch):
    import torch

    with pytest.raises(SystemExit):
        main(["lab", "run", "--help"])
    assert "default: 1" in " ".join(capsys.readouterr().out.split())
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    assert main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path), "--no-checkpoints", *TINY]) == 0
    assert calls == [1]


@pytest.mark.parametrize(
    "content, message",
    [(b"", "is empty"), (b"to be or not", "shorter than the"), (b"caf\xe9 " * 400, "is not UTF-8")],
)
def test_bad_text_files(tmp_path, capsys, content, message):
    text = tmp_path / "text.txt"
    text.write_bytes(content)
    err = _error(
        capsys,
        [
            "lab",
            "run",
            "--preset",
            "smoke",
            "--out",
            str(tmp_path / "out"),
            "--set",
            "tasks=charlm",
            "--set",
            f"text={text}",
        ],
    )
    assert message in err
    err = _error(
        capsys,
        [
            "lab",
            "run",
            "--preset",
            "smoke",
            "--out",
            str(tmp_path / "out"),
            "--set",
            "tasks=charlm",
            "--set",
            f"text={tmp_path / 'missing.txt'}",
        ],
    )
    assert "does not exist" in err
    err = _error(
        capsys,
        [
            "lab",
            "run",
            "--preset",
            "smoke",
            "--out",
            str(tmp_path / "out"),
            "--set",
            "tasks=charlm",
            "--set",
            f"text={tmp_path}",
        ],
    )
    assert "is a folder, not a text file" in err
    assert not (tmp_path / "out").exists()


def test_foreign_store(tmp_path, capsys):
    assert main(["lab", "run", "--preset", "smoke", "--out", str(tmp_path), "--no-checkpoints", *TINY]) == 0
    capsys.readouterr()
    err = _error(capsys, ["lab", "run", "--preset", "smoke", "--out", str(tmp_path), *TINY, "--set", "seeds=5"])
    assert "holds the results of another experiment ('smoke'" in err and "choose another --out folder" in err


def test_report_needs_a_store(tmp_path, capsys):
    err = _error(capsys, ["lab", "report", str(tmp_path)])
    assert "holds no results.sqlite; run `posembed lab run` first" in err
    assert "posembed.lab.report is missing" not in err


def test_foreign_database_is_refused_by_run_and_report(tmp_path, capsys):
    import sqlite3

    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.close()
    before = (tmp_path / "results.sqlite").read_bytes()
    err = _error(capsys, ["lab", "run", "--preset", "smoke", "--out", str(tmp_path), *TINY])
    assert "is not a posembed results store (it holds tables photos)" in err
    err = _error(capsys, ["lab", "report", str(tmp_path)])
    assert "is not a posembed results store (it holds tables photos)" in err
    assert (tmp_path / "results.sqlite").read_bytes() == before


def test_corrupt_store_file(tmp_path, capsys):
    (tmp_path / "results.sqlite").write_bytes(b"this is not sqlite" * 100)
    err = _error(capsys, ["lab", "run", "--preset", "smoke", "--out", str(tmp_path), *TINY])
    assert "is not a posembed results store" in err


def test_a_table_shorter_than_the_training_inputs_fails_before_the_out_dir_is_claimed(tmp_path, capsys):
    """copy with context 3 trains on 7-token inputs: a 4-row learned table could only fail in training."""
    out = tmp_path / "out"
    err = _error(capsys, ["lab", "run", "--preset", "smoke", "--out", str(out), *TINY, "--set", "table_size=4"])
    assert "copy/learned/base trains on 7-position inputs (context=3) but its positions stop at 4 (table_size=4)" in err
    assert "raise table_size to at least 7" in err
    assert not out.exists()
    err = _error(
        capsys,
        [
            "lab",
            "run",
            "--preset",
            "smoke",
            "--out",
            str(out),
            *TINY,
            "--set",
            "table_size=6",
            "--set",
            "schemes=rope",
            "--set",
            "variants=randomized",
        ],
    )
    assert "copy/rope/randomized trains on 7-position inputs" in err and "stop at 6 (table_size=6)" in err
    assert not out.exists()
    # a table that only misses evaluated lengths is allowed: those are recorded as "n/a (table limit)"
    assert (
        main(["lab", "run", "--preset", "smoke", "--out", str(out), "--no-checkpoints", *TINY, "--set", "table_size=7"])
        == 0
    )
    (record,) = load_results(out).trials
    assert record.metric("exact_match")[6] is None


def test_a_path_like_experiment_name_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = _error(capsys, ["lab", "run", "--preset", "smoke", *TINY, "--set", "name=x/../../y"])
    assert "experiment name 'x/../../y' must be a plain name" in err
    assert list(tmp_path.iterdir()) == []


def test_a_cuda_device_without_cuda_is_one_line_and_exit_2(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    err = _error(capsys, ["lab", "run", "--preset", "smoke", "--device", "cuda", "--out", str(tmp_path / "out")])
    assert "device 'cuda' asked for CUDA" in err and "--device cpu" in err
    assert not (tmp_path / "out").exists()


def test_device_cpu_trains_like_auto_here(tmp_path):
    """``auto`` is the CPU here (the same numbers), or CUDA (the same within bf16 autocast's tolerance)."""
    from posembed._utils.devices import resolve_device
    from posembed.lab.sweep.store import load_results

    argv = [
        "lab",
        "run",
        "--preset",
        "smoke",
        "--set",
        "steps=3",
        "--set",
        "tasks=copy",
        "--set",
        "schemes=alibi",
        "--workers",
        "1",
        "--quiet",
        "--no-checkpoints",
    ]
    assert main([*argv, "--device", "cpu", "--out", str(tmp_path / "cpu")]) == 0
    assert main([*argv, "--out", str(tmp_path / "auto")]) == 0
    cpu, auto = load_results(tmp_path / "cpu"), load_results(tmp_path / "auto")
    tolerance = 0.0 if resolve_device("auto").type == "cpu" else 2e-2
    assert [r.final_loss for r in auto.trials] == pytest.approx(
        [r.final_loss for r in cpu.trials], rel=tolerance, abs=tolerance
    )


def test_the_default_worker_count_is_the_plans(tmp_path, monkeypatch):
    """Without --workers the sweep asks :func:`plan_workers` (with the run's device and --threads);
    --workers N is taken as given."""
    from posembed.lab.sweep import worker_plan

    asked = []

    def plan(todo, device, *, threads):
        asked.append((len(todo), str(device), threads))
        return 1

    monkeypatch.setattr(worker_plan, "plan_workers", plan)
    argv = ["lab", "run", "--preset", "smoke", "--quiet", "--no-checkpoints", "--device", "cpu", *TINY]
    assert main([*argv, "--out", str(tmp_path / "default"), "--threads", "2"]) == 0
    assert asked == [(1, "cpu", 2)]
    assert main([*argv, "--out", str(tmp_path / "given"), "--workers", "1"]) == 0
    assert asked == [(1, "cpu", 2)]
