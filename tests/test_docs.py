"""The documentation site builds without a warning, and its Python examples run as written.

README.md and every page under ``docs/`` are read; each fenced ``python`` block runs in a
fresh namespace (a block that fails is a documentation bug, reported with its file and line).
``mkdocs build --strict`` runs where the ``docs`` extra is installed (CI installs ``all``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks() -> list[tuple[str, str]]:
    """``(id, code)`` of every fenced python block, the id naming the page and line."""
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            blocks.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


BLOCKS = python_blocks()


def test_the_docs_hold_python_examples():
    assert len(BLOCKS) >= 2, [name for name, _ in BLOCKS]


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_python_block_runs(name, code):
    exec(compile(code, name, "exec"), {"__name__": "__docs__"})


def test_nav_names_every_page():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    named = set(re.findall(r":\s*(\S+\.md)\s*$", nav, re.M))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} | {"benchmarks.md"}
    assert named == pages, f"nav and docs/ disagree: {sorted(named ^ pages)}"


def test_readme_stays_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the manual belongs in docs/"


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="pip install 'posembed[docs]'")
    pytest.importorskip("mkdocstrings", reason="pip install 'posembed[docs]'")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").exists()
    assert (tmp_path / "site" / "benchmarks" / "index.html").exists()
