"""What the lab report reads and how it summarises it: trials grouped over seeds, mean +/- std.

:func:`load_lab_data` opens ``<out>/results.sqlite`` through :func:`posembed.lab.sweep.store.load_results`
and checks every number the report will use; a row that does not decode, or whose evaluations
or loss curve hold something other than numbers, is skipped and listed (with the reason) in
:attr:`LabData.skipped`, never fatal. :class:`Stat` is one cell of a results table: the values
of one metric at one length over the seeds of one ``(task, scheme, variant)`` group.

>>> stat = Stat.of([0.5, 0.75, None], note="n/a (table limit)")
>>> stat.n, stat.mean, round(stat.std, 4), stat.text()
(2, 0.625, 0.1768, '0.625 ± 0.18 (1 n/a)')
>>> Stat.of([None], note="n/a (table limit)").text()
'n/a (table limit)'

Rows follow the scheme families of the factory (:func:`scheme_family`: absolute, rotary, bias,
NoPE), so a scheme added to :mod:`posembed.schemes.factory` lands in its family's rows.

>>> [scheme_family(s) for s in ("scaled_sinusoidal", "rope_yarn", "kerple", "cope", "nope", "mystery")]
['absolute', 'rotary', 'bias', 'bias', 'NoPE', 'other']
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posembed.lab.config import TrialConfig
from posembed.lab.registration import META_KEY
from posembed.lab.sweep.store import STORE_NAME, ResultsStore, TrialRecord
from posembed.lab.task_registry import metric_label, task_entry
from posembed.schemes.factory import FACTORY

__all__ = [
    "Stat",
    "LabData",
    "FINAL",
    "point_fraction",
    "point_label",
    "trial_fraction",
    "load_lab_data",
    "group_trials",
    "metric_stat",
    "metric_lengths",
    "primary_metric",
    "train_length",
    "results_table",
    "drift_table",
    "ordered",
    "FAMILIES",
    "scheme_family",
    "by_family",
]

logger = logging.getLogger(__name__)

GroupKey = tuple[str, str, str]  # (task, scheme, variant)

#: scheme families in the order the tables list them (``other``: a name the factory lacks)
FAMILIES = ("absolute", "rotary", "bias", "NoPE", "other")


def scheme_family(scheme: str) -> str:
    """``absolute``, ``rotary``, ``bias`` (the factory class's kind) or ``NoPE``; ``other`` when unknown."""
    entry = FACTORY.get(scheme)
    if entry is None:
        return "NoPE" if scheme == "none" else "other"
    return "NoPE" if entry.name == "nope" else entry.cls.kind.value


def by_family(keys: Iterable[GroupKey]) -> list[GroupKey]:
    """Group keys ordered by :data:`FAMILIES`, first-seen order within a family (a stable sort).

    >>> by_family([("copy", "kerple", "base"), ("copy", "rope", "base"), ("copy", "learned", "base")])
    [('copy', 'learned', 'base'), ('copy', 'rope', 'base'), ('copy', 'kerple', 'base')]
    """
    return sorted(keys, key=lambda key: FAMILIES.index(scheme_family(key[1])))


@dataclass(frozen=True)
class Stat:
    """One metric over seeds: the finite values, how many seeds had none, why.

    ``std`` is the sample standard deviation (``n - 1`` in the denominator); NaN for one seed.
    """

    values: tuple[float, ...]
    missing: int = 0
    note: str = ""

    @classmethod
    def of(cls, values: Iterable[float | None], note: str = "") -> Stat:
        values = list(values)
        finite = tuple(float(v) for v in values if v is not None)
        return cls(finite, len(values) - len(finite), note if len(finite) < len(values) else "")

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def std(self) -> float:
        return statistics.stdev(self.values) if self.n >= 2 else math.nan

    def text(self) -> str:
        """``mean ± std`` (4 and 2 significant digits), the bare value for one seed, or the n/a note."""
        if not self.values:
            return self.note or "n/a"
        body = f"{self.mean:.4g} ± {self.std:.2g}" if self.n >= 2 else f"{self.mean:.4g}"
        return body + (f" ({self.missing} n/a)" if self.missing else "")


@dataclass
class LabData:
    """The readable trials of one out dir and the rows skipped as corrupt ``(trial_id, reason)``."""

    out_dir: Path
    experiment: dict[str, Any]
    trials: list[TrialRecord]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: the questions and seeds the runner recorded before the run (:mod:`posembed.lab.registration`);
    #: None for a store written before that record existed
    registration: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return str(self.experiment.get("name") or self.out_dir.name)

    def tasks(self) -> list[str]:
        return ordered(t.config.task for t in self.trials)

    def groups(self, task: str | None = None) -> dict[GroupKey, list[TrialRecord]]:
        return group_trials(t for t in self.trials if task is None or t.config.task == task)

    def points(self) -> tuple[float, ...]:
        """The training points the trials were evaluated at, as fractions of their steps, ascending
        (:data:`FINAL` always: the end of training; earlier ones from each trial's ``during``)."""
        found = {FINAL}
        for trial in self.trials:
            steps = {p.step for p in trial.during}
            found |= {trial_fraction(trial, step) for step in steps}
        return tuple(sorted(found))

    def at(self, fraction: float) -> LabData:
        """The data as it stood after ``fraction`` of each trial's training: every trial's
        evaluations at that point (from ``during``; the final ones at :data:`FINAL`), its loss
        curve cut there. A trial not evaluated there is left out.

        Raises:
            ValueError: ``fraction`` is not in (0, 1].
        """
        if not 0 < fraction <= FINAL:
            raise ValueError(f"a training point is a fraction of the steps in (0, 1], got {fraction!r}")
        if fraction == FINAL:
            return self
        trials = []
        for trial in self.trials:
            at = {step for step in {p.step for p in trial.during} if trial_fraction(trial, step) == fraction}
            evals = [p for p in trial.during if p.step in at]
            if evals:
                step = evals[0].step
                trials.append(dataclasses.replace(trial, evals=evals, curve=[c for c in trial.curve if c[0] <= step]))
        return LabData(self.out_dir, self.experiment, trials, self.skipped, self.registration)

    def step_at(self, fraction: float) -> int | None:
        """The training step of ``fraction`` when every trial's config puts it at one step, else None."""
        steps = {step for t in self.trials for step, f in _fractions(t.config).items() if f == fraction}
        return steps.pop() if len(steps) == 1 else None


#: the end of training, as a fraction of the steps
FINAL = 1.0


def point_fraction(step: int | None, steps: int) -> float:
    """``step`` as a fraction of ``steps``, to 3 decimals (``None``, the end: 1.0).

    >>> point_fraction(30, 300), point_fraction(None, 300), point_fraction(667, 2000)
    (0.1, 1.0, 0.334)
    """
    return FINAL if step is None else round(step / steps, 3)


def point_label(fraction: float, step: int | None = None) -> str:
    """How the report names a training point.

    >>> point_label(0.1, 30), point_label(1.0), point_label(0.3)
    ('10 % (step 30)', '100 % (end)', '30 %')
    """
    where = " (end)" if fraction == FINAL else f" (step {step})" if step is not None else ""
    return f"{fraction:.0%}".replace("%", " %") + where


def trial_fraction(trial: TrialRecord, step: int | None) -> float:
    """The fraction of ``eval_at`` a trial evaluated at after ``step`` (its config's, so 1/3 stays
    1/3 however the step rounds); a step the config does not name: :func:`point_fraction`."""
    found = _fractions(trial.config).get(step)
    return found if found is not None else point_fraction(step, trial.config.steps)


@functools.lru_cache(maxsize=1024)
def _fractions(cfg: TrialConfig) -> dict[int, float]:
    """``{step: fraction}`` of a config's ``eval_at`` (computed once per config: reports ask often)."""
    return dict(zip(cfg.eval_steps, cfg.eval_at))


def load_lab_data(out_dir: str | Path) -> LabData:
    """Read and check the results store of ``out_dir`` (the report's input).

    Raises:
        ValueError: ``out_dir`` is not a folder, holds no ``results.sqlite``, the file is not a
            results store, or the store holds no readable trial.
    """
    out = Path(out_dir)
    if not out.is_dir():
        raise ValueError(f"{str(out)!r} is not a folder; give the --out folder of `posembed lab run`")
    if not (out / STORE_NAME).is_file():
        raise ValueError(f"{str(out)!r} holds no {STORE_NAME}; run `posembed lab run --preset quick --out {out}` first")
    with ResultsStore(out) as store:
        results = store.results()
        recorded = store.meta().get(META_KEY)
    skipped = list(results.reasons.items())
    trials = []
    for record in results.trials:
        problem = _number_problem(record)
        if problem:
            logger.warning("lab report: skipping corrupt trial row %r: %s", record.trial_id, problem)
            skipped.append((record.trial_id, problem))
        else:
            trials.append(record)
    if not trials:
        detail = f" ({len(skipped)} corrupt rows skipped: {', '.join(t for t, _ in skipped)})" if skipped else ""
        raise ValueError(f"the results store in {str(out)!r} holds no finished trials{detail}; nothing to report")
    return LabData(out, results.experiment, trials, skipped, _registration(recorded))


def _registration(text: str | None) -> dict[str, Any] | None:
    """The stored registration record, or None when absent or unreadable (logged)."""
    if text is None:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        logger.warning("lab report: the store's registration record is not a JSON object; ignored")
        return None
    return found


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number_problem(record: TrialRecord) -> str:
    """Why a decoded record still cannot be reported ('' when it can)."""
    for point in record.during:
        if not (isinstance(point.step, int) and 0 < point.step < record.config.steps):
            return f"eval {point.metric}@{point.length} during training has step {point.step!r}, not in 1..steps-1"
    for point in (*record.evals, *record.during):
        if not isinstance(point.length, int) or isinstance(point.length, bool):
            return f"eval {point.metric} has a non-integer length {point.length!r}"
        if point.value is not None and not _is_number(point.value):
            return f"eval {point.metric}@{point.length} is not a finite number: {point.value!r}"
    for step, loss in record.curve:
        if not isinstance(step, int) or (loss is not None and not _is_number(loss)):
            return f"loss curve point {(step, loss)!r} is not (integer step, number)"
    for name in ("seconds", "seconds_per_step"):
        if not math.isfinite(getattr(record, name)):
            return f"{name} is not finite"
    return ""


def ordered(items: Iterable[Any]) -> list[Any]:
    """Distinct items in first-seen order.

    >>> ordered(["b", "a", "b"])
    ['b', 'a']
    """
    return list(dict.fromkeys(items))


def group_trials(trials: Iterable[TrialRecord]) -> dict[GroupKey, list[TrialRecord]]:
    """``{(task, scheme, variant): [trials over seeds]}`` in the store's (sweep) order."""
    groups: dict[GroupKey, list[TrialRecord]] = {}
    for trial in trials:
        cfg = trial.config
        groups.setdefault((cfg.task, cfg.scheme, cfg.variant), []).append(trial)
    return groups


def primary_metric(task: str) -> str:
    """The metric the task's tables and figures show (its registry entry's ``shown``: ``accuracy``
    for order, ``perplexity`` for charlm, ``exact_match`` for the algorithmic tasks)."""
    return task_entry(task).shown


def train_length(trials: Sequence[TrialRecord]) -> int:
    """The training length L of a group (``context``; the same for every trial of a task)."""
    return trials[0].config.context


def metric_lengths(trials: Iterable[TrialRecord], metric: str) -> list[int]:
    """Every length at which ``metric`` was evaluated in ``trials``, ascending."""
    return sorted({p.length for t in trials for p in t.evals if p.metric == metric})


def metric_stat(trials: Sequence[TrialRecord], metric: str, length: int) -> Stat:
    """``metric`` at ``length`` over the trials (seeds) of one group."""
    values, notes = [], []
    for trial in trials:
        point = next((p for p in trial.evals if p.metric == metric and p.length == length), None)
        values.append(None if point is None else point.value)
        notes.append("not evaluated" if point is None else point.note)
    return Stat.of(values, note=next((n for n in notes if n), ""))


def _length_label(length: int, context: int) -> str:
    return f"{length} ({length / context:.3g}x)"


def results_table(data: LabData, task: str) -> tuple[list[str], list[list[Any]]]:
    """The task's primary metric at every evaluated length, one row per (scheme, variant), by family."""
    groups = data.groups(task)
    metric = primary_metric(task)
    lengths = metric_lengths((t for group in groups.values() for t in group), metric)
    context = train_length(next(iter(groups.values())))
    name = metric_label(metric)
    header = [
        "family",
        "scheme",
        "variant",
        "seeds",
        *[f"{name} at {_length_label(n, context)}" for n in lengths],
        "final train loss",
        "ms per step",
        "parameters",
    ]
    rows = []
    for key in by_family(groups):
        trials, scheme, variant = groups[key], key[1], key[2]
        cells = [metric_stat(trials, metric, n).text() for n in lengths]
        final = Stat.of((t.final_loss if math.isfinite(t.final_loss) else None for t in trials), "diverged")
        speed = Stat.of(1000 * t.seconds_per_step for t in trials)
        rows.append(
            [
                scheme_family(scheme),
                scheme,
                variant,
                len(trials),
                *cells,
                final.text(),
                speed.text(),
                trials[0].num_params,
            ]
        )
    return header, rows


def drift_table(data: LabData) -> tuple[list[str], list[list[Any]]]:
    """How far the position parameters moved, per (task, scheme, variant) that has any."""
    header = ["task", "scheme", "variant", "seeds", "drift ||W − W0|| / ||W0||", "cos(W, W0)"]
    rows = []
    for (task, scheme, variant), trials in data.groups().items():
        with_drift = [t.drift for t in trials if t.drift is not None]
        if with_drift:
            rows.append(
                [
                    task,
                    scheme,
                    variant,
                    len(with_drift),
                    Stat.of(d["rel_frobenius"] for d in with_drift).text(),
                    Stat.of(d["cosine"] for d in with_drift).text(),
                ]
            )
    return header, rows
