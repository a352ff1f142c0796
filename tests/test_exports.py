"""The facade names every scheme of the factory, lazily."""

from __future__ import annotations

import subprocess
import sys

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
