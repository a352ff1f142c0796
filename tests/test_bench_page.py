"""BENCHMARKS.md's "Latest full run" is the run stored under results/bench/, laid out by the bench's own report."""

from __future__ import annotations

import json

from tools import bench_page
from tools.pages import check_block, read_block


def test_the_page_holds_the_stored_run():
    page = bench_page.PAGE.read_text(encoding="utf-8")
    assert not check_block(page, bench_page.NAME, bench_page.body())


def test_every_target_and_row_of_the_stored_run_is_on_the_page():
    payload = json.loads((bench_page.RUN / "results.json").read_text(encoding="utf-8"))
    block = read_block(bench_page.PAGE.read_text(encoding="utf-8"), bench_page.NAME)
    assert payload["quick"] is False and payload["machine"]["device"] == "cpu"  # a full CPU run
    assert all(f"| {t['target']} | {t['measured']} |" in block for t in payload["targets"])
    assert all(f"| {r['case']} | {r['impl']} |" in block for r in payload["rows"])


def test_a_changed_number_is_caught(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    payload = json.loads((bench_page.RUN / "results.json").read_text(encoding="utf-8"))
    payload["rows"][0]["median_ms"] = (payload["rows"][0]["median_ms"] or 1.0) * 2
    (run / "results.json").write_text(json.dumps(payload), encoding="utf-8")
    (run / "meta.json").write_text((bench_page.RUN / "meta.json").read_text(encoding="utf-8"), encoding="utf-8")
    page = bench_page.PAGE.read_text(encoding="utf-8")
    assert check_block(page, bench_page.NAME, bench_page.body(run))
