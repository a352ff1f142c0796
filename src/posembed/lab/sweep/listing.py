"""What an out folder holds, trial by trial: ``posembed lab list OUT``.

One :class:`TrialRow` per stored trial (in the order they finished): the sweep coordinates,
the task's main metric at the training length and at the longest evaluated length, the final
training loss and the checkpoint folder (as the store records it, joined to the out folder;
older runs' hash-named folders included). :func:`format_table` and :func:`to_json` render them.

Main metrics: ``accuracy`` (order), ``exact_match`` (copy, reverse, sort, addition; lengths are
operand lengths) and ``val_loss`` (charlm; lengths are contexts).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from posembed.lab.sweep.store import STORE_NAME, ResultsStore, TrialRecord, load_results
from posembed.lab.task_registry import ENTRIES, task_entry

__all__ = ["TrialRow", "list_trials", "format_table", "to_json", "store_rows", "MAIN_METRIC"]

#: task -> the metric the table shows (its registry entry's); a stored task the registry does not
#: know shows exact match (:func:`~posembed.lab.task_registry.task_entry`)
MAIN_METRIC = {entry.name: entry.metric for entry in ENTRIES}


@dataclass
class TrialRow:
    """One stored trial as the listing shows it (``None``: not measurable or not stored)."""

    trial_id: str
    task: str
    scheme: str
    variant: str
    seed: int
    metric: str
    train_length: int
    at_train_length: float | None
    longest_length: int | None
    at_longest_length: float | None
    final_loss: float | None
    checkpoint: str | None
    evals: dict[str, dict[int, float | None]] = field(default_factory=dict)


def list_trials(
    out_dir: str | Path, *, tasks: list[str] | None = None, schemes: list[str] | None = None
) -> list[TrialRow]:
    """The stored trials of ``out_dir``, optionally only those of ``tasks`` / ``schemes``.

    Raises:
        FileNotFoundError: ``out_dir`` does not exist or holds no results store.
        ValueError: a filter names a task or scheme no stored trial has (the message lists those
            stored); the store cannot be read (:class:`~posembed.lab.sweep.store.StoreError`, ...).
    """
    out = Path(out_dir)
    if not out.is_dir():
        raise FileNotFoundError(f"{str(out)!r} is not a folder; give the --out folder of a `posembed lab run`")
    if not (out / STORE_NAME).exists():
        raise FileNotFoundError(f"{str(out)!r} holds no {STORE_NAME}; run `posembed lab run --out {out}` first")
    records = load_results(out).trials
    records = _only(records, "task", tasks)
    records = _only(records, "scheme", schemes)
    return [_row(record, out) for record in records]


def _only(records: list[TrialRecord], key: str, wanted: list[str] | None) -> list[TrialRecord]:
    if not wanted:
        return records
    stored = sorted({getattr(record.config, key) for record in records})
    missing = [value for value in wanted if value not in stored]
    if missing and records:
        raise ValueError(f"no stored trial has {key} {missing[0]!r}; stored {key}s: {', '.join(stored)}")
    return [record for record in records if getattr(record.config, key) in wanted]


def _row(record: TrialRecord, out: Path) -> TrialRow:
    cfg = record.config
    metric = task_entry(cfg.task).metric
    values = record.metric(metric)
    longest = max(values) if values else None
    evals: dict[str, dict[int, float | None]] = {}
    for point in record.evals:
        evals.setdefault(point.metric, {})[point.length] = point.value
    return TrialRow(
        trial_id=record.trial_id,
        task=cfg.task,
        scheme=cfg.scheme,
        variant=cfg.variant,
        seed=cfg.seed,
        metric=metric,
        train_length=cfg.context,
        at_train_length=values.get(cfg.context),
        longest_length=longest,
        at_longest_length=None if longest is None else values[longest],
        final_loss=record.final_loss if math.isfinite(record.final_loss) else None,
        checkpoint=None if record.checkpoint is None else str(out / record.checkpoint),
        evals=evals,
    )


_COLUMNS = ("task", "scheme", "variant", "seed", "metric", "at L", "longest", "final loss", "checkpoint")


def format_table(rows: list[TrialRow]) -> str:
    """A plain-text table, one trial a line (``at L``: the main metric at the training length L;
    ``longest``: at the longest evaluated length, named in brackets).

    >>> row = TrialRow("ab", "copy", "rope", "base", 0, "exact_match", 8, 1.0, 24, 0.0, 0.01, "out/ck")
    >>> print(format_table([row]))
    task  scheme  variant  seed  metric       at L       longest     final loss  checkpoint
    copy  rope    base     0     exact_match  1.000 [8]  0.000 [24]  0.0100      out/ck
    """
    if not rows:
        return "no finished trials stored yet"
    cells = [_COLUMNS] + [
        (
            row.task,
            row.scheme,
            row.variant,
            str(row.seed),
            row.metric,
            f"{_number(row.at_train_length)} [{row.train_length}]",
            f"{_number(row.at_longest_length)} [{row.longest_length if row.longest_length is not None else '-'}]",
            _number(row.final_loss, 4),
            row.checkpoint or "-",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells)


def _number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def to_json(rows: list[TrialRow]) -> str:
    """A JSON list, one object per trial (every field of :class:`TrialRow`; eval lengths as keys)."""
    return json.dumps([asdict(row) for row in rows], indent=2)


def store_rows(out_dir: str | os.PathLike) -> tuple[list[tuple[str, str, str, int, float | None]], dict[str, int]]:
    """The exact-match rows ``(task, scheme, variant, length, value)`` of a lab run's store and each
    task's training length (what :mod:`posembed.lab.lengthgen.ranking` scores)."""
    with ResultsStore(out_dir) as store:
        records = store.records()
    rows = [
        (r.config.task, r.config.scheme, r.config.variant, length, value)
        for r in records
        for length, value in r.metric("exact_match").items()
    ]
    return rows, {r.config.task: r.config.context for r in records}
