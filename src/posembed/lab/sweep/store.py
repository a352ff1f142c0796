"""The results store: one SQLite file per experiment, one atomic transaction per finished trial.

``<out>/results.sqlite`` (WAL journal). Killing the runner loses nothing that finished: a trial
is either fully stored (its ``trials`` row, its ``evals``, ``curves`` and ``during`` rows, committed in one
transaction) or absent, and a rerun skips what is stored.

Schema (version 1)::

    meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)
        schema_version   "1"
        experiment_hash  SHA-256 of the ExperimentConfig (an out dir serves ONE experiment)
        experiment       the ExperimentConfig as JSON (name, tasks, schemes, variants, seeds, bases)
        created          ISO-8601 UTC time the store was created

    trials(                                  -- one row per finished trial
        trial_id TEXT PRIMARY KEY,           -- TrialConfig.trial_id (16 hex digits of its hash)
        task TEXT, scheme TEXT, variant TEXT, seed INTEGER,   -- the sweep coordinates
        config_json TEXT,                    -- the full TrialConfig (TrialConfig.from_dict)
        num_params INTEGER, steps INTEGER, world_size INTEGER,
        final_loss REAL,                     -- training loss averaged over the last log window
        seconds REAL, seconds_per_step REAL,
        drift_rel_frobenius REAL,            -- ||W - W0||_F / ||W0||_F of the scheme's parameters,
        drift_cosine REAL,                   --   cos(W, W0); both NULL when the scheme has none
        checkpoint TEXT,                     -- checkpoint folder relative to the out dir, or NULL
        finished_at TEXT)                    -- ISO-8601 UTC

    evals(trial_id TEXT, metric TEXT, length INTEGER, value REAL, note TEXT,
          PRIMARY KEY (trial_id, metric, length))
        -- metric: accuracy (order), exact_match (copy/reverse/sort/addition, length = operand
        -- length n), val_loss and perplexity (charlm, length = evaluated context).
        -- value NULL means not measurable, with the reason in note, e.g. "n/a (table limit)".

    curves(trial_id TEXT, step INTEGER, loss REAL, PRIMARY KEY (trial_id, step))
        -- training loss vs step (mean over the steps since the previous point)

    during(trial_id TEXT, step INTEGER, metric TEXT, length INTEGER, value REAL, note TEXT,
           PRIMARY KEY (trial_id, step, metric, length))
        -- the evaluations made after ``step`` < steps (TrialConfig.eval_at), as evals; ``evals``
        -- holds the one at the end. A store written before this table existed is read as having
        -- none and gains the table when a trial is next stored.

A file that is not this schema (another program's tables, another ``schema_version``) is
refused, never adopted; so is an empty (0-byte) file, which is more likely a truncated copy
than a new store. A new store is built in a temporary file and linked into place whole, so a
killed run never leaves an empty ``results.sqlite`` behind. A store of another experiment is
refused while it holds finished trials; one with none is taken over by the next run. Readers
open the file read-only. A file that cannot be read or written (damaged, read-only, a full
disk) raises :class:`StoreError` with one line naming it (see :mod:`posembed.lab.store_file`);
committed trials stay.

Readers use :func:`load_results` (or :meth:`ResultsStore.records`): a row that does not
decode (bad JSON, a config that no longer validates, missing numbers) is logged as a warning
and skipped, never fatal.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from posembed.errors import ForeignStoreError, StoreError
from posembed.lab.config import ExperimentConfig, TrialConfig
from posembed.lab.store_file import check_store_file, create_store_file, store_error, store_tables
from posembed.lab.tasks import EvalPoint
from posembed.lab.training.train import TrialResult

__all__ = [
    "ResultsStore",
    "TrialRecord",
    "Results",
    "load_results",
    "STORE_NAME",
    "SCHEMA_VERSION",
    "ForeignStoreError",
    "StoreError",
]

logger = logging.getLogger(__name__)

STORE_NAME = "results.sqlite"
SCHEMA_VERSION = "1"

#: the evaluations made before the end of training (``TrialConfig.eval_at``); a store written before
#: they existed lacks the table and is read as having none (it is added when such a store is written)
_DURING = """
CREATE TABLE IF NOT EXISTS during (
    trial_id TEXT NOT NULL REFERENCES trials(trial_id) ON DELETE CASCADE, step INTEGER NOT NULL,
    metric TEXT NOT NULL, length INTEGER NOT NULL, value REAL, note TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (trial_id, step, metric, length));
