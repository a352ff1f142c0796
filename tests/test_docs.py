"""The documentation site builds without a warning, renders, and its Python examples run as written.

README.md and every page under ``docs/`` are read; each fenced ``python`` block runs in a
fresh namespace (a block that fails is a documentation bug, reported with its file and line;
docs/bert.md's block is the "bit for bit" check on all-MiniLM-L6-v2). ``mkdocs build --strict``
runs where the ``docs`` extra is installed (CI installs ``all``): a raw Sphinx role left in a page
fails it (docs/hooks.py), the API page shows examples as code and roles as links
(docs/griffe_sphinx.py), lists render as lists, and the navigation shows at 1200 px in chromium.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    """A module of docs/ (the hooks, the griffe extension), imported from its file."""
    spec = importlib.util.spec_from_file_location(f"posembed_docs_{name}", ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _load("hooks") if importlib.util.find_spec("mkdocs") else None
griffe_sphinx = _load("griffe_sphinx") if importlib.util.find_spec("griffe") else None
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


def missing_imports(code: str) -> list[str]:
    """The top-level packages a block imports that are not installed (an optional extra).

    >>> missing_imports("import torch\\nfrom no_such_package_here import x")
    ['no_such_package_here']
    """
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    packages = {name.split(".")[0] for name in names}
    return sorted(package for package in packages if importlib.util.find_spec(package) is None)


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_python_block_runs(name, code):
    missing = missing_imports(code)
    if missing:  # CI installs every extra ('all'); elsewhere the block waits for its package
        pytest.skip(f"needs {', '.join(missing)} (pip install 'posembed[all]')")
    exec(compile(code, name, "exec"), {"__name__": "__docs__"})


def test_nav_names_every_page():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    named = set(re.findall(r":\s*(\S+\.md)\s*$", nav, re.M))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} | {"benchmarks.md"}
    assert named == pages, f"nav and docs/ disagree: {sorted(named ^ pages)}"


def test_readme_stays_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the manual belongs in docs/"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once with ``mkdocs build --strict`` (a warning fails it)."""
    pytest.importorskip("mkdocs", reason="pip install 'posembed[docs]'")
    pytest.importorskip("mkdocstrings", reason="pip install 'posembed[docs]'")
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out


@pytest.mark.slow
def test_site_builds_strict(site):
    assert (site / "api" / "index.html").exists()
    assert (site / "benchmarks" / "index.html").exists()
    assert (site / "bert" / "index.html").exists()


def _pages(site: Path) -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(site)), path.read_text(encoding="utf-8"))
        for path in sorted(site.rglob("index.html"))
        if "404" not in str(path)
    ]


def test_the_api_page_renders_examples_as_code_and_roles_as_links(site):
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert not hooks.RAW_ROLE.search(api)
    assert "<blockquote>" not in api  # doctest lines read as nested quotes before
    assert api.count('<span class="gp">&gt;&gt;&gt; </span>') >= 20  # examples highlighted as Python sessions
    calls = re.findall(
        r'<a class="autorefs autorefs-internal"[^>]*href="#posembed[.\w]+"><code>[\w.]+\(\)</code></a>', api
    )
    assert len(calls) >= 3, calls  # :func: / :meth: roles resolved to the objects' anchors


def test_no_page_shows_a_list_as_a_paragraph(site):
    for name, html in _pages(site):
        for paragraph in re.findall(r"<p>(.*?)</p>", html, re.S):
            assert not re.search(r"\n\s*- \S", paragraph), f"{name}: a list rendered inline: {paragraph[:200]}"


def test_nested_lists_render_nested(site):
    """Every page that nests a list (two-space indents, as on GitHub) renders it nested."""
    nesting = [
        page
        for page in (ROOT / "docs").glob("*.md")
        if re.search(r"^\s*[-*] .*\n {2,}[-*] ", page.read_text(encoding="utf-8"), re.M)
    ]
    for page in nesting:
        html = (site / page.stem / "index.html") if page.stem != "index" else (site / "index.html")
        assert re.search(r"<li>(?:(?!</li>).)*<ul>", html.read_text(encoding="utf-8"), re.S), page.name
    markdown = pytest.importorskip("markdown")
    rendered = markdown.markdown(hooks.loosen_lists("Three:\n- a\n  - b\n- c"))
    assert re.search(r"<li>(?:(?!</li>).)*<ul>", rendered, re.S)


