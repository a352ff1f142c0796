"""Reports at 1200 px in headless chromium: every table fits, no word is broken, words sit left.

A probe script measures, once the page has loaded, the page's ``scrollWidth`` against its
``clientWidth``, and for every table whether it sits in a wrapper that scrolls sideways
(``overflow-x: auto``), fits the page, and shows all its columns without scrolling; for every
cell whether the browser may break a word in it (``overflow-wrap`` / ``word-break``), and whether
a cell of words is left-aligned. Every report the package writes is built small (inspect, lab,
lab context, extend-eval) and checked. Skips cleanly where chromium is missing (CI installs it).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch

from posembed._utils.html import HtmlReport
from tests.browser import FLAGS, require_chromium

pytestmark = pytest.mark.browser

WIDTH = 1200
_PROBE = """
<script>
window.addEventListener("load", function () {
  var root = document.documentElement;
  var tables = Array.prototype.slice.call(document.querySelectorAll("table")).map(function (table) {
    var wrap = table.parentElement;
    var style = window.getComputedStyle(wrap);
    var rect = wrap.getBoundingClientRect();
    var cells = Array.prototype.slice.call(table.querySelectorAll("th, td"));
    var breakable = cells.filter(function (cell) {
      var css = window.getComputedStyle(cell);
      return css.overflowWrap !== "normal" || css.wordBreak !== "normal";
    }).map(function (cell) { return cell.textContent; });
    var rightWords = Array.prototype.slice.call(table.querySelectorAll("td.text, th.text")).filter(function (cell) {
      var align = window.getComputedStyle(cell).textAlign;
      return align !== "left" && align !== "start";
    }).map(function (cell) { return cell.textContent; });
    var headers = Array.prototype.slice.call(table.querySelectorAll("th")).map(function (th) {
      return th.textContent;
    });
    return {wrapped: wrap.classList.contains("table-wrap"), overflow: style.overflowX,
            fits: rect.right <= root.clientWidth + 0.5 && rect.left >= -0.5,
            scrolls: wrap.scrollWidth > wrap.clientWidth + 1,
            breakable: breakable, rightWords: rightWords, headers: headers};
  });
  var out = document.createElement("pre");
  out.id = "posembed-layout-probe";
  out.textContent = JSON.stringify({scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, tables: tables});
  document.body.appendChild(out);
});
</script>
"""
_MARKER = re.compile(r'<pre id="posembed-layout-probe">(.*?)</pre>', re.S)


def measure(html_path: Path) -> dict:
    """Open the page at 1200 px wide and return the probe's measurements."""
    binary = require_chromium()
    with tempfile.TemporaryDirectory(prefix="posembed-layout-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(
            html_path.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>", 1), encoding="utf-8"
        )
        command = [str(binary), *FLAGS, f"--window-size={WIDTH},900", f"--user-data-dir={tmp}/profile", "--dump-dom",
                   page.as_uri()]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    match = _MARKER.search(done.stdout)
    if match is None:
        raise AssertionError(f"chromium did not run the probe (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(match.group(1).replace("&quot;", '"'))


def _assert_nothing_cut(found: dict) -> None:
    assert found["scrollWidth"] <= found["clientWidth"], found  # the page itself never scrolls sideways
    assert found["tables"]
    for table in found["tables"]:
        assert table["wrapped"] and table["overflow"] == "auto" and table["fits"], table


def test_wide_table_scrolls_inside_its_wrapper(tmp_path):
    report = HtmlReport("wide")
    report.section("A very wide table")
    report.finding("the table is wider than the page; it scrolls instead of being cut")
    report.table([{f"column number {i} with a long header": 123456.789 * i for i in range(40)}])
    report.paragraph("x" * 600)  # one unbroken word must wrap, not widen the page
    report.table([{"a": 1, "b": 2}])
    found = measure(report.write(tmp_path / "report.html"))
    _assert_nothing_cut(found)
    assert found["tables"][0]["scrolls"] and not found["tables"][1]["scrolls"]


def _assert_every_table_fits(found: dict) -> None:
    """No hidden column (nothing to scroll), no word the browser may break, words left-aligned,
    column names in words (no snake_case)."""
    _assert_nothing_cut(found)
    for table in found["tables"]:
        assert not table["scrolls"], table["headers"]
        assert not table["breakable"], table["breakable"][:5]
        assert not table["rightWords"], table["rightWords"][:5]
        assert not [h for h in table["headers"] if re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", h)], table["headers"]


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["alibi", "sinusoidal", "rope"])
def test_inspect_report_fits_at_1200px_and_leads_with_its_summary(tmp_path, scheme):
    from posembed.analysis.inspect_report import InspectOptions, run_inspect
    from posembed.analysis.sources import load_scheme

    run_inspect(load_scheme(scheme, dim=32, max_len=64), tmp_path, options=InspectOptions.small(), progress=False)
    page = tmp_path / "report.html"
    _assert_every_table_fits(measure(page))
    text = page.read_text()
    assert "<title>posembed inspect: " in text
    assert text.index('<h2 id="summary">Summary</h2>') < text.index('<ul class="summary"><li><a href="#section-1">')
    assert text.index('<ul class="summary">') < text.index('<h2 id="section-1">')


@pytest.mark.slow
def test_lab_report_fits_at_1200px(tmp_path):
    """The quick preset's tables (two seeds: every number with its ± spread), from tiny trials."""
    from posembed.cli import main

    tiny = ["--threads", "1", "--workers", "1", "--quiet", "--set", "tasks=copy,charlm",
            "--set", "schemes=learned,rope", "--set", "variants=base,concat", "--set", "seeds=0,1",
            "--set", "steps=2", "--set", "dim=16", "--set", "depth=1", "--set", "batch=4",
            "--set", "eval_batches=1"]  # fmt: skip
    threads = torch.get_num_threads()  # the command sets the process's, as a command may; the test puts it back
    try:
        assert main(["lab", "run", "--preset", "quick", "--out", str(tmp_path), *tiny]) == 0
    finally:
        torch.set_num_threads(threads)
    assert main(["lab", "report", str(tmp_path)]) == 0
    page = next(tmp_path.glob("*.html"))
    _assert_every_table_fits(measure(page))
    assert "<title>posembed lab" in page.read_text()


def test_context_report_fits_at_1200px(tmp_path):
    from posembed.lab.context.presets import get_context_preset, with_overrides
    from posembed.lab.context.run import run_context
    from posembed.lab.report.context import write_context_report

    cfg = with_overrides(get_context_preset("context-smoke"), [
        "context=70", "dim=8", "depth=1", "heads=2", "steps=2", "passkey_only_steps=1", "passkey_adjacent_steps=1",
        "batch=2", "warmup=0",
        "scales=1,2", "depths=2", "passkey_samples=1", "lm_windows=1", "finetune_steps=0", "methods=extrapolate,yarn",
        "references=alibi,nope",
    ])  # fmt: skip
    _, page = write_context_report(run_context(cfg, tmp_path), tmp_path / "report")
    _assert_every_table_fits(measure(page))
    assert "<title>posembed lab context" in page.read_text()


def _retrieval_cell(task: str, system: str, length: int, hits: int, n: int = 20) -> dict:
    from posembed.interop.extend.retrieval_report import wilson

    low, high = wilson(hits, n)
    return {
        "task": task,
        "system": system,
        "length": length,
        "hits": hits,
        "queries": n,
        "candidates": n,
        "accuracy": hits / n,
        "mrr": hits / n,
        "low": low,
        "high": high,
        "longembed": "RP",
        "positions_used": min(length, 512),
        "seconds": 1.5,
        "outcomes": [],
    }


def test_extend_eval_report_fits_at_1200px(tmp_path):
    from posembed.interop.extend.retrieval_report import summarise, write_report

    systems = ("truncate-512", "chunk-256", "pcw-256", "copy", "interpolate", "grouped", "hierarchical", "tuned")
    cells = [
        _retrieval_cell(task, system, length, (7 * i + length // 64) % 21)
        for task in ("passkey", "needle")
        for length in (256, 1024, 2048)
        for i, system in enumerate(systems)
    ]
    result = {"cells": cells, "summary": summarise(cells, 512), "seconds": {system: 2.0 for system in systems},
              "protocol": {"model": "all-MiniLM-L6-v2", "text": "tinyshakespeare.txt", "queries": 20,
                           "pooling": "mean", "interval": "95% Wilson", "targets": [1024, 2048], "seeds": [0],
                           "original_positions": 512}}  # fmt: skip
    _, page = write_report(result, tmp_path)
    _assert_every_table_fits(measure(page))
    assert "<title>posembed extend-eval" in page.read_text()
