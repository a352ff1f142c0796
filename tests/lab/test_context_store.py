"""The context study's store is the lab's kind of store (issue 43): its file checked, created whole and named in
every error as ``results.sqlite`` is; and its ids and the lab's come from one id function that keeps every
stored id."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from posembed.errors import ForeignStoreError, StoreError
from posembed.lab.config import TrialConfig
from posembed.lab.context import store
from posembed.lab.context.store import ContextStore, config_id_of, train_id_of
from posembed.lab.ids import content_id, without_later_defaults

ROOT = Path(__file__).resolve().parents[2]


def _one_line_naming(error: pytest.ExceptionInfo, path: Path) -> bool:
    return repr(str(path)) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "make, kind, message",
    [
        (lambda p: p.touch(), StoreError, "is empty (0 bytes), not a context store"),
        (lambda p: p.mkdir(), StoreError, "is a folder, not a context store"),
        (lambda p: os.mkfifo(p), StoreError, "is not a regular file"),
        (lambda p: p.write_bytes(b"not a database at all, " * 200), StoreError, "is not a posembed context store"),
        (
            lambda p: sqlite3.connect(p).executescript("CREATE TABLE invoices (id INTEGER)").close(),
            ForeignStoreError,
            "is not a posembed context store (it holds tables invoices)",
        ),
    ],
    ids=["empty", "folder", "fifo", "not-a-database", "foreign"],
)
def test_what_sqlite_would_misread_or_adopt_is_refused(tmp_path, make, kind, message):
    path = tmp_path / "context.sqlite"
    make(path)
    with pytest.raises(kind, match=re.escape(message)) as error:
        ContextStore(path)
    assert _one_line_naming(error, path)


def test_a_new_store_appears_whole_and_keeps_what_it_holds(tmp_path):
    path = tmp_path / "deeper" / "context.sqlite"
    context = ContextStore(path)
    context.put("abc", "rope", "none", 64, [("perplexity", -1.0, 3.0)])
    assert sorted(p.name for p in path.parent.iterdir()) == ["context.sqlite"]  # no temporary file left
    assert ContextStore(path).evaluated("abc") == {("rope", "none", 64)}


def test_a_store_from_before_a_table_gains_it(tmp_path):
    path = tmp_path / "context.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE context_rows (config TEXT NOT NULL, model TEXT NOT NULL, method TEXT NOT NULL, "
            "length INTEGER NOT NULL, metric TEXT NOT NULL, depth REAL NOT NULL, value REAL, "
            "PRIMARY KEY (config, model, method, length, metric, depth))"
        )
    conn.close()
    ContextStore(path).put_config("abc", "context", {"seed": 0})
    assert ContextStore(path).configs() == {"abc": ("context", {"seed": 0})}


def test_a_failed_write_is_one_line_naming_the_file_and_keeps_what_was_stored(tmp_path, monkeypatch):
    """SQLite's own "database or disk is full", raised by the connection as it writes the evaluation."""
    path = tmp_path / "context.sqlite"
    context = ContextStore(path)
    context.put("abc", "rope", "none", 64, [("perplexity", -1.0, 3.0)])

    class FullDisk(sqlite3.Connection):
        def executemany(self, *args, **kwargs):
            raise sqlite3.OperationalError("database or disk is full")

    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *args, **kwargs: connect(*args, factory=FullDisk, **kwargs))
    with pytest.raises(
        StoreError, match=r"cannot write .*: the disk is full .*what was stored so far is kept"
    ) as error:
        context.put("abc", "rope", "none", 128, [("perplexity", -1.0, 4.0)])
    assert _one_line_naming(error, path)
    monkeypatch.undo()
    assert context.evaluated("abc") == {("rope", "none", 64)}


def test_every_stored_id_is_what_the_one_id_function_gives():
    """The ids of the stored context study (json's default spacing) and of the stored full study's trials
    (compact) recompute from their stored configs."""
    study = json.loads((ROOT / "results" / "context" / "study.json").read_text(encoding="utf-8"))
    seeds = {row["config"]: row["seed"] for row in study["rows"]}
    assert len(study["config_ids"]) == 3
    for config_id in study["config_ids"]:
        body = {**study["config"], "seed": seeds[config_id]}
        fields = {k: v for k, v in without_later_defaults(body, store._LATER_DEFAULTS).items() if k != "name"}
        assert config_id_of(body) == config_id == content_id(fields, spacing="json", digits=16)
        assert content_id(fields, digits=16) != config_id  # the spacing is part of the id
        assert len(train_id_of(body)) == 16 and train_id_of(body) != config_id
    trials = json.loads((ROOT / "results" / "lab" / "full" / "trials.json").read_text(encoding="utf-8"))
    for trial in trials[:12]:
        assert TrialConfig.from_dict(trial["config"]).trial_id == trial["trial_id"]
        assert content_id(trial["config"], digits=16) == trial["trial_id"]


def test_a_spacing_the_ids_do_not_use_is_refused():
    with pytest.raises(ValueError, match="spacing must be one of compact, json, got 'pretty'"):
        content_id({}, spacing="pretty")  # type: ignore[arg-type]