def test_a_raw_role_is_a_warning_so_strict_fails(caplog):
    pytest.importorskip("mkdocs", reason="pip install 'posembed[docs]'")
    page = SimpleNamespace(file=SimpleNamespace(src_uri="api.md"))
    with caplog.at_level(logging.WARNING, logger="mkdocs.plugins.posembed"):
        hooks.on_post_page("<p>see :meth:<code>_fused_path</code></p>", page, {})
    assert "a raw Sphinx role is left in the page" in caplog.text and "_fused_path" in caplog.text
    caplog.clear()
    hooks.on_post_page("<p>see <code>_fused_path()</code></p>", page, {})
    assert not caplog.text


@pytest.mark.parametrize("text, expected", [
    ("x :meth:`~posembed.a.B.run` y", '<autoref identifier="posembed.a.B.run" optional><code>run()</code></autoref>'),
    ("x :class:`posembed.a.B` y", '<autoref identifier="posembed.a.B" optional><code>posembed.a.B</code></autoref>'),
    ("x :meth:`_fused_path` y", '<autoref identifier="posembed.a.B._fused_path" optional><code>_fused_path()</code>'),
    ("x :func:`the loop <posembed.a.f>`", '<autoref identifier="posembed.a.f" optional><code>the loop</code>'),
    ("x ``code`` y", "x `code` y"),
])  # fmt: skip
def test_the_griffe_extension_converts_roles(text, expected):
    pytest.importorskip("griffe", reason="pip install 'posembed[docs]'")
    assert expected in griffe_sphinx.convert(text, "posembed.a.B")


def test_the_griffe_extension_fences_doctests_and_leaves_code_alone():
    pytest.importorskip("griffe", reason="pip install 'posembed[docs]'")
    text = "Intro.\n>>> a = 1\n>>> a\n1\n\nAfter.\n\n```python\n>>> kept\n```"
    assert griffe_sphinx.convert(text, "m") == (
        "Intro.\n\n```pycon\n>>> a = 1\n>>> a\n1\n```\n\n\nAfter.\n\n```python\n>>> kept\n```"
    )
    section = "Example:\n    >>> f(:class:`X`)\n    2"
    assert griffe_sphinx.convert(section, "m") == "Example:\n    ```pycon\n    >>> f(:class:`X`)\n    2\n    ```\n"


@pytest.mark.browser
def test_navigation_is_visible_at_1200px(site, tmp_path):
    """Material folds its page list into a drawer below 1220 px; docs/stylesheets/nav.css keeps it out."""
    from tests.browser import FLAGS, require_chromium

    binary = require_chromium()
    probe = """<script>window.addEventListener("load", function () {
      var nav = document.querySelector(".md-sidebar--primary"), r = nav.getBoundingClientRect();
      var links = Array.prototype.slice.call(nav.querySelectorAll(".md-nav__link")).filter(function (a) {
        var b = a.getBoundingClientRect(); return b.width > 0 && b.left >= 0 && b.right <= innerWidth; });
      var main = document.querySelector(".md-content").getBoundingClientRect();
      var out = document.createElement("pre"); out.id = "nav-probe";
      out.textContent = JSON.stringify({left: r.left, right: r.right, links: links.length, content: main.left,
                                        scroll: document.documentElement.scrollWidth, width: innerWidth});
      document.body.appendChild(out); });</script>"""
    page = site / "api" / "probe.html"
    page.write_text((site / "api" / "index.html").read_text(encoding="utf-8").replace("</body>", probe + "</body>"))
    done = subprocess.run(
        [
            str(binary),
            *FLAGS,
            "--window-size=1200,900",
            f"--user-data-dir={tmp_path}/profile",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    found = json.loads(re.search(r'<pre id="nav-probe">(.*?)</pre>', done.stdout, re.S).group(1).replace("&quot;", '"'))
    assert found["left"] >= 0 and found["right"] <= found["content"] + 1, found  # beside the page, not over it
    assert found["links"] >= 9, found  # every page of the nav on screen
    assert found["scroll"] <= found["width"], found
