"""Smoke test of ``posembed bench`` (the suites in :mod:`posembed.bench`) on tiny shapes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("x_transformers")

from posembed.bench import attention as bench_attention  # noqa: E402
from posembed.bench import embeddings as bench_embeddings  # noqa: E402
from posembed.bench import rope as bench_rope  # noqa: E402
from posembed.bench import run_suites  # noqa: E402
from posembed.bench import training as bench_training  # noqa: E402
from posembed.bench.harness import compare, rows_from_times, run_worker  # noqa: E402
from posembed.cli import main  # noqa: E402


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(bench_embeddings, "QUICK", {"batch": 2, "length": 16, "width": 32, "vocab": 100})
    monkeypatch.setattr(bench_rope, "QUICK", (1, 2, 16, 8))
    monkeypatch.setattr(bench_training, "CONFIG", {"depth": 1, "heads": 2, "dim": 16, "block": 8, "batch": 2})


def test_bench_cli_writes_json_and_markdown_side_by_side(tiny, tmp_path, capsys):
    argv = ["bench", "--quick", "--repeats", "1", "--out", str(tmp_path)]
    for suite in ("embeddings", "rope", "training"):
        argv += ["--only", suite]
    assert main(argv) == 0
    payload = json.loads((tmp_path / "results.json").read_text())
    impls = {(row["section"], row["impl"]) for row in payload["rows"] if row["median_ms"]}
    for expected in [
        (bench_embeddings.SECTION, bench_embeddings.REFERENCE),
        (bench_embeddings.SECTION, bench_embeddings.FUSED),
        (bench_rope.SECTION, bench_rope.REFERENCE),
        (bench_rope.SECTION, bench_rope.POSEMBED),
        (bench_rope.SECTION, "rotary-embedding-torch"),
        (bench_rope.SECTION, "x-transformers"),
        (bench_training.SECTION, bench_training.REFERENCE),
        (bench_training.SECTION, "posembed Decoder (learned absolute)"),
    ]:
        assert expected in impls
    references = [r for r in payload["rows"] if r["impl"] in (bench_embeddings.REFERENCE, bench_rope.REFERENCE)]
    assert references and all(r["speedup"] == 1.0 for r in references)
    assert any(t["target"].startswith("embedding block forward (eval)") for t in payload["targets"])
    assert payload["machine"]["cores"] >= 1 and payload["machine"]["torch"]
    markdown = (tmp_path / "results.md").read_text()
    assert "| target | measured | met |" in markdown and "### RoPE" in markdown
    assert "wrote" in capsys.readouterr().out


@pytest.mark.slow
def test_attention_worker_measures_time_and_memory_in_a_fresh_process():
    spec = {"impl": bench_attention.BASELINE, "scheme": "alibi", "length": 32, "mode": "train", "repeats": 1}
    result = run_worker("posembed.bench.attention", spec, timeout=120)
    assert result.keys() == {"median_ms", "peak_mb", "step_mb"}, result
    assert result["median_ms"] > 0 and result["peak_mb"] > result["step_mb"] >= 0
    other = bench_attention.worker(dict(spec, impl="x-transformers", scheme="t5_bias", mode="infer"))
    assert other["median_ms"] > 0


def test_failing_implementation_is_reported_not_fatal():
    def broken():
        raise RuntimeError("boom")

    times = compare({"ref": lambda: None, "broken": broken}, warmup=1, repeats=2)
    rows = rows_from_times("s", "c", times, "ref")
    assert [r.impl for r in rows] == ["ref", "broken"]
    assert rows[1].median_ms is None and "boom" in rows[1].note


def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        run_suites(only=["nope"], out=tmp_path)
    assert main(["bench", "--threads", "0", "--out", str(tmp_path)]) == 2
    assert "--threads must be >= 1, got 0" in capsys.readouterr().err


def test_help_states_the_measured_quick_time_and_the_bench_extra(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--quick small shapes: about 70 s of CPU time" in text
    assert "pip install 'posembed[bench]'" in text
