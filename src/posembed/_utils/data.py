"""The data files the package ships (``posembed/data``; see its README for their sources)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

__all__ = ["tinyshakespeare_path"]


def tinyshakespeare_path(hint: str = "give another UTF-8 text file") -> Path:
    """The tinyshakespeare text: ``$POSEMBED_TINYSHAKESPEARE`` when set, else the shipped copy.

    Raises:
        FileNotFoundError: the override is not a file, or the shipped copy is missing (a broken
            install); the message ends with ``hint`` (what the caller's user can do instead).
    """
    override = os.environ.get("POSEMBED_TINYSHAKESPEARE", "")
    if override:
        if not Path(override).is_file():
            raise FileNotFoundError(f"$POSEMBED_TINYSHAKESPEARE={override!r} is not a file; {hint}")
        return Path(override)
    shipped = Path(str(resources.files("posembed") / "data" / "tinyshakespeare.txt"))
    if not shipped.is_file():
        raise FileNotFoundError(
            f"tinyshakespeare.txt is missing from the installed package ({shipped}); reinstall posembed, or {hint}"
        )
    return shipped
