"""Render an HTML file in headless Debian chromium and report whether every image loaded.

A copy of the page gets a small inline script that, once the window has loaded, writes
``img.complete && img.naturalWidth > 0`` for every ``<img>`` into a marker element; chromium's
``--dump-dom`` prints the resulting DOM, which we parse. Tests using this are marked ``browser``
and skip (with the reason) when chromium is absent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=15000",
)
_PROBE = """
<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var state = imgs.map(function (img) { return img.complete && img.naturalWidth > 0; });
  var out = document.createElement("pre");
  out.id = "posembed-image-probe";
  out.textContent = JSON.stringify({count: imgs.length, loaded: state});
  document.body.appendChild(out);
});
</script>
"""
_MARKER = re.compile(r'<pre id="posembed-image-probe">(.*?)</pre>', re.S)


@dataclass(frozen=True)
class RenderResult:
    count: int
    loaded: list[bool]

    @property
    def all_loaded(self) -> bool:
        return self.count > 0 and all(self.loaded)


def chromium_path() -> Path | None:
    """The chromium binary, or None when it is not installed."""
    if CHROMIUM.exists():
        return CHROMIUM
    found = shutil.which("chromium")
    return Path(found) if found else None


def require_chromium() -> Path:
    """Return the chromium path or skip the calling test with a clear reason."""
    path = chromium_path()
    if path is None:
        pytest.skip(f"headless chromium not found at {CHROMIUM} (apt-get install chromium; .ci/run does this)")
    return path


def render_images(html_path: Path, timeout: float = 90.0) -> RenderResult:
    """Open ``html_path`` in headless chromium; return how many images it has and which loaded."""
    binary = require_chromium()
    with tempfile.TemporaryDirectory(prefix="posembed-chromium-") as tmp:
        page = Path(tmp) / "page.html"
        text = Path(html_path).read_text(encoding="utf-8")
        page.write_text(text.replace("</body>", _PROBE + "</body>", 1), encoding="utf-8")
        command = [str(binary), *FLAGS, f"--user-data-dir={tmp}/profile", "--dump-dom", page.as_uri()]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    match = _MARKER.search(done.stdout)
    if match is None:
        raise AssertionError(f"chromium did not run the probe (exit {done.returncode}): {done.stderr[-2000:]}")
    state = json.loads(match.group(1).replace("&quot;", '"'))
    return RenderResult(count=int(state["count"]), loaded=[bool(v) for v in state["loaded"]])


def all_images_loaded(html_path: Path) -> bool:
    """True when the page has images and every one of them loaded in chromium."""
    return render_images(html_path).all_loaded
