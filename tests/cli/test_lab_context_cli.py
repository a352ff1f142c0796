"""``posembed lab context`` and ``posembed lab extend``: end to end in a reduced form, and bad input."""

from __future__ import annotations

import json

import pytest
import torch

from posembed.cli import main

REDUCED = ["--set", "steps=12", "--set", "passkey_only_steps=4", "--set", "finetune_steps=2", "--set", "scales=1,2"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("context") / "study"
    assert main(["lab", "context", "--preset", "context-smoke", "--out", str(out), "--device", "cpu", *REDUCED]) == 0
    return out


def test_context_study_writes_store_models_and_report(study):
    assert (study / "context.sqlite").is_file()
    assert (study / "report" / "context.md").is_file() and (study / "report" / "context.html").is_file()
    assert "Which context extension works?" in (study / "report" / "context.md").read_text()
    models = {p.name for p in study.glob("models/*/*")}
    assert {"rope", "alibi", "nope", "fire"} <= models
    assert "| FIRE |" in (study / "report" / "context.md").read_text()


def test_context_study_resumes_without_retraining(study, capsys):
    before = {p: p.stat().st_mtime_ns for p in study.glob("models/*/rope/*")}
    assert main(["lab", "context", "--preset", "context-smoke", "--out", str(study), *REDUCED]) == 0
    assert {p: p.stat().st_mtime_ns for p in study.glob("models/*/rope/*")} == before


def test_lab_extend_reevaluates_a_stored_rope_model(study, capsys):
    checkpoint = next(study.glob("models/*/rope"))
    assert main(["lab", "extend", str(checkpoint), "--method", "yarn", "--factor", "2", "--device", "cpu", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {row["method"] for row in rows} == {"yarn"}
    assert {row["length"] for row in rows} == {96, 192}
    assert all(row["value"] is None or row["value"] >= 0 for row in rows)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lab", "extend", "no-such-folder", "--method", "yarn", "--factor", "2"], "not a posembed lab checkpoint"),
        (["lab", "extend", ".", "--method", "yarn", "--factor", "0"], "--factor must be > 0"),
        (["lab", "context", "--preset", "contxt"], "unknown context preset 'contxt'"),
        (["lab", "context", "--preset", "context-smoke", "--set", "step=3"], "unknown context key 'step'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
@pytest.mark.parametrize("action", [["context", "--preset", "context-smoke"], ["extend", ".", "--method", "yarn", "--factor", "2"]])
def test_device_cuda_without_cuda_is_one_line_and_exit_2(action, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["lab", *action, "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device: device 'cuda' asked for CUDA" in err[0] and "use --device cpu" in err[0], err
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_unknown_device_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["lab", "context", "--preset", "context-smoke", "--device", "tpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown device 'tpu'" in err[0], err
