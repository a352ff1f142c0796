"""The context study's results: a small SQLite file of its own (``<out>/context.sqlite``).

The lab's store keys one row per trial (one config); a context study evaluates one trained
model under many schemes and lengths, so each (model, method, length) evaluation is stored as
its own group of rows, written in one transaction (all its metrics or none), and skipped when
already present: an interrupted study resumes where it stopped.

============ =====================================================================
column       meaning
============ =====================================================================
config       :attr:`~posembed.lab.context.presets.ContextConfig.config_id`
model        ``rope``, ``alibi``, ``nope``, ``rope+linear@4x`` (fine-tuned) ...
method       extension method at evaluation (``none`` for the references)
length       evaluated length in characters
metric       ``perplexity``, ``passkey`` (per depth), ``passkey_mean``
depth        passkey depth in [0, 1]; -1 for metrics without one
value        the number (NULL: not measurable, e.g. validation split too short)
============ =====================================================================

Rows are keyed by :func:`config_id_of` (one seed's run), trained models by :func:`train_id_of` (the
fields that shape them), so studies that train alike share models (:meth:`ContextStore.training_under`).

>>> import tempfile, pathlib
>>> store = ContextStore(pathlib.Path(tempfile.mkdtemp()) / "c.sqlite")
>>> store.evaluated("abc")
set()
>>> store.put("abc", "rope", "yarn", 256, [("perplexity", -1.0, 5.5), ("passkey", 0.5, 1.0)])
>>> store.evaluated("abc"), [r["value"] for r in store.rows("abc")]
({('rope', 'yarn', 256)}, [1.0, 5.5])
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from posembed.errors import ForeignStoreError
from posembed.lab.ids import content_id, without_later_defaults
from posembed.lab.store_file import check_store_file, create_store_file, store_error, store_tables

__all__ = ["ContextStore", "NO_DEPTH", "TRAIN_FIELDS", "config_id_of", "train_id_of"]

NO_DEPTH = -1.0

#: the config fields :func:`train_id_of` hashes
TRAIN_FIELDS = (
    "context",
    "dim",
    "depth",
    "heads",
    "steps",
    "batch",
    "lr",
    "warmup",
    "passkey_fraction",
    "passkey_only_steps",
    "passkey_adjacent_steps",
    "digits",
    "seed",
    "text",
    "finetune_scale",
    "finetune_steps",
    "finetune_lr",
    "weight_decay",
    "beta2",
    "grad_clip",
    "optimizer",
    "matmuls",
)
#: fields added after stores existed, hashed only away from this value (what those stores trained with)
_LATER_DEFAULTS = {
    "passkey_adjacent_steps": 0,
    "weight_decay": 0.1,
    "beta2": 0.99,
    "grad_clip": 1.0,
    "optimizer": "adamw",
    "matmuls": "fp32",
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS context_rows (
    config TEXT NOT NULL, model TEXT NOT NULL, method TEXT NOT NULL, length INTEGER NOT NULL,
    metric TEXT NOT NULL, depth REAL NOT NULL, value REAL,
    PRIMARY KEY (config, model, method, length, metric, depth)
);
CREATE TABLE IF NOT EXISTS context_models (
    config TEXT NOT NULL, model TEXT NOT NULL, facts TEXT NOT NULL, PRIMARY KEY (config, model)
);
CREATE TABLE IF NOT EXISTS context_configs (config TEXT PRIMARY KEY, name TEXT NOT NULL, body TEXT NOT NULL);
"""


def config_id_of(body: dict) -> str:
    """:attr:`~posembed.lab.context.presets.ContextConfig.config_id` of a config body (``to_dict()``): the one
    id function (:func:`~posembed.lab.ids.content_id`) on json's default spacing, as these ids were defined."""
    fields = without_later_defaults(body, _LATER_DEFAULTS)
    return content_id({k: v for k, v in fields.items() if k not in ("name", "seeds")}, spacing="json", digits=16)


def train_id_of(body: dict) -> str:
    """:attr:`~posembed.lab.context.presets.ContextConfig.train_id` of a config body: its :data:`TRAIN_FIELDS`."""
    fields = without_later_defaults(body, _LATER_DEFAULTS)
    return content_id({k: v for k, v in fields.items() if k in TRAIN_FIELDS}, spacing="json", digits=16)


_KIND = "context store"
_TABLES = {"context_rows", "context_models", "context_configs"}


