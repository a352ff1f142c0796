"""The package's layering, read from every import in ``src/posembed`` (function-level included).

Lower layers never import higher ones, and no two files import each other, directly or round a
circle. The layers, lowest first (a file may import its own layer and any lower one, except
where ``FORBIDDEN_SIDEWAYS`` says otherwise):

====  ==========================================================  =================================
tier  files                                                       what they are
====  ==========================================================  =================================
0     ``_utils/``, ``errors``, ``stats/``                         helpers, errors, statistics
1     ``schemes/`` (``absolute/``, ``rotary/``, ``bias/``)        one positional scheme per file
2     ``kernels/``                                                optional fast kernels
3     ``nn/attention/``, ``nn/embedding/``                        the blocks
4     ``nn/model/``                                               small encoder / decoder
5     ``encode/``, ``interop/``, ``lab/``, ``analysis/``          Hugging Face at the edge,
                                                                  experiments, analysis
6     ``bench/``                                                  benchmark suites
7     ``cli/``, ``__main__``                                      the command
====  ==========================================================  =================================

Inside tier 5, ``analysis`` may use ``interop`` and ``lab``; ``interop`` and ``lab`` use neither
each other nor ``analysis``. Inside ``lab/``, each subfolder taken as one room, no rooms import
each other round a circle (:func:`test_the_rooms_of_lab_import_one_way`).

There is no exception: no import runs upward, not even inside a function, and no two files
import each other round a circle. (The Hugging Face adapters are functions of ``interop``:
``interop.hf.load_embeddings`` / ``save_embeddings``, ``interop.rope.config.rotary_from_hf_config``.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "posembed"

#: (path prefix relative to src/posembed, tier); the longest matching prefix wins
TIERS: tuple[tuple[str, int], ...] = (
    ("_utils/", 0),
    ("errors.py", 0),
    ("stats/", 0),
    ("schemes/", 1),
    ("kernels/", 2),
    ("nn/", 3),
    ("nn/attention/", 3),
    ("nn/embedding/", 3),
    ("nn/model/", 4),
    ("encode/", 5),
    ("interop/", 5),
    ("lab/", 5),
    ("analysis/", 5),
    ("bench/", 6),
    ("cli/", 7),
    ("__main__.py", 7),
)
#: (importer prefix, imported prefix) pairs that are the same tier but still forbidden
FORBIDDEN_SIDEWAYS = (
    ("interop/", "lab/"),
    ("interop/", "analysis/"),
    ("lab/", "analysis/"),
    ("lab/", "interop/"),
    ("encode/", "interop/"),
    ("encode/", "lab/"),
    ("encode/", "analysis/"),
)
#: the top-level ``posembed/__init__.py`` re-exports the public names; nothing inside imports it
FACADE = "__init__.py"


def _files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _module_file(module: str) -> str | None:
    """``posembed.a.b`` -> ``a/b.py`` or ``a/b/__init__.py`` (relative to the package), if it exists."""
    parts = module.split(".")
    if parts[0] != "posembed":
        return None
    base = PACKAGE.joinpath(*parts[1:])
    if base.with_suffix(".py").is_file():
        return _relative(base.with_suffix(".py"))
    if (base / "__init__.py").is_file():
        return _relative(base / "__init__.py")
    return None


def _imports(path: Path) -> list[tuple[str, int, str]]:
    """``(imported file, line number, source line)`` for every import of a posembed file in ``path``."""
    lines = path.read_text().splitlines()
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: use absolute imports"
            module = node.module or ""
            targets = [f"{module}.{alias.name}" for alias in node.names if _module_file(f"{module}.{alias.name}")]
            targets = targets or [module]
        for target in targets:
            file = _module_file(target)
            if file is not None:
                found.append((file, node.lineno, lines[node.lineno - 1]))
    return found


def _tier(file: str) -> int:
    matches = [(len(prefix), tier) for prefix, tier in TIERS if file == prefix or file.startswith(prefix)]
    assert matches, f"{file} has no tier: add it to TIERS (and to ARCHITECTURE.md)"
    return max(matches)[1]


def _graph() -> dict[str, list[tuple[str, int, str]]]:
    return {_relative(path): _imports(path) for path in _files()}


def test_every_file_has_a_tier():
    for file in _graph():
        if file != FACADE:
            _tier(file)


def test_no_arrow_runs_against_the_layering():
    wrong = []
    for importer, imports in _graph().items():
        if importer == FACADE:
            continue
        for imported, line, _text in imports:
            if imported == FACADE:
                wrong.append(f"{importer}:{line} imports the top-level facade posembed/__init__.py")
                continue
            if _tier(imported) > _tier(importer):
                wrong.append(f"{importer}:{line} (tier {_tier(importer)}) imports {imported} (tier {_tier(imported)})")
            for low, high in FORBIDDEN_SIDEWAYS:
                if importer.startswith(low) and imported.startswith(high):
                    wrong.append(f"{importer}:{line} imports {imported}: {low} never uses {high}")
    assert not wrong, "\n".join(wrong)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one file (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles_between_files():
    edges = {
        importer: {imported for imported, _, text in imports if imported != importer}
        for importer, imports in _graph().items()
        if importer != FACADE
    }
    assert not _cycles(edges), _cycles(edges)


def _rooms(folder: str) -> dict[str, set[str]]:
    """Arrows between the rooms of ``folder`` (relative to src/posembed, ending in ``/``): each
    file directly in it, and each subfolder taken whole, as ``farm-studio look FOLDER`` draws them."""

    def room(file: str) -> str | None:
        if not file.startswith(folder) or file == f"{folder}__init__.py":
            return None
        head, _, rest = file[len(folder) :].partition("/")
        return f"{head}/" if rest else head

    edges: dict[str, set[str]] = {}
    for importer, imports in _graph().items():
        source = room(importer)
        if source is not None:
            edges.setdefault(source, set()).update(
                target for imported, _, _ in imports if (target := room(imported)) not in (None, source)
            )
    return edges


def test_the_rooms_of_lab_import_one_way():
    """Inside ``lab/``, with each subfolder taken as one room, no two rooms import each other round a
    circle: the trainer never reaches back into ``sweep/`` (its process-group helpers are ``lab/ddp``,
    its cost estimate ``lab/trial_cost``), and ``lengthgen/`` (imported by the presets) reads no store."""
    edges = _rooms("lab/")
    assert {"sweep/", "training/", "presets.py", "lengthgen/", "tasks/", "config.py"} <= set(edges)
    assert not _cycles(edges), _cycles(edges)


def test_rooms_of_a_folder_take_subfolders_whole():
    edges = _rooms("lab/")
    assert "sweep/" in edges["presets.py"] or "presets.py" in edges["sweep/"]  # ddp_trial reads the presets
    assert not any("/" in room.rstrip("/") for room in edges)


@pytest.mark.slow
@pytest.mark.parametrize("module", ["posembed.schemes.rotary.rope", "posembed.schemes", "posembed.schemes.positions"])
def test_low_layers_import_without_the_blocks(module):
    """``import posembed.schemes.rotary.rope`` loads no attention, fused-embedding or Hugging Face code."""
    import subprocess
    import sys

    code = (
        f"import sys, {module}; "
        "bad = [m for m in sys.modules if m.startswith(('posembed.nn.attention.layer', 'posembed.kernels', "
        "'posembed.nn.embedding.block', 'posembed.interop', 'posembed.lab', 'transformers'))]; print(bad)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
