"""The facade names every scheme of the factory and every part (``posembed.lab``), lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import posembed
from posembed.schemes.factory import ENTRIES


def test_every_factory_scheme_is_exported():
    missing = [entry.cls.__name__ for entry in ENTRIES if getattr(posembed, entry.cls.__name__, None) is not entry.cls]
    assert not missing, f"not exported from posembed: {missing}"
    assert {entry.cls.__name__ for entry in ENTRIES} <= set(posembed.__all__)


def test_import_posembed_loads_no_scheme():
    code = "import sys, posembed; print(any(m.startswith('posembed.schemes') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_every_subpackage_is_in_the_facade_list():
    root = Path(posembed.__file__).parent
    folders = {p.parent.name for p in root.glob("*/__init__.py")}
    assert folders <= set(posembed.SUBPACKAGES), sorted(folders - set(posembed.SUBPACKAGES))
    for name in posembed.SUBPACKAGES:
        assert (root / name / "__init__.py").is_file() or (root / f"{name}.py").is_file(), name


@pytest.mark.parametrize("name", ["schemes", "interop", "lab", "positions", "analysis", "fused", "bench"])
def test_a_part_resolves_as_an_attribute_in_a_fresh_interpreter(name):
    """``import posembed; posembed.<part>`` with nothing imported before it (README's parts table)."""
    code = f"import sys, posembed; m = posembed.{name}; print(m.__name__, m is sys.modules['posembed.{name}'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [f"posembed.{name}", "True"]
    assert name in dir(posembed)


def test_import_posembed_and_version_load_no_torch():
    code = "import sys, posembed; posembed.__version__; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        posembed.nonesuch  # noqa: B018