class ContextStore:
    """Rows of one or more context studies in one SQLite file (created whole on first use).

    The file is checked and created as the lab's results store is (:mod:`posembed.lab.store_file`):
    a folder, an empty (0-byte) file, a file that is not a database or a damaged one raises
    :class:`~posembed.errors.StoreError`, another program's database :class:`~posembed.errors.ForeignStoreError`,
    each one line naming the file; so does an error while reading or writing it (a full disk, a read-only
    folder), after which what was stored stays.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        check_store_file(self.path, required=False, kind=_KIND)
        if not self.path.exists():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                create_store_file(self.path, lambda new: new.executescript(_SCHEMA))
            except (sqlite3.Error, OSError) as error:
                raise store_error(self.path, error, "create", _KIND) from None
        with self._connection("open") as conn:
            tables = store_tables(conn)
            if tables - _TABLES or not tables & _TABLES:
                held = ", ".join(sorted(tables - _TABLES)) or "none"
                raise ForeignStoreError(
                    f"{str(self.path)!r} is not a posembed {_KIND} (it holds tables {held}); "
                    "choose another --out folder"
                )
            conn.executescript(_SCHEMA)  # a file from before a table existed gains it

    @contextmanager
    def _connection(self, action: str = "read") -> Iterator[sqlite3.Connection]:
        """A connection in one transaction (committed on leaving); SQLite's and the OS's errors as one line."""
        try:
            with closing(sqlite3.connect(self.path, timeout=30.0)) as conn, conn:
                conn.row_factory = sqlite3.Row
                yield conn
        except (sqlite3.Error, OSError) as error:
            raise store_error(self.path, error, action, _KIND) from None

    def evaluated(self, config: str) -> set[tuple[str, str, int]]:
        """The ``(model, method, length)`` evaluations of ``config`` stored (each with all its metrics:
        they were written together)."""
        with self._connection() as conn:
            found = conn.execute("SELECT DISTINCT model, method, length FROM context_rows WHERE config=?", (config,))
            return {(row["model"], row["method"], row["length"]) for row in found.fetchall()}

    def put(
        self, config: str, model: str, method: str, length: int, values: list[tuple[str, float, float | None]]
    ) -> None:
        """Store one evaluation's ``(metric, depth, value)`` s in one transaction (replacing any)."""
        rows = [
            (config, model, method, int(length), m, float(d), None if v is None else float(v)) for m, d, v in values
        ]
        with self._connection("write") as conn:
            conn.executemany("INSERT OR REPLACE INTO context_rows VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def rows(self, config: str) -> list[dict]:
        """Every row of ``config``, ordered by model, method, length, metric, depth."""
        with self._connection() as conn:
            found = conn.execute(
                "SELECT * FROM context_rows WHERE config=? ORDER BY model, method, length, metric, depth", (config,)
            ).fetchall()
        return [dict(row) for row in found]

    def forget(self, train_id: str, model: str, configs: list[str]) -> int:
        """Drop the trained ``model`` of ``train_id`` and, in one transaction, its evaluations in the
        stored studies ``configs`` (those that train under that id: they were measured on the
        dropped weights); returns how many rows went."""
        with self._connection("write") as conn:
            conn.execute("DELETE FROM context_models WHERE config=? AND model=?", (train_id, model))
            gone = sum(
                conn.execute("DELETE FROM context_rows WHERE config=? AND model=?", (config, model)).rowcount
                for config in configs
            )
        return gone

    def put_model(self, config: str, model: str, facts: dict) -> None:
        """Facts about a trained model (seconds, final loss, parameters, checkpoint folder)."""
        with self._connection("write") as conn:
            conn.execute("INSERT OR REPLACE INTO context_models VALUES (?, ?, ?)", (config, model, json.dumps(facts)))

    def models(self, config: str) -> dict[str, dict]:
        with self._connection() as conn:
            found = conn.execute("SELECT model, facts FROM context_models WHERE config=?", (config,)).fetchall()
        return {row["model"]: json.loads(row["facts"]) for row in found}

    def put_config(self, config: str, name: str, body: dict) -> None:
        with self._connection("write") as conn:
            conn.execute("INSERT OR REPLACE INTO context_configs VALUES (?, ?, ?)", (config, name, json.dumps(body)))

    def training_under(self, train_id: str) -> list[str]:
        """The stored studies (config ids) whose models train under ``train_id``."""
        return [config for config, (_, body) in self.configs().items() if train_id_of(body) == train_id]

    def configs(self) -> dict[str, tuple[str, dict]]:
        """``{config id: (name, body)}`` of every study stored."""
        with self._connection() as conn:
            found = conn.execute("SELECT * FROM context_configs").fetchall()
        return {row["config"]: (row["name"], json.loads(row["body"])) for row in found}
