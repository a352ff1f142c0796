"""Atomic writes: whole files or none, unique temporary names, the umask's mode, errors naming the target."""

from __future__ import annotations

import errno
import os
import stat
import threading

import pytest

from posembed._utils.io import atomic_write_bytes, atomic_write_json, atomic_write_with, current_umask


@pytest.fixture
def umask():
    """Set the process umask for one test (restored afterwards)."""
    before = os.umask(0o022)
    os.umask(before)
    yield lambda mask: os.umask(mask)
    os.umask(before)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_get_the_umask_mode(tmp_path, umask, mask, expected):
    umask(mask)
    assert current_umask() == mask
    assert _mode(atomic_write_bytes(tmp_path / "a.bin", b"x")) == expected
    assert _mode(atomic_write_json(tmp_path / "a.json", {"a": 1})) == expected

    def recreate(tmp):  # a writer that replaces the file it was given (as safetensors does)
        os.unlink(tmp)
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
            handle.write(b"y")

    assert _mode(atomic_write_with(tmp_path / "b.bin", recreate)) == expected


def test_concurrent_writers_of_one_target_all_succeed(tmp_path):
    target, errors = tmp_path / "shared.bin", []
    payloads = [bytes([i]) * 50_000 for i in range(8)]

    def writer(payload):
        try:
            for _ in range(25):
                atomic_write_bytes(target, payload)
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in payloads  # one complete write, never a mix
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.bin"]  # no temporary file left


def test_a_failed_write_keeps_the_old_file_and_names_the_target(tmp_path):
    target = atomic_write_bytes(tmp_path / "report.md", b"old")

    def full_disk(tmp):
        with open(tmp, "wb") as handle:
            handle.write(b"ne")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left on device") as error:
        atomic_write_with(target, full_disk)
    assert error.value.errno == errno.ENOSPC and error.value.filename == str(target)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_a_failed_write_of_a_new_file_leaves_nothing(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError) as error:
        atomic_write_json(tmp_path / "metrics.json", {"a": 1})
    assert error.value.filename == str(tmp_path / "metrics.json")
    assert list(tmp_path.iterdir()) == []
