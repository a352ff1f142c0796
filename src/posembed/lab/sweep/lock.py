"""One writer per out folder: an exclusive ``flock`` on ``<out>/.posembed-lab.lock``.

A ``posembed lab run`` claims its out folder before it opens the results store and holds
the claim until it ends. The kernel drops an ``flock`` when its process dies (even by
``SIGKILL``), so a killed run never leaves the folder blocked; the lock file itself may stay
behind, holding the dead run's pid, and the next run simply takes it over.

A second run on a claimed folder is refused with :class:`OutDirBusyError`, naming the pid of
the run that holds it. The lock file is removed when the claim is released; whoever locks a
file that was removed meanwhile notices (the path no longer names the locked file) and tries
again, so two runs can never both hold the folder.

>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> with OutDirLock(folder):
...     OutDirLock(folder).acquire()  # doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
posembed.errors.OutDirBusyError: out folder '...' is in use by another posembed lab run (pid ...);
wait for it to end or choose another --out folder
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

from posembed.errors import OutDirBusyError, OutDirError

__all__ = ["OutDirLock", "OutDirError", "OutDirBusyError", "LOCK_NAME", "out_dir_error"]

logger = logging.getLogger(__name__)

LOCK_NAME = ".posembed-lab.lock"


def out_dir_error(error: OSError, what: str, path: str | os.PathLike, hint: str = "") -> OutDirError:
    """An :class:`OutDirError` of one line for an ``OSError`` met while writing ``path`` (``hint`` appended).

    >>> import errno
    >>> str(out_dir_error(OSError(errno.ENOSPC, "No space left on device"), "write", "out/x.json"))
    "cannot write 'out/x.json': No space left on device"
    """
    reason = error.strerror or str(error) or type(error).__name__
    return OutDirError(f"cannot {what} {str(path)!r}: {reason}" + (f"; {hint}" if hint else ""))


class OutDirLock:
    """The exclusive claim on an out folder (created if missing); a context manager.

    Raises (from :meth:`acquire`):
        OutDirBusyError: another process holds it.
        OutDirError: the folder or its lock file cannot be created (read-only, not a folder, full).
    """

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> OutDirLock:
        if self._fd is not None:
            return self
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise out_dir_error(error, "create the out folder", self.out_dir) from None
        while self._fd is None:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise OutDirBusyError(
                    f"out folder {str(self.out_dir)!r} is in use by another posembed lab run "
                    f"(pid {self._holder()}); wait for it to end or choose another --out folder"
                ) from None
            if self._still_named(fd):
                self._fd = fd
            else:  # released and removed between our open and our flock: lock the new file
                os.close(fd)
        self._write_pid()
        return self

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise out_dir_error(error, "create the lock file", self.path) from None

    def _still_named(self, fd: int) -> bool:
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def _write_pid(self) -> None:
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError as error:  # the claim holds without the pid; only the message is poorer
            logger.warning("could not write the pid into %s: %s", self.path, error)

    def _holder(self) -> str:
        """The pid in the lock file (its holder writes it just after locking: wait a moment for it)."""
        for _ in range(20):
            try:
                text = self.path.read_text(encoding="ascii", errors="replace").strip()
            except OSError:
                text = ""
            if text.isdigit():
                return text
            time.sleep(0.05)
        return "unknown"

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still locked: nobody can hold the removed file
        except OSError as error:
            logger.debug("could not remove %s: %s", self.path, error)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> OutDirLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