"""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    trial_id TEXT PRIMARY KEY, task TEXT NOT NULL, scheme TEXT NOT NULL, variant TEXT NOT NULL,
    seed INTEGER NOT NULL, config_json TEXT NOT NULL, num_params INTEGER, steps INTEGER,
    world_size INTEGER, final_loss REAL, seconds REAL, seconds_per_step REAL,
    drift_rel_frobenius REAL, drift_cosine REAL, checkpoint TEXT, finished_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evals (
    trial_id TEXT NOT NULL REFERENCES trials(trial_id) ON DELETE CASCADE, metric TEXT NOT NULL,
    length INTEGER NOT NULL, value REAL, note TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (trial_id, metric, length));
CREATE TABLE IF NOT EXISTS curves (
    trial_id TEXT NOT NULL REFERENCES trials(trial_id) ON DELETE CASCADE, step INTEGER NOT NULL,
    loss REAL, PRIMARY KEY (trial_id, step));
"""
    + _DURING
)

_TABLES = ("meta", "trials", "evals", "curves", "during")


@dataclass(kw_only=True)
class TrialRecord(TrialResult):
    """One stored trial, decoded and validated: the trial's result, where its checkpoint is and
    when it finished (``trial_id`` comes from the config, checked against the stored column)."""

    checkpoint: str | None
    finished_at: str

    def metric(self, name: str) -> dict[int, float | None]:
        """``{length: value}`` of one metric (``None`` where not measurable)."""
        return {p.length: p.value for p in self.evals if p.metric == name}


@dataclass
class Results:
    """What :func:`load_results` reads: the experiment, its valid trials, the skipped rows
    (``reasons``: id -> why the row did not decode)."""

    experiment: dict[str, Any]
    trials: list[TrialRecord]
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def skipped(self) -> list[str]:
        """The ids of the rows that did not decode, in the store's order."""
        return list(self.reasons)


