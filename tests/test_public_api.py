"""The public API keeps working: every name of ``posembed.__all__`` and every import statement the pages show.

The pages (README.md, ARCHITECTURE.md, docs/**/*.md) are read for ``import posembed...`` and
``from posembed... import ...`` lines (a parenthesised name list over several lines included); each runs in a
fresh interpreter, so a page that shows an import path the package no longer has fails here, whichever folder
the module moved to. (``tests/test_exports.py`` holds the dotted names the pages write, by attribute.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import posembed

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: an import statement of posembed at the start of a line (in a code block, a doctest ``>>>`` or prose)
IMPORT = re.compile(
    r"^[ \t]*(?:>>> |\.\.\. )?((?:from[ \t]+posembed(?:\.\w+)*[ \t]+import[ \t]+(?:\([^)]*\)|[^\n#]+))"
    r"|(?:import[ \t]+posembed(?:\.\w+)*(?!\w)(?:[ \t]+as[ \t]+\w+)?))",
    re.MULTILINE,
)


def page_imports(text: str) -> list[str]:
    """Each posembed import statement of ``text``, on one line.

    >>> page_imports("x\\n>>> from posembed.a import (b,\\n...     c)\\nimport posembed\\nimport posembedx\\n")
    ['from posembed.a import (b, c)', 'import posembed']
    """
    found = []
    for match in IMPORT.finditer(text):
        statement = re.sub(r"\s*\n\s*(?:\.\.\. )?\s*", " ", match.group(1)).strip().rstrip("`")
        found.append(statement.replace("( ", "(").replace(" )", ")"))
    return found


def _statements() -> list[str]:
    return sorted({s for page in PAGES for s in page_imports(page.read_text(encoding="utf-8"))})


def _fresh(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


def test_the_pages_show_import_statements():
    statements = _statements()
    assert "import posembed" in statements
    assert any(s.startswith("from posembed.interop.hf import") for s in statements), statements
    assert len(statements) >= 5, statements


@pytest.mark.slow
def test_every_import_statement_the_pages_show_runs():
    runner = (
        "import json, sys\nfailed = {}\n"
        "for statement in json.loads(sys.argv[1]):\n"
        "    try:\n        exec(statement, {})\n"
        "    except Exception as error:\n        failed[statement] = f'{type(error).__name__}: {error}'\n"
        "print(json.dumps(failed))\n"
    )
    import json

    statements = _statements()
    done = _fresh(runner.replace("sys.argv[1]", repr(json.dumps(statements))))
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failed, failed


def test_every_public_name_imports_from_the_top():
    """``from posembed import X`` for every ``X`` of ``__all__``, in a fresh interpreter (the facade's lazy table)."""
    names = [n for n in posembed.__all__ if n != "__version__"]
    done = _fresh(f"from posembed import {', '.join(names)}\nprint('ok')")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.parametrize("name", sorted(posembed.__all__))
def test_each_public_name_is_an_attribute(name):
    assert getattr(posembed, name) is not None


def test_a_broken_page_import_is_caught(tmp_path):
    """Not a test that cannot fail: a page showing a module that does not exist gives a failing statement."""
    statements = page_imports("```python\nfrom posembed.nonesuch_43 import thing\n```\n")
    assert statements == ["from posembed.nonesuch_43 import thing"]
    done = _fresh(f"{statements[0]}\n")
    assert done.returncode != 0 and "posembed.nonesuch_43" in done.stderr
