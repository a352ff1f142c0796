"""A store's SQLite file: refuse what SQLite would misread, create it whole, name it in errors.

SQLite opens an empty file as a new database and a folder or a damaged page with a terse
message; the sweep's :class:`~posembed.lab.sweep.store.ResultsStore` and the context study's
:class:`~posembed.lab.context.store.ContextStore` use these helpers instead, so that each
case is refused with one line naming the file:

- a folder, or anything but a regular file, where the store should be;
- an empty (0-byte) file: more likely a truncated copy than a new store;
- a file that is not a database, or a damaged one (``database disk image is malformed``);
- a read-only file or folder, a full disk.

A new store is built in a temporary file and linked into place once its schema is committed,
so a run killed while creating it never leaves an empty ``results.sqlite`` (or ``context.sqlite``) behind.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from posembed._utils.io import current_umask
from posembed.errors import StoreError

__all__ = ["StoreError", "check_store_file", "store_error", "create_store_file", "store_tables"]

_CHOOSE = "remove it or choose another --out folder"


def check_store_file(path: Path, *, required: bool, kind: str = "results store") -> None:
    """Refuse a folder or an empty file at ``path``; a missing file is fine unless ``required`` (``kind``: what
    the messages call the file: the lab's ``"results store"``, the context study's ``"context store"``).

    >>> import tempfile, pathlib
    >>> empty = pathlib.Path(tempfile.mkdtemp()) / "results.sqlite"
    >>> empty.touch()
    >>> check_store_file(empty, required=False)  # doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    posembed.errors.StoreError: '...results.sqlite' is empty (0 bytes), not a results store: it may be a truncated
    copy; remove it or choose another --out folder
    """
    where = repr(str(path))
    if path.is_dir():
        raise StoreError(f"{where} is a folder, not a {kind}; {_CHOOSE}")
    if not path.exists():
        if required:
            raise FileNotFoundError(f"no {kind} in {str(path.parent)!r} (expected {path.name})")
        return
    if not path.is_file():
        raise StoreError(f"{where} is not a regular file; {_CHOOSE}")
    if path.stat().st_size == 0:
        raise StoreError(f"{where} is empty (0 bytes), not a {kind}: it may be a truncated copy; {_CHOOSE}")


def store_error(path: Path, error: BaseException, action: str, kind: str = "results store") -> StoreError:
    """One line naming ``path`` (a ``kind``, as :func:`check_store_file`) for an SQLite or OS ``error`` met while
    trying to ``action`` it.

    >>> full = sqlite3.OperationalError("database or disk is full")
    >>> str(store_error(Path("out/results.sqlite"), full, "write"))  # doctest: +NORMALIZE_WHITESPACE
    "cannot write 'out/results.sqlite': the disk is full (database or disk is full); what was stored so far is
    kept: free some space and run again to resume"
    """
    where, text = repr(str(path)), str(error)
    number = getattr(error, "errno", None) or getattr(error, "sqlite_errorcode", None)
    if "file is not a database" in text:
        return StoreError(f"{where} is not a posembed {kind}: {text}")
    if "malformed" in text:
        return StoreError(f"{where} is damaged ({text}); restore it from a copy, or move it away and run again")
    if "full" in text or number in (errno.ENOSPC, sqlite3.SQLITE_FULL):
        return StoreError(
            f"cannot {action} {where}: the disk is full ({text}); what was stored so far is kept: "
            f"free some space and run again to resume"
        )
    if "readonly" in text or "read-only" in text or number in (errno.EACCES, errno.EROFS, errno.EPERM):
        return StoreError(f"cannot {action} {where}: it or its folder is read-only ({text})")
    return StoreError(f"cannot {action} {where}: {getattr(error, 'strerror', None) or text}")


def store_tables(conn: sqlite3.Connection) -> set[str]:
    """The tables of the database ``conn`` holds (SQLite's own ``sqlite_*`` left out): what a store checks
    before it adopts a file."""
    found = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in found if not name.startswith("sqlite_")}


def create_store_file(path: Path, build: Callable[[sqlite3.Connection], None]) -> None:
    """Create the database ``path`` whole: ``build(conn)`` writes its schema into a temporary
    file, which is committed, switched to WAL and linked into place. A file another writer
    created at ``path`` meanwhile is kept (this one is dropped)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        os.close(fd)
        conn = sqlite3.connect(tmp)
        try:
            build(conn)
            conn.commit()
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        Path(tmp).unlink(missing_ok=True)