class ResultsStore:
    """Read/write access to ``<out>/results.sqlite`` for one experiment.

    Args:
        out_dir: the experiment's folder (created).
        experiment: the experiment writing here (creates the store in an empty or missing file);
            ``None`` opens an existing store read-only.

    Raises:
        ForeignStoreError: the store holds another experiment (different config hash), or the
            file is another program's database (other tables, another schema version).
        StoreError: the file is not an SQLite database, is empty (0 bytes), is a folder, is
            damaged, or cannot be written (read-only, full disk).

    Example:
        >>> import tempfile
        >>> from posembed.lab.presets import get_preset
        >>> exp = get_preset("smoke")
        >>> with ResultsStore(tempfile.mkdtemp(), exp) as store:
        ...     store.finished_ids()
        set()
    """

    def __init__(self, out_dir: str | Path, experiment: ExperimentConfig | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / STORE_NAME
        check_store_file(self.path, required=experiment is None)
        try:
            if experiment is None:  # readers never write: not even the schema or the journal mode
                self.conn = self._connect_read_only()
            else:
                self.out_dir.mkdir(parents=True, exist_ok=True)
                if not self.path.exists():
                    create_store_file(self.path, lambda conn: _write_schema(conn, experiment))
                self.conn = sqlite3.connect(self.path, timeout=30.0)
        except (sqlite3.Error, OSError) as error:
            raise store_error(self.path, error, "open") from None
        try:
            if experiment is None:
                self._check_schema(required=True)
            else:
                self._claim(experiment)
        except sqlite3.Error as error:
            self.conn.close()
            raise store_error(self.path, error, "open") from None
        except BaseException:
            self.conn.close()
            raise

    def _connect_read_only(self) -> sqlite3.Connection:
        """A read-only connection; on a read-only medium, where SQLite cannot make the WAL's
        shared-memory file, the file is opened as immutable (nobody can be writing it)."""
        uri, conn = self.path.resolve().as_uri(), None
        try:
            conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30.0)
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            if conn is not None:
                conn.close()
            if os.access(self.out_dir, os.W_OK):
                raise
        logger.info("results store %s is on a read-only medium: reading it as immutable", self.path)
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=30.0)

    def _check_schema(self, *, required: bool) -> bool:
        """Whether the file holds this store's schema (``False``: an empty database, if not ``required``).

        Raises ``ForeignStoreError`` for another program's tables or another schema version.
        """
        tables = store_tables(self.conn)
        if not tables and not required:
            return False
        where = f"{str(self.path)!r} is not a posembed results store"
        if tables not in (set(_TABLES), set(_TABLES) - {"during"}):
            foreign = sorted(tables - set(_TABLES))
            detail = (
                f"it holds tables {', '.join(foreign)}" if foreign else f"tables {', '.join(sorted(tables)) or 'none'}"
            )
            raise ForeignStoreError(f"{where} ({detail}); choose another --out folder")
        version = self.meta().get("schema_version")
        if version != SCHEMA_VERSION:
            raise ForeignStoreError(
                f"{where} of schema version {SCHEMA_VERSION} (its schema_version is {version!r}); "
                "choose another --out folder"
            )
        return True

    def _claim(self, experiment: ExperimentConfig) -> None:
        """Check the stored experiment (schema written first into an empty database); a store
        with no finished trials is taken over by ``experiment``."""
        self.conn.execute("BEGIN IMMEDIATE")  # one writer at a time decides whether the store is new
        try:
            if not self._check_schema(required=False):
                _write_schema(self.conn, experiment)
            else:
                self._take_over_if_unused(experiment)
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        meta = self.meta()
        stored = meta.get("experiment_hash", "")
        if stored != experiment.config_hash:
            name = json.loads(meta["experiment"]).get("name", "?") if _is_json(meta.get("experiment")) else "?"
            raise ForeignStoreError(
                f"{str(self.out_dir)!r} holds the results of another experiment ({name!r}, config hash "
                f"{stored[:12]}, this one {experiment.config_hash[:12]}); choose another --out folder"
            )

    def _take_over_if_unused(self, experiment: ExperimentConfig) -> None:
        """Another experiment's store without a single trial row (a run refused or killed before
        its first trial finished) blocks nothing: record ``experiment`` in its place."""
        if self.meta().get("experiment_hash") == experiment.config_hash:
            return
        if self.conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]:
            return
        logger.info(
            "results store %s holds no finished trials: taken over by experiment %r", self.path, experiment.name
        )
        self.conn.executemany(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            [
                ("experiment_hash", experiment.config_hash),
                ("experiment", json.dumps(experiment.to_dict(), sort_keys=True)),
            ],
        )

    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def note_once(self, key: str, value: str) -> None:
        """Record ``key`` in the meta table unless already there (the first run's record stays on resume)."""
        with self.conn:
            self.conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def finished_ids(self) -> set[str]:
        """Ids of the trials stored and readable (a corrupt row counts as not finished)."""
        return {record.trial_id for record in self.records()}

    def add(self, result, checkpoint: str | None = None) -> None:
        """Store one finished :class:`~posembed.lab.training.train.TrialResult` in one transaction."""
        cfg: TrialConfig = result.config
        drift = result.drift or {}
        row = (
            result.trial_id,
            cfg.task,
            cfg.scheme,
            cfg.variant,
            cfg.seed,
            json.dumps(cfg.to_dict(), sort_keys=True),
            result.num_params,
            cfg.steps,
            result.world_size,
            _finite(result.final_loss),
            result.seconds,
            result.seconds_per_step,
            drift.get("rel_frobenius"),
            drift.get("cosine"),
            checkpoint,
            _now(),
        )
        try:
            with self.conn:  # one transaction: all of the trial or nothing
                self.conn.execute("DELETE FROM trials WHERE trial_id = ?", (result.trial_id,))
                self.conn.execute(f"INSERT INTO trials VALUES ({', '.join('?' * len(row))})", row)
                self.conn.executemany(
                    "INSERT INTO evals VALUES (?, ?, ?, ?, ?)",
                    [(result.trial_id, p.metric, p.length, _finite(p.value), _note(p)) for p in result.evals],
                )
                self.conn.executemany(
                    "INSERT INTO curves VALUES (?, ?, ?)",
                    [(result.trial_id, step, _finite(loss)) for step, loss in result.curve],
                )
                self.conn.execute(_DURING)
                self.conn.execute("DELETE FROM during WHERE trial_id = ?", (result.trial_id,))
                self.conn.executemany(
                    "INSERT INTO during VALUES (?, ?, ?, ?, ?, ?)",
                    [(result.trial_id, p.step, p.metric, p.length, _finite(p.value), _note(p)) for p in result.during],
                )
        except sqlite3.Error as error:
            raise store_error(self.path, error, f"store trial {result.trial_id} in") from None

    def records(self) -> list[TrialRecord]:
        """Every readable trial, in insertion order; corrupt rows are logged and skipped."""
        return self._read()[0]

    def _read(self) -> tuple[list[TrialRecord], dict[str, str]]:
        try:
            return self._read_rows()
        except sqlite3.Error as error:
            raise store_error(self.path, error, "read") from None

    def _read_rows(self) -> tuple[list[TrialRecord], dict[str, str]]:
        """The decoded trials and ``{trial id: why not}`` of the rows that do not decode."""
        evals: dict[str, list[EvalPoint]] = {}
        for trial_id, metric, length, value, note in self.conn.execute("SELECT * FROM evals ORDER BY metric, length"):
            evals.setdefault(trial_id, []).append(EvalPoint(metric, length, value, note or ""))
        curves: dict[str, list[tuple[int, float]]] = {}
        for trial_id, step, loss in self.conn.execute("SELECT * FROM curves ORDER BY step"):
            curves.setdefault(trial_id, []).append((step, loss))
        during: dict[str, list[EvalPoint]] = {}
        if self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'during'").fetchone():
            for trial_id, step, metric, length, value, note in self.conn.execute(
                "SELECT * FROM during ORDER BY step, metric, length"
            ):
                during.setdefault(trial_id, []).append(EvalPoint(metric, length, value, note or "", step))
        records, skipped = [], {}
        for row in self.conn.execute("SELECT * FROM trials ORDER BY rowid"):
            try:
                records.append(_decode(row, evals.get(row[0], []), curves.get(row[0], []), during.get(row[0], [])))
            except (ValueError, TypeError, KeyError, json.JSONDecodeError) as error:
                logger.warning("results store %s: skipping corrupt trial row %r: %s", self.path, row[0], error)
                skipped[str(row[0])] = str(error)
        return records, skipped

    def results(self) -> Results:
        experiment = self.meta().get("experiment", "{}")
        records, skipped = self._read()
        return Results(json.loads(experiment) if _is_json(experiment) else {}, records, skipped)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_results(out_dir: str | Path) -> Results:
    """Read an out dir's store: the experiment dict, the valid trials and the skipped row ids."""
    with ResultsStore(out_dir) as store:
        return store.results()


