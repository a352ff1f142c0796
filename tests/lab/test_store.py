"""The results store's file: created whole, refused when it is not a store, taken over when unused."""

from __future__ import annotations

import dataclasses
import os
import re
import sqlite3
import stat

import pytest

from posembed.errors import ForeignStoreError
from posembed.lab.config import apply_overrides
from posembed.lab.store_file import create_store_file
from posembed.lab.sweep.runner import run_experiment
from posembed.lab.sweep.store import ResultsStore, StoreError, load_results


@pytest.fixture
def copy_only(tiny_experiment):
    return dataclasses.replace(tiny_experiment, tasks=("copy",), seeds=(0,), schemes=("learned",))


def test_a_new_store_appears_whole_or_not_at_all(tmp_path):
    path = tmp_path / "results.sqlite"

    def dies_half_way(conn):
        conn.execute("CREATE TABLE meta (key TEXT)")
        raise KeyboardInterrupt  # a kill while the schema is being written

    with pytest.raises(KeyboardInterrupt):
        create_store_file(path, dies_half_way)
    assert list(tmp_path.iterdir()) == []


def test_a_new_store_follows_the_umask_and_uses_wal(tmp_path, copy_only):
    before = os.umask(0o027)
    try:
        ResultsStore(tmp_path, copy_only).close()
    finally:
        os.umask(before)
    store = tmp_path / "results.sqlite"
    assert stat.S_IMODE(store.stat().st_mode) == 0o640
    with sqlite3.connect(store) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_store_without_trials_is_taken_over(tmp_path, copy_only):
    ResultsStore(tmp_path, apply_overrides(copy_only, ["lr=0.5"])).close()
    with ResultsStore(tmp_path, copy_only) as store:
        assert store.meta()["experiment_hash"] == copy_only.config_hash
    summary = run_experiment(copy_only, tmp_path, progress=False, checkpoints=False)
    assert summary.trained == 1
    with pytest.raises(ForeignStoreError, match="holds the results of another experiment"):
        ResultsStore(tmp_path, apply_overrides(copy_only, ["lr=0.5"]))
    assert load_results(tmp_path).experiment["bases"][0]["lr"] == copy_only.bases[0].lr


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.touch(), "is empty (0 bytes)"),
        (lambda p: p.mkdir(), "is a folder, not a results store"),
        (lambda p: os.mkfifo(p), "is not a regular file"),
    ],
    ids=["empty", "folder", "fifo"],
)
def test_what_sqlite_would_misread_is_refused(tmp_path, copy_only, make, message):
    make(tmp_path / "results.sqlite")
    for experiment in (copy_only, None):
        with pytest.raises(StoreError, match=re.escape(message)) as error:
            ResultsStore(tmp_path, experiment)
        assert repr(str(tmp_path / "results.sqlite")) in str(error.value) and "\n" not in str(error.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


@pytest.mark.slow
def test_full_store_keeps_committed_trials(tmp_path, copy_only):
    """SQLite's own "database or disk is full" (a page limit stands in for the disk) on adding a trial."""
    exp = dataclasses.replace(copy_only, seeds=(0, 1))
    run_experiment(dataclasses.replace(exp, seeds=(0,)), tmp_path / "first", progress=False, checkpoints=False)
    (stored,) = load_results(tmp_path / "first").trials
    with ResultsStore(tmp_path, exp) as store:
        store.add(stored)
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages}")
        big = dataclasses.replace(stored, curve=[(i, 0.5) for i in range(20_000)])
        with pytest.raises(StoreError, match="cannot store trial .* the disk is full \\(database or disk is full\\)"):
            store.add(big)
        assert [r.trial_id for r in store.records()] == [stored.trial_id]


def test_a_read_only_copy_is_readable(tmp_path, copy_only, monkeypatch):
    """Where SQLite cannot create the WAL's shared-memory file (a read-only medium) readers still read."""
    run_experiment(copy_only, tmp_path, progress=False, checkpoints=False)
    real_connect = sqlite3.connect

    def no_shm(database, *args, **kwargs):
        if "immutable=1" not in str(database):
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", no_shm)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert len(load_results(tmp_path).trials) == 1


def test_evaluations_during_training_are_stored_and_read_back(tmp_path, copy_only):
    staged = apply_overrides(copy_only, ["eval_at=0.5,1.0"])
    run_experiment(staged, tmp_path / "run", progress=False)
    (record,) = load_results(tmp_path / "run").trials
    steps = record.config.steps
    assert record.during and {p.step for p in record.during} == {steps // 2}
    assert {p.step for p in record.evals} == {steps}
    assert {(p.metric, p.length) for p in record.during} == {(p.metric, p.length) for p in record.evals}


def test_a_store_from_before_during_is_read_and_gains_the_table(tmp_path, copy_only):
    run_experiment(copy_only, tmp_path / "run", progress=False)
    with sqlite3.connect(tmp_path / "run" / "results.sqlite") as conn:
        conn.execute("DROP TABLE during")
    conn.close()
    (record,) = load_results(tmp_path / "run").trials
    assert record.during == [] and {p.step for p in record.evals} == {record.config.steps}
    with ResultsStore(tmp_path / "run", copy_only) as store:
        store.add(record)
    assert load_results(tmp_path / "run").trials[0].during == []


def test_a_point_stored_past_the_end_of_training_is_skipped(tmp_path, copy_only):
    run_experiment(apply_overrides(copy_only, ["eval_at=0.5,1.0"]), tmp_path / "run", progress=False)
    with sqlite3.connect(tmp_path / "run" / "results.sqlite") as conn:
        conn.execute("UPDATE during SET step = 10000")
    conn.close()
    results = load_results(tmp_path / "run")
    assert results.trials == [] and "at step 10000 is not within" in next(iter(results.reasons.values()))
