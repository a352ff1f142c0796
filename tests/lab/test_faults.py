"""Fault injection on the lab's out folder: concurrent runs, broken store files, read-only and
full disks. Each ends in one line on stderr naming the file and exit 2; stored trials stay."""

from __future__ import annotations

import contextlib
import errno
import subprocess
import sys

import pytest

from posembed.cli import main
from posembed.lab.sweep.store import load_results

TINY = [
    "--threads",
    "1",
    "--workers",
    "1",
    "--quiet",
    "--set",
    "tasks=copy",
    "--set",
    "schemes=learned",
    "--set",
    "steps=2",
    "--set",
    "dim=16",
    "--set",
    "depth=1",
    "--set",
    "batch=4",
    "--set",
    "eval_batches=1",
    "--set",
    "copy.context=3",
]


def _run(out, *extra) -> list[str]:
    return ["lab", "run", "--preset", "smoke", "--out", str(out), *TINY, *extra]


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


@contextlib.contextmanager
def _tmpfs(path, size: str, *options: str):
    """A small tmpfs at ``path`` (needs root and a kernel that allows it; else the test skips)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder) -> None:
    """Write into ``folder`` until its file system is full."""
    with contextlib.suppress(OSError), open(folder / "filler", "wb", buffering=0) as handle:
        while True:
            handle.write(b"\0" * 4096)


@pytest.mark.slow
def test_two_concurrent_runs_on_one_folder(tmp_path):
    """Started together, one run trains, the other exits 2 naming its pid; nothing is lost."""
    args = [
        sys.executable,
        "-m",
        "posembed.cli",
        "lab",
        "run",
        "--preset",
        "smoke",
        "--out",
        str(tmp_path),
        "--no-checkpoints",
        "--threads",
        "1",
        "--set",
        "tasks=copy",
        "--set",
        "schemes=learned,nope",
        "--set",
        "seeds=0,1",
        "--set",
        "dim=16",
        "--set",
        "depth=1",
        "--set",
        "batch=4",
        "--set",
        "eval_batches=1",
        "--set",
        "steps=20",
    ]
    runs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [(run, *run.communicate(timeout=300)) for run in runs]
    codes = sorted(run.returncode for run in runs)
    if codes == [0, 0]:
        pytest.skip("the runs did not overlap (the machine is too busy)")
    assert codes == [0, 2], [(run.returncode, err) for run, _, err in outcomes]
    ((winner, out, _),) = [o for o in outcomes if o[0].returncode == 0]
    ((_, _, err),) = [o for o in outcomes if o[0].returncode == 2]
    assert "4 trials trained" in out
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"is in use by another posembed lab run (pid {winner.pid})" in err
    assert len(load_results(tmp_path).trials) == 4


def test_empty_store_file_is_refused_not_adopted(tmp_path, capsys):
    (tmp_path / "results.sqlite").touch()
    err = _error(capsys, _run(tmp_path))
    assert f"{str(tmp_path / 'results.sqlite')!r} is empty (0 bytes)" in err and "truncated copy" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]
    assert (tmp_path / "results.sqlite").stat().st_size == 0
    assert "is empty (0 bytes)" in _error(capsys, ["lab", "report", str(tmp_path)])


def test_a_folder_named_like_the_store(tmp_path, capsys):
    (tmp_path / "results.sqlite").mkdir()
    err = _error(capsys, _run(tmp_path))
    assert f"{str(tmp_path / 'results.sqlite')!r} is a folder, not a results store" in err
    assert "is a folder" in _error(capsys, ["lab", "report", str(tmp_path)])


@pytest.mark.parametrize(
    "offset, message",
    [
        (0, "is not a posembed results store: file is not a database"),
        (4096, "is damaged (database disk image is malformed)"),
    ],
    ids=["header", "page"],
)
def test_a_damaged_store_is_refused_and_left_as_it_is(tmp_path, capsys, offset, message):
    assert main(_run(tmp_path, "--no-checkpoints", "--set", "seeds=0,1")) == 0
    capsys.readouterr()
    store = tmp_path / "results.sqlite"
    data = bytearray(store.read_bytes())
    data[offset : offset + 4096] = b"\xa5" * 4096
    store.write_bytes(bytes(data))
    for argv in (_run(tmp_path, "--no-checkpoints", "--set", "seeds=0,1"), ["lab", "report", str(tmp_path)]):
        err = _error(capsys, argv)
        assert repr(str(store)) in err and message in err
    assert store.read_bytes() == bytes(data)


def test_a_store_without_finished_trials_never_blocks_the_corrected_rerun(tmp_path, capsys):
    """A run that claimed the folder and failed before its first trial finished (killed, or a
    training error) leaves a store that the corrected config takes over."""
    from posembed.lab.config import apply_overrides
    from posembed.lab.presets import get_preset
    from posembed.lab.sweep.store import ResultsStore

    overrides = TINY[6::2]  # the key=value items
    ResultsStore(tmp_path, apply_overrides(get_preset("smoke"), [*overrides, "lr=0.5"])).close()
    assert main(_run(tmp_path, "--no-checkpoints")) == 0
    assert "1 trials trained" in capsys.readouterr().out
    err = _error(capsys, _run(tmp_path, "--no-checkpoints", "--set", "lr=0.5"))  # now it holds a trial
    assert "holds the results of another experiment" in err


def test_a_read_only_folder(tmp_path, capsys):
    with _tmpfs(tmp_path / "mnt", "4m") as mnt:
        out = mnt / "out"
        assert main(_run(out, "--no-checkpoints")) == 0
        capsys.readouterr()
        before = (out / "results.sqlite").read_bytes()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        err = _error(capsys, _run(out, "--no-checkpoints"))
        assert f"cannot create the lock file {str(out / '.posembed-lab.lock')!r}: Read-only file system" in err
        err = _error(capsys, _run(mnt / "new"))
        assert f"cannot create the out folder {str(mnt / 'new')!r}: Read-only file system" in err
        err = _error(capsys, ["lab", "report", str(out)])
        assert "cannot write" in err and str(out) in err and "Read-only file system" in err
        assert (out / "results.sqlite").read_bytes() == before
        assert len(load_results(out).trials) == 1


def _fill_after_first_trial(monkeypatch, folder):
    from posembed.lab.sweep import runner

    calls, original = [], runner._train_with_bar

    def train_then_fill(cfg, *args):
        calls.append(cfg)
        if len(calls) == 2:
            _fill(folder)
        return original(cfg, *args)

    monkeypatch.setattr(runner, "_train_with_bar", train_then_fill)


@pytest.mark.parametrize("checkpoints", [True, False], ids=["checkpoint", "store"])
def test_a_full_disk_keeps_what_was_stored(tmp_path, capsys, monkeypatch, checkpoints):
    """The disk fills up after the first trial: the second one's checkpoint (or store row)
    cannot be written; exit 2 naming the file, the first trial stays, the rerun resumes."""
    with _tmpfs(tmp_path / "mnt", "1m") as mnt:
        out, extra = mnt / "out", ["--set", "seeds=0,1,2"] + ([] if checkpoints else ["--no-checkpoints"])
        _fill_after_first_trial(monkeypatch, mnt)
        err = _error(capsys, _run(out, *extra))
        if checkpoints:
            assert "cannot write the checkpoint" in err and "No space left on device" in err
            assert "trials stored before stay in" in err
        else:
            assert "cannot store trial" in err and repr(str(out / "results.sqlite")) in err
            assert "the disk is full (database or disk is full)" in err
        (record,) = load_results(out).trials
        assert not list(out.rglob("*.tmp"))  # no half-written file left
        monkeypatch.undo()
        (mnt / "filler").unlink()
        assert main(_run(out, *extra)) == 0
        assert "2 trials trained, 1 already stored" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_full_disk_without_tmpfs(tmp_path, capsys, monkeypatch, workers):
    """The same path where no tmpfs can be mounted: the checkpoint writer raises ENOSPC. With
    two workers too: the parent writes every checkpoint, the workers none."""
    from posembed.lab.training import checkpoint

    calls = []

    def full(model, path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return original(model, path)

    original = checkpoint._save_weights
    monkeypatch.setattr(checkpoint, "_save_weights", full)
    err = _error(capsys, _run(tmp_path, "--set", "seeds=0,1", "--workers", workers))
    assert "cannot write the checkpoint" in err and "model.safetensors" in err and "No space left" in err
    assert len(calls) == 2
    assert len(load_results(tmp_path).trials) == 1
    assert not list(tmp_path.rglob("*.tmp"))