def _write_schema(conn: sqlite3.Connection, experiment: ExperimentConfig) -> None:
    """Create the tables and the meta rows of ``experiment`` (inside the caller's transaction)."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [
            ("schema_version", SCHEMA_VERSION),
            ("experiment_hash", experiment.config_hash),
            ("experiment", json.dumps(experiment.to_dict(), sort_keys=True)),
            ("created", _now()),
        ],
    )


def _decode(row: tuple, evals: list[EvalPoint], curve: list[tuple[int, float]], during: list[EvalPoint]) -> TrialRecord:
    (
        trial_id,
        task,
        scheme,
        variant,
        seed,
        config_json,
        num_params,
        steps,
        world_size,
        final_loss,
        seconds,
        seconds_per_step,
        drift_rel,
        drift_cos,
        checkpoint,
        finished_at,
    ) = row
    config = TrialConfig.from_dict(json.loads(config_json))
    if (config.task, config.scheme, config.variant, config.seed) != (task, scheme, variant, seed):
        raise ValueError("sweep columns disagree with config_json")
    if config.trial_id != trial_id:
        raise ValueError(f"trial_id does not match its config (expected {config.trial_id})")
    for point in (*evals, *during):
        if point.value is None and not point.note:
            raise ValueError(f"eval {point.metric}@{point.length} has no value and no note")
        if point.step is not None and not 0 < point.step < config.steps:
            raise ValueError(
                f"eval {point.metric}@{point.length} at step {point.step} is not within the {config.steps} steps"
            )
    evals = [dataclasses.replace(point, step=config.steps) for point in evals]  # the final evaluation
    if not isinstance(num_params, int) or not isinstance(seconds, (int, float)):
        raise ValueError("num_params/seconds missing")
    drift = None if drift_rel is None else {"rel_frobenius": float(drift_rel), "cosine": float(drift_cos)}
    return TrialRecord(
        config=config,
        evals=evals,
        during=during,
        curve=curve,
        drift=drift,
        num_params=num_params,
        final_loss=float("nan") if final_loss is None else float(final_loss),
        seconds=float(seconds),
        seconds_per_step=float(seconds_per_step),
        world_size=int(world_size),
        checkpoint=checkpoint,
        finished_at=finished_at,
    )


def _finite(value: float | None) -> float | None:
    """NaN/inf stored as NULL (SQLite has no NaN)."""
    return None if value is None or not math.isfinite(value) else float(value)


def _note(point: EvalPoint) -> str:
    if point.note or _finite(point.value) is not None:
        return point.note
    return "n/a (non-finite: training diverged)"


def _is_json(text: str | None) -> bool:
    try:
        json.loads(text or "")
    except json.JSONDecodeError:
        return False
    return True


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
