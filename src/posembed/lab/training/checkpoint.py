"""Lab checkpoints: a folder ``posembed inspect`` can open.

::

    <folder>/posembed_model.json   {"model": model.config_dict(), "task": ..., "trial": ..., "step": ..., ...}
    <folder>/model.safetensors     the model's state dict

The weights are written first (to a uniquely named temporary file, then renamed) and the
JSON last (atomically), so a folder with ``posembed_model.json`` always has its weights, and
two processes saving the same folder at once each write whole files (the last rename wins).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from torch import nn

from posembed._utils.io import atomic_write_json, atomic_write_with

__all__ = ["save_checkpoint", "load_checkpoint", "is_checkpoint", "trial_folder_name", "CONFIG_NAME", "WEIGHTS_NAME"]

CONFIG_NAME = "posembed_model.json"
WEIGHTS_NAME = "model.safetensors"


def trial_folder_name(cfg) -> str:
    """The folder name of a lab trial's checkpoint: ``<task>-<scheme>[-<variant>]-s<seed>-<hash8>``.

    The variant is left out for ``base``; ``hash8`` is the first 8 hex digits of the trial id
    (two trials of a sweep never share it). Characters other than letters, digits, ``_`` and
    ``.`` become ``_``. Older runs named the folder by the trial id alone; the results store
    records every trial's folder, so those still load.

    >>> from posembed.lab.config import TrialConfig
    >>> cfg = TrialConfig(task="copy", scheme="learned", variant="concat", combine="concat", seed=1)
    >>> trial_folder_name(cfg) == f"copy-learned-concat-s1-{cfg.trial_id[:8]}"
    True
    >>> trial_folder_name(TrialConfig(task="copy", scheme="t5/bias")).startswith("copy-t5_bias-s0-")
    True
    """
    parts = [cfg.task, cfg.scheme] + ([] if cfg.variant == "base" else [cfg.variant])
    name = "-".join(_SAFE.sub("_", part)[:40] or "_" for part in parts)
    return f"{name}-s{cfg.seed}-{cfg.trial_id[:8]}"


_SAFE = re.compile(r"[^A-Za-z0-9_.]+")


def save_checkpoint(model: nn.Module, folder: str | os.PathLike, meta: dict[str, Any]) -> Path:
    """Save ``model`` (a :mod:`posembed.nn.model.transformer` Encoder/Decoder) and ``meta`` into ``folder``.

    ``meta`` holds JSON-able facts about the run (``task``, ``trial``, ``step``, ...); the key
    ``model`` is reserved for ``model.config_dict()``.

    Raises:
        OSError: a file could not be written (full disk, read-only folder), naming the file;
            the folder's previous checkpoint, if any, is left whole.

    Example:
        >>> import tempfile, torch
        >>> from posembed.nn.model.transformer import Decoder
        >>> from posembed.schemes.absolute.learned import LearnedAbsolute
        >>> model = Decoder(11, dim=8, depth=1, num_heads=2, scheme=LearnedAbsolute(16, 8))
        >>> folder = save_checkpoint(model, tempfile.mkdtemp(), {"task": "copy", "trial": "abc", "step": 3})
        >>> loaded, meta = load_checkpoint(folder)
        >>> meta["step"], bool(torch.equal(loaded.head.weight, model.head.weight))
        (3, True)
    """
    if "model" in meta:
        raise ValueError("meta must not contain the key 'model' (it holds the model's config)")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    document = {"model": model.config_dict(), **meta}
    json.dumps(document)  # fail before writing anything if meta is not JSON-able
    atomic_write_with(folder / WEIGHTS_NAME, lambda tmp: _save_weights(model, tmp))
    atomic_write_json(folder / CONFIG_NAME, document)
    return folder


def _save_weights(model: nn.Module, path: str) -> None:
    """``safetensors`` reports I/O failures as ``SafetensorError``: give them back as ``OSError``."""
    from safetensors import SafetensorError
    from safetensors.torch import save_model

    try:
        save_model(model, path)
    except SafetensorError as error:
        code = re.search(r"os error (\d+)", str(error))
        if code is None:
            raise
        number = int(code.group(1))
        raise OSError(number, os.strerror(number), path) from error


def is_checkpoint(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is a lab checkpoint (holds ``posembed_model.json``)."""
    return (Path(folder) / CONFIG_NAME).is_file()


def load_checkpoint(folder: str | os.PathLike, *, device=None) -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild the model saved in ``folder`` and load its weights; returns ``(model, meta)``.

    ``meta`` is the JSON document without ``model`` (``task``, ``trial``, ``step``, ...).

    Raises:
        FileNotFoundError: ``folder`` is not a lab checkpoint or has no weights.
        CheckpointError: (a ``ValueError``) the JSON or the safetensors file does not read, or
            the JSON's sizes disagree with the weights (checked before anything is built).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    from posembed.lab.training.checkpoint_checks import check_lab_checkpoint, read_checkpoint_json
    from posembed.nn.model.transformer import build_model

    folder = Path(folder)
    config_path, weights = folder / CONFIG_NAME, folder / WEIGHTS_NAME
    if not config_path.is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a posembed lab checkpoint (no {CONFIG_NAME})")
    if not weights.is_file():
        raise FileNotFoundError(f"lab checkpoint {str(folder)!r} has no {WEIGHTS_NAME}")
    document = read_checkpoint_json(config_path)
    check_lab_checkpoint(document["model"], weights, config_path)  # before anything is allocated
    model = build_model(document.pop("model"), device=device)
    try:
        load_model(model, str(weights), strict=True, device="cpu" if device is None else str(device))
    except SafetensorError as error:
        raise ValueError(f"{str(weights)!r} is not a readable safetensors file: {error}") from None
    model.eval()
    return model, document
