"""The rotary family is a tree: every import (module level or inside a function) points down.

Levels, bottom to top: the leaf helpers (checks, rotation, phases), RotaryEmbedding, the variants,
then the Hugging Face config reader in interop. One upward import is allowed: the lazy
``RotaryEmbedding.from_hf_config`` alias, marked ``# edge alias`` on its line. No scheme imports
``posembed.kernels``.
"""

import ast
from pathlib import Path

import pytest

import posembed

SRC = Path(posembed.__file__).parent
LEVELS = {
    "posembed.schemes.rotary.checks": 0,
    "posembed.schemes.rotary.rotation": 0,
    "posembed.schemes.phases": 0,
    "posembed.schemes.rotary.layout": 0,
    "posembed.schemes.rotary.rope": 1,
    "posembed.schemes.rotary.scaling": 2,
    "posembed.schemes.rotary.yarn": 2,
    "posembed.schemes.rotary.longrope": 2,
    "posembed.schemes.rotary.xpos": 2,
    "posembed.interop.rope.config": 3,
}


def _imports(path: Path) -> list[tuple[str, str]]:
    """(imported module, source line) for every import in ``path``, nested ones included."""
    lines = path.read_text().splitlines()
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(name, lines[node.lineno - 1]) for name in names]
    return found


def _path(module: str) -> Path:
    return SRC.joinpath(*module.split(".")[1:]).with_suffix(".py")


@pytest.mark.parametrize("module", sorted(LEVELS))
def test_imports_point_down(module):
    for name, line in _imports(_path(module)):
        if name in LEVELS and name != module:
            if "# edge alias" in line:
                assert (module, name) == ("posembed.schemes.rotary.rope", "posembed.interop.rope.config"), line
                continue
            assert LEVELS[name] < LEVELS[module], f"{module} imports {name} (level {LEVELS[name]}): {line.strip()}"


def test_schemes_never_import_fused():
    for path in sorted((SRC / "schemes").glob("*.py")):
        for name, line in _imports(path):
            assert not name.startswith("posembed.kernels"), f"{path.name}: {line.strip()}"


def test_no_rotary_config_module_left_in_schemes():
    assert not (SRC / "schemes" / "rotary_config.py").exists()
