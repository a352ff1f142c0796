"""The out folder lock: one run at a time, the holder's pid in the refusal, released when its process dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from posembed.errors import OutDirBusyError, OutDirError
from posembed.lab.sweep.lock import LOCK_NAME, OutDirLock

_HOLD = (
    "import sys, time; from posembed.lab.sweep.lock import OutDirLock; OutDirLock(sys.argv[1]).acquire(); "
    "print('held', flush=True); time.sleep(60)"
)


def test_a_second_claim_is_refused_naming_the_holder(tmp_path):
    with OutDirLock(tmp_path / "out") as lock:
        assert lock.held and (tmp_path / "out" / LOCK_NAME).read_text().strip() == str(os.getpid())
        with pytest.raises(OutDirBusyError, match=f"is in use by another posembed lab run \\(pid {os.getpid()}\\)"):
            OutDirLock(tmp_path / "out").acquire()
    assert not (tmp_path / "out" / LOCK_NAME).exists()  # released and removed
    with OutDirLock(tmp_path / "out"):  # free again
        pass


def test_a_dead_holder_blocks_nothing(tmp_path):
    """SIGKILL the holder: the kernel drops its flock; the stale file (with its pid) is taken over."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutDirBusyError, match=f"\\(pid {holder.pid}\\)"):
            OutDirLock(tmp_path).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (tmp_path / LOCK_NAME).read_text().strip() == str(holder.pid)  # left behind
    with OutDirLock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text().strip() == str(os.getpid())


def test_a_lock_file_removed_under_a_waiter_is_not_shared(tmp_path):
    """Whoever locks a lock file its holder just removed notices and locks the new one instead."""
    first = OutDirLock(tmp_path).acquire()
    stale = os.open(tmp_path / LOCK_NAME, os.O_RDWR)  # opened before the release, like a racing run
    first.release()
    second = OutDirLock(tmp_path)
    opened = iter([stale])
    second._open = lambda: next(opened, None) or OutDirLock._open(second)  # noqa: SLF001
    second.acquire()
    try:
        assert second._still_named(second._fd)  # noqa: SLF001
        with pytest.raises(OutDirBusyError):
            OutDirLock(tmp_path).acquire()
    finally:
        second.release()


def test_an_unusable_folder_is_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutDirError, match="cannot create the out folder '.*file/out'") as error:
        OutDirLock(tmp_path / "file" / "out").acquire()
    assert "\n" not in str(error.value)


def test_racing_claimers_never_overlap(tmp_path):
    """Six processes race for one folder, retrying when refused: their holding times never overlap."""
    code = (
        "import sys, time; from posembed.lab.sweep.lock import OutDirLock, OutDirBusyError\n"
        "while True:\n"
        "    try:\n        lock = OutDirLock(sys.argv[1]).acquire()\n        break\n"
        "    except OutDirBusyError:\n        time.sleep(0.01)\n"
        "start = time.time(); time.sleep(0.2); end = time.time(); lock.release()\n"
        "print(start, end)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    spans = sorted(tuple(map(float, p.communicate(timeout=120)[0].split())) for p in procs)
    assert len(spans) == 6
    assert all(before[1] <= after[0] for before, after in zip(spans, spans[1:])), spans
    assert not (tmp_path / LOCK_NAME).exists()
