"""BENCHMARKS.md's "Latest full run" is the runs stored under results/bench/, laid out by the bench's own report."""

from __future__ import annotations

import json
import shutil

from tools import bench_page
from tools.pages import check_block, read_block


def test_the_page_holds_the_stored_runs():
    page = bench_page.PAGE.read_text(encoding="utf-8")
    assert not check_block(page, bench_page.NAME, bench_page.body())


def test_every_target_of_every_run_and_every_row_of_the_latest_is_on_the_page():
    block = read_block(bench_page.PAGE.read_text(encoding="utf-8"), bench_page.NAME)
    folders = bench_page.runs()
    assert len(folders) >= 2 and [f.name for f in folders] == sorted(f.name for f in folders)
    for folder in folders:
        payload = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        assert payload["quick"] is False and payload["machine"]["device"] == "cpu"  # full CPU runs
        assert all(str(t["measured"]) in block for t in payload["targets"])
        assert f"{folder.name} (" in block
    latest = json.loads((folders[-1] / "results.json").read_text(encoding="utf-8"))
    assert all(f"| {r['case']} | {r['impl']} |" in block for r in latest["rows"])


def test_a_changed_number_is_caught(tmp_path):
    for folder in bench_page.runs():
        shutil.copytree(folder, tmp_path / folder.name)
    latest = sorted(tmp_path.iterdir())[-1] / "results.json"
    payload = json.loads(latest.read_text(encoding="utf-8"))
    payload["rows"][0]["median_ms"] = (payload["rows"][0]["median_ms"] or 1.0) * 2
    latest.write_text(json.dumps(payload), encoding="utf-8")
    page = bench_page.PAGE.read_text(encoding="utf-8")
    assert bench_page.body(tmp_path) != bench_page.body()
    assert check_block(page, bench_page.NAME, bench_page.body(tmp_path))


def test_the_page_holds_the_stored_rope_ab():
    page = bench_page.PAGE.read_text(encoding="utf-8")
    assert not check_block(page, bench_page.AB_NAME, bench_page.ab_body())
    stored = json.loads((bench_page.AB / "compare.json").read_text(encoding="utf-8"))
    assert stored["revision"] == "4d3ea1e" and len(stored["results"]["rope"]["current"]) == 6  # 6 rounds


def test_the_worker_plan_table_is_the_stored_timings():
    """BENCHMARKS.md's worker-count table (issue 43) quotes the medians stored in results/bench/workers-plan-*."""
    folder = bench_page.RESULTS / "workers-plan-2026-11-28"
    smoke = json.loads((folder / "smoke-2-vs-1.json").read_text(encoding="utf-8"))
    quick = json.loads((folder / "quick-seed0-default-vs-1.json").read_text(encoding="utf-8"))
    text = bench_page.PAGE.read_text(encoding="utf-8")
    assert smoke["same_numbers"] and quick["same_numbers"]
    assert f"1 (in this process): {smoke['median_workers_1']:.1f} s" in text
    assert f"2 workers: {smoke['median_workers_2']:.1f} s" in text
    assert f"| {smoke['median_workers_1'] / smoke['median_workers_2']:.2f} |" in text
    assert f"2 workers: {quick['median_workers_default']:.1f} s | 1: {quick['median_workers_1']:.1f} s" in text
    assert f"| {quick['ratio']:.2f} |" in text
