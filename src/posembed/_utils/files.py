"""Checked reads of checkpoint files: one :class:`~posembed.errors.CheckpointError` naming the file.

Shared by the Hugging Face checks (:mod:`posembed.interop.hf.checks`) and the lab checkpoint
checks (:mod:`posembed.lab.training.checkpoint_checks`), which sit side by side and never import each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from posembed.errors import CheckpointError

__all__ = ["read_json", "safetensors_shapes"]


def read_json(path: Path) -> Any:
    """The parsed JSON of ``path``; not UTF-8, not JSON or a folder is a :class:`CheckpointError`."""
    try:
        data = path.read_bytes()
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        byte = f"byte 0x{data[error.start]:02x} at offset {error.start}"
        raise CheckpointError(path, f"is not UTF-8 text ({byte})") from None
    except json.JSONDecodeError as error:
        raise CheckpointError(path, f"is not valid JSON: {error}") from None
    except IsADirectoryError:
        raise CheckpointError(path, "is a folder, not a file") from None


def safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape from one safetensors file's header (no tensor data is read).

    An empty, truncated or garbage file is a :class:`CheckpointError`.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if path.stat().st_size == 0:
        raise CheckpointError(path, "is empty (0 bytes); the file was not saved whole")
    try:
        with safe_open(str(path), framework="pt") as handle:
            return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except (SafetensorError, OSError) as error:
        raise CheckpointError(path, f"is not a readable safetensors file: {error}") from None
