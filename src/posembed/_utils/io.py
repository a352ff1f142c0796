"""Atomic file writes: a result is either fully written or not there at all.

Every write goes to a uniquely named temporary file in the target's folder (so concurrent
writers of the same target never share one), is flushed to disk, then renamed over the target
with ``os.replace``. The file gets the mode any other tool would give it: ``0o666`` less the
process umask (``mkstemp`` alone would leave it ``0o600``). An ``OSError`` (a full disk, a
read-only folder) leaves the target as it was, removes the temporary file and names the target.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "atomic_write_with", "current_umask"]

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux ``/proc``).

    >>> 0 <= current_umask() <= 0o777
    True
    """
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        status = ""
    found = re.search(r"^Umask:\s*([0-7]+)\s*$", status, re.MULTILINE)
    if found:
        return int(found.group(1), 8)
    with _UMASK_LOCK:  # os.umask can only be read by setting it: set it back at once
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def atomic_write_with(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp)`` to fill a fresh temporary file next to ``path``, then rename it to ``path``.

    ``write`` receives the temporary file's path (for writers that open a path themselves,
    such as ``safetensors``); the file already exists, empty. Once written, it gets the
    umask's mode, is flushed to disk and renamed.

    Raises:
        OSError: the write or the rename failed (its ``filename`` is ``path``); ``path`` is unchanged.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.close(fd)
        write(tmp)
        with open(tmp, "rb+") as handle:  # the mode after the write: a writer may recreate the file
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        if error.filename in (None, tmp):
            raise OSError(error.errno, error.strerror or str(error), str(target)) from error
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> atomic_write_bytes(folder / "x.bin", b"abc").read_bytes()
    b'abc'
    """

    def write(tmp: str) -> None:
        with open(tmp, "wb") as handle:
            handle.write(data)

    return atomic_write_with(path, write)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically write UTF-8 ``text`` to ``path``."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, value: Any) -> Path:
    """Atomically write ``value`` as indented JSON."""
    return atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")
