"""The habits in CI: ``ruff check``, ``ruff format --check`` and ``mypy`` pass on the whole tree.

Each runs as pyproject.toml configures it (``[tool.ruff]``, ``[tool.mypy]``: the public API, the schemes, the
Hugging Face integration and the statistics), the versions the test extra pins; a finding fails the test with the
tool's own output. ``.pre-commit-config.yaml`` runs the same three before a commit.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)


def _tool(name: str) -> list[str]:
    """``python -m name`` where the module is installed with this interpreter, else the command on PATH."""
    try:
        __import__(name)
        return [sys.executable, "-m", name]
    except ImportError:
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed: pip install -c constraints.txt -e '.[test]' (it pins {name})")
        return [found]


def test_ruff_check_passes():
    done = _run(*_tool("ruff"), "check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, f"ruff check found:\n{done.stdout[-20000:]}{done.stderr[-2000:]}"


def test_ruff_format_leaves_every_file_as_it_is():
    done = _run(*_tool("ruff"), "format", "--check", "--no-cache", ".")
    assert done.returncode == 0, (
        f"ruff format would change (run `ruff format`):\n{done.stdout[-20000:]}{done.stderr[-2000:]}"
    )


@pytest.mark.slow
def test_mypy_passes_on_the_configured_files():
    done = _run(*_tool("mypy"), "--no-incremental", "--config-file", "pyproject.toml")
    assert done.returncode == 0, f"mypy found:\n{done.stdout[-20000:]}{done.stderr[-2000:]}"


def test_the_checks_fail_on_a_bad_file(tmp_path):
    """Not a test that cannot fail: the same configuration catches an unused import, a long line, a misformatted
    file and a type error."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8")
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx: int = 'a' + " + "'b' + " * 30 + "'c'\ndef f( a ):\n  return a\n", encoding="utf-8")
    check = subprocess.run(
        [*_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 1 and "F401" in check.stdout and "E501" in check.stdout, check.stdout
    form = subprocess.run(
        [*_tool("ruff"), "format", "--check", "--no-cache", "bad.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert form.returncode == 1, form.stdout
    types = subprocess.run(
        [*_tool("mypy"), "--no-incremental", "--config-file", "pyproject.toml", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert types.returncode == 1 and "Incompatible types in assignment" in types.stdout, types.stdout
