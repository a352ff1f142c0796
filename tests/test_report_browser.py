"""Reports at 1200 px in headless chromium: no table is cut off, the page never scrolls sideways.

A probe script measures, once the page has loaded, the page's ``scrollWidth`` against its
``clientWidth``, and for every table whether it sits in a wrapper that scrolls sideways
(``overflow-x: auto``) and fits the page. Skips cleanly where chromium is missing (CI installs it).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from posembed.report import HtmlReport
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
    return {wrapped: wrap.classList.contains("table-wrap"), overflow: style.overflowX,
            fits: rect.right <= root.clientWidth + 0.5 && rect.left >= -0.5,
            scrolls: wrap.scrollWidth > wrap.clientWidth};
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
        page.write_text(html_path.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>", 1), encoding="utf-8")
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


def test_inspect_report_fits_at_1200px(tmp_path):
    from posembed.analysis.inspect_report import InspectOptions, run_inspect
    from posembed.analysis.sources import load_scheme

    run_inspect(load_scheme("alibi", dim=32, max_len=64), tmp_path, options=InspectOptions.small())
    _assert_nothing_cut(measure(tmp_path / "report.html"))
