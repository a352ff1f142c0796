"""benchmarks/compare_revision.py: its arguments, its report's arithmetic, and the revision check."""

from __future__ import annotations

import importlib

import pytest

compare = importlib.import_module("benchmarks.compare_revision")


def _child(ours: float, ref: float, forward: float) -> dict:
    return {
        "posembed": "/x/src/posembed",
        "ms": {"posembed forward+backward": ours, "posembed forward": forward, "transformers forward+backward": ref},
        "ratios": {"forward+backward": ref / ours},
    }


def test_report_gives_medians_spreads_and_paired_ratios():
    results = {"rope": {
        "abc1234": [_child(60.0, 300.0, 36.0), _child(70.0, 350.0, 38.0), _child(65.0, 320.0, 37.0)],
        "current": [_child(30.0, 310.0, 36.0), _child(35.0, 340.0, 37.0), _child(40.0, 330.0, 39.0)],
    }}  # fmt: skip
    text = compare.report("abc1234", results, ("abc1234", "current"))
    assert "### rope (3 rounds" in text
    assert "| posembed forward+backward | 65.0 (60.0–70.0) | 35.0 (30.0–40.0) | 0.50x |" in text
    assert "| forward+backward | 5.00x | 9.71x |" in text  # the medians of 5.0, 5.0, 4.92 and of 10.3, 9.71, 8.25


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["HEAD", "--rounds", "0"], "--rounds: must be an integer >= 1, got 0"),
        (["HEAD", "--repeats", "two"], "--repeats: must be an integer >= 1, got 'two'"),
        (["HEAD", "--threads", "-1"], "--threads: must be an integer >= 1, got -1"),
        ([], "give the git revision to compare against"),
    ],
)
def test_bad_arguments_are_one_clear_error(argv, message, capsys):
    with pytest.raises(SystemExit):
        compare.main(argv)
    assert message in capsys.readouterr().err


def test_unknown_work_and_unknown_revision_are_named():
    with pytest.raises(SystemExit, match=r"unknown work\(s\) \['ropes'\]; choose from rope, embedding, lab"):
        compare.main(["HEAD", "--work", "ropes"])
    with pytest.raises(SystemExit, match="not a git revision here: 'no-such-revision-xyz'"):
        compare.main(["no-such-revision-xyz", "--work", "rope"])


def test_a_child_that_imported_another_posembed_is_refused(monkeypatch, tmp_path):
    import subprocess

    def fake_run(command, **kwargs):
        stdout = '{"posembed": "/elsewhere/posembed", "ms": {}, "ratios": {}}\n'
        return subprocess.CompletedProcess(command, 0, stdout=stdout)

    monkeypatch.setattr(subprocess, "run", fake_run)
    args = compare.argparse.Namespace(repeats=1, warmup=1, threads=1, timeout=10)
    with pytest.raises(RuntimeError, match="imported posembed from /elsewhere/posembed"):
        compare._run_child(tmp_path / "src", "rope", args)
