"""The Questions pages in headless chromium at 960 px: every image loads, nothing overflows the content column.

The site is built with ``mkdocs build --strict`` into a temporary folder; each page of
``questions/`` gets a probe script that reports, once the page has loaded, every image of the
article (loaded: ``complete`` and ``naturalWidth > 0``; its box against the content column's), every
element that sticks out of the column (outside a box that scrolls sideways), every code block that
scrolls sideways, and whether the page itself scrolls sideways. With ``$POSEMBED_SCREENSHOTS`` set, a
full-height screenshot of each page is saved there for a person to look at (nothing checks them, so
CI takes none: a second chromium start per page). Skips where chromium or mkdocs is missing (CI
installs both).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 960
_PROBE = """<script>window.addEventListener("load", function () {
  var article = document.querySelector(".md-content__inner"), column = article.getBoundingClientRect();
  function scrolls(el) {
    for (var e = el.parentElement; e && e !== article; e = e.parentElement) {
      var o = getComputedStyle(e).overflowX; if (o === "auto" || o === "scroll" || o === "hidden") return true; }
    return false; }
  var images = Array.prototype.slice.call(article.querySelectorAll("img")).map(function (img) {
    var r = img.getBoundingClientRect();
    return {src: img.getAttribute("src"), alt: img.alt, loaded: img.complete && img.naturalWidth > 0,
            natural: img.naturalWidth, left: r.left, right: r.right, width: r.width}; });
  var out = Array.prototype.slice.call(article.querySelectorAll("*")).filter(function (el) {
    var r = el.getBoundingClientRect();
    return r.width > 0 && (r.right > column.right + 1 || r.left < column.left - 1) && !scrolls(el)
      && !el.classList.contains("md-typeset__scrollwrap"); })  // Material's table wrap: 0.8rem wider by design
    .map(function (el) { return el.tagName + ": " + (el.textContent || "").slice(0, 60); });
  var code = Array.prototype.slice.call(article.querySelectorAll("pre > code")).filter(function (el) {
    return el.scrollWidth > el.clientWidth + 1; }).map(function (el) { return el.textContent.slice(0, 60); });
  var root = document.documentElement, probe = document.createElement("pre");
  probe.id = "figures-probe";
  probe.textContent = JSON.stringify({images: images, overflow: out, code: code, column: [column.left, column.right],
                                      scroll: root.scrollWidth, width: root.clientWidth, height: root.scrollHeight});
  document.body.appendChild(probe); });</script>"""
_MARKER = re.compile(r'<pre id="figures-probe">(.*?)</pre>', re.DOTALL)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="pip install 'posembed[docs]'")
    pytest.importorskip("mkdocstrings", reason="pip install 'posembed[docs]'")
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out


def _pages(site: Path) -> list[Path]:
    return sorted((site / "questions").rglob("index.html"))


def _probe(binary: Path, page: Path, profile: Path) -> dict:
    from tests.browser import FLAGS

    probed = page.with_name("probe.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>", 1), encoding="utf-8")
    done = subprocess.run(
        [
            str(binary),
            *FLAGS,
            f"--window-size={WIDTH},900",
            f"--user-data-dir={profile}",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    probed.unlink()
    match = _MARKER.search(done.stdout)
    assert match, f"chromium ran no probe on {page} (exit {done.returncode}): {done.stderr[-1500:]}"
    return json.loads(
        match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )


def _screenshot(binary: Path, page: Path, height: int, path: Path, profile: Path) -> None:
    from tests.browser import FLAGS

    subprocess.run([str(binary), *FLAGS, "--hide-scrollbars", f"--window-size={WIDTH},{min(height, 16000)}",
                    f"--user-data-dir={profile}", f"--screenshot={path}", page.as_uri()],
                   capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_question_pages_load_every_image_and_fit_the_column(site, tmp_path):
    from tests.browser import require_chromium

    binary = require_chromium()
    shots = Path(os.environ["POSEMBED_SCREENSHOTS"]) if os.environ.get("POSEMBED_SCREENSHOTS") else None
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    pages = _pages(site)
    assert len(pages) >= 10, pages
    problems, images = [], 0
    for page in pages:
        name = page.parent.name
        found = _probe(binary, page, tmp_path / "profile")
        left, right = found["column"]
        for image in found["images"]:
            images += 1
            if not image["loaded"]:
                problems.append(f"{name}: {image['src']} did not load")
            if not image["alt"]:
                problems.append(f"{name}: {image['src']} has no alt text")
            if image["right"] > right + 1 or image["left"] < left - 1:
                problems.append(
                    f"{name}: {image['src']} spans {image['left']:.0f}-{image['right']:.0f} px, "
                    f"outside the column {left:.0f}-{right:.0f}"
                )
        problems += [f"{name}: sticks out of the column: {what}" for what in found["overflow"]]
        problems += [f"{name}: a code block scrolls sideways at {WIDTH} px: {what!r}" for what in found["code"]]
        if found["scroll"] > found["width"]:
            problems.append(f"{name}: the page scrolls sideways ({found['scroll']} > {found['width']} px)")
        if shots is not None:
            _screenshot(binary, page, found["height"], shots / f"{name}.png", tmp_path / "profile")
    assert images >= 19, images
    assert problems == [], "\n".join(problems)
