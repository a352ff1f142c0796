"""A transformers config as a plain dict, from whatever the user hands over.

:func:`read_config` parses a checkpoint folder's ``config.json`` (or the file); :func:`config_dict`
takes a path, a dict or a config object; :func:`load_config_dict` also says where the dict came
from and keeps the config object when one was given. The RoPE reader
(:mod:`posembed.interop.rope.settings`), ``rope check`` and the zoo start from these.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["read_config", "config_dict", "load_config_dict"]


def read_config(source: str | os.PathLike) -> dict:
    """The parsed ``config.json`` of a checkpoint folder, or of a path to the file itself.

    Raises:
        FileNotFoundError: naming the path that was looked at.
        ValueError: the file is not UTF-8 (naming the file, the byte and what was expected), is not JSON, or holds
            no JSON object.
    """
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no transformers config at {str(path)!r} (pass a checkpoint folder or its config.json)"
        )
    data = path.read_bytes()
    try:
        config = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path} is not UTF-8 JSON: byte 0x{data[error.start]:02x} at offset {error.start} cannot be "
            f"decoded ({error.reason}); a transformers config.json is a UTF-8 JSON object, as "
            f"from_pretrained reads it"
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{str(path)!r} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{str(path)!r} holds a JSON {type(config).__name__}, not a config object")
    return config


def config_dict(config: Any) -> dict:
    """The config as a plain dict: a path is read, an object's ``to_dict()`` (else its attributes) taken."""
    if isinstance(config, (str, os.PathLike)):
        return read_config(config)
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "to_dict"):
        return dict(config.to_dict())
    if hasattr(config, "__dict__"):
        return dict(vars(config))
    raise TypeError(
        f"expected a transformers config, a dict, a folder or a config.json path; got {type(config).__name__}"
    )


def load_config_dict(config: Any) -> tuple[dict, Any, str]:
    """``(raw dict, transformers config object or None, where from)`` for any accepted input.

    Raises ``FileNotFoundError`` for a missing path and ``ValueError`` for a folder with no
    ``config.json`` or a file that is not a JSON object.
    """
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist")
        file = path / "config.json" if path.is_dir() else path
        if not file.is_file():
            raise ValueError(f"{path} is not a checkpoint: it has no config.json")
        return read_config(file), None, str(file)
    raw = config_dict(config)
    if isinstance(config, Mapping):
        return raw, None, "dict"
    return raw, config if hasattr(config, "to_dict") else None, type(config).__name__
