"""The lab report's answers: one :class:`Section` per seed question, computed from the stored trials.

Every answer compares groups of seeds at the task's training length L (the judged metric:
``accuracy`` for order, ``exact_match`` for the algorithmic tasks, validation loss for charlm)
or beyond it. Each group's mean carries a 95 % bootstrap interval over its seeds
(:func:`posembed.lab.verdicts.bootstrap_interval`); two groups are *alike* when every difference
their intervals allow is within ``NOISE_FLOOR``, one is *better* when the intervals do not
overlap, and the answer is *cannot tell* when they overlap or a group has one seed. When the
store lacks the trials a question needs, the section says so and names the presets that have
them. The rules themselves are the pure functions of :mod:`posembed.lab.verdicts`.

>>> a, b = Stat((0.50, 0.52)), Stat((0.60, 0.62))
>>> c = Comparison("copy", "learned", "exact_match", 8, a, b)
>>> round(c.delta, 3), c.seeds, c.verdict("add", "concat")
(0.1, '2, 2', 'concat better')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from posembed.lab.report.tables import (
    HIGHER_IS_BETTER, METRIC_NAMES, LabData, Stat, metric_lengths, metric_stat, ordered, scheme_family, train_length,
)
from posembed.lab.verdicts import CONFIDENCE, NOISE_FLOOR, Interval, interval_verdict

__all__ = [
    "Section", "Comparison", "NOISE_FLOOR", "judged_metric", "compare", "presets_with", "learned_vs_sinusoidal",
    "variant_question", "extrapolation", "ranking_scores", "against_best", "ScoreRow", "frozen_vs_trained", "lacking", "INTERVAL_NOTE",
]

Table = tuple[list[str], list[list[Any]]]


@dataclass
class Section:
    """A question's title, its one-line answer, supporting text and tables.

    ``verdict`` is the short finding the report's summary lists (empty: the section states none,
    e.g. the store lacks its trials); ``decided`` whether any of its verdicts is more than
    "cannot tell"; ``anchor`` the id the summary links to.
    """

    title: str
    answer: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    verdict: str = ""
    anchor: str = ""
    decided: bool = False


def judged_metric(task: str) -> str:
    """The metric compared at the training length (charlm: validation loss, in nats)."""
    return {"order": "accuracy", "charlm": "val_loss"}.get(task, "exact_match")


@dataclass(frozen=True)
class Comparison:
    """Group ``b`` against group ``a`` on ``metric`` at ``length``."""

    task: str
    scheme: str
    metric: str
    length: int
    a: Stat
    b: Stat

    @property
    def delta(self) -> float:
        """``mean(b) - mean(a)`` (NaN when either has no value)."""
        return self.b.mean - self.a.mean

    @property
    def seeds(self) -> str:
        """The seed counts of the two groups, ``"2, 2"``."""
        return f"{self.a.n}, {self.b.n}"

    def verdict(self, name_a: str, name_b: str) -> str:
        """``alike``, ``<name> better``, ``cannot tell`` or ``n/a`` (:func:`posembed.lab.verdicts.interval_verdict`)."""
        return interval_verdict(self.a.interval, self.b.interval, HIGHER_IS_BETTER[self.metric], name_a, name_b)

    def row(self, *extra: Any) -> list[Any]:
        return [self.task, self.scheme, *extra, f"{METRIC_NAMES.get(self.metric, self.metric)} at {self.length}",
                self.a.interval.text(), self.b.interval.text(), f"{self.delta:+.4g}", self.seeds]


def compare(data: LabData, task: str, group_a: tuple[str, str], group_b: tuple[str, str]) -> Comparison | None:
    """Compare two ``(scheme, variant)`` groups of ``task`` at the training length (None if one is missing)."""
    groups = data.groups(task)
    trials_a, trials_b = groups.get((task, *group_a)), groups.get((task, *group_b))
    if not trials_a or not trials_b:
        return None
    metric, length = judged_metric(task), train_length(trials_a)
    scheme = group_a[0] if group_a[0] == group_b[0] else f"{group_a[0]} vs {group_b[0]}"
    return Comparison(task, scheme, metric, length, metric_stat(trials_a, metric, length),
                      metric_stat(trials_b, metric, length))


def presets_with(schemes: tuple[str, ...] = (), variants: tuple[str, ...] = (), tasks: tuple[str, ...] = ()) -> list[str]:
    """Names of the presets whose sweep includes all the given schemes, variants and any of ``tasks``.

    >>> presets_with(schemes=("nope", "t5_bias"), tasks=("copy", "reverse"))
    ['full', 'lengthgen', 'quick']
    """
    from posembed.lab.presets import PRESETS, get_preset

    names = []
    for name in sorted(PRESETS):
        exp = get_preset(name)
        if set(schemes) <= set(exp.schemes) and set(variants) <= set(exp.variants) and (
                not tasks or set(tasks) & set(exp.tasks)):
            names.append(name)
    return names


def lacking(need: str, **preset_filter: tuple[str, ...]) -> str:
    """The plain statement that the store cannot answer, naming the presets that can."""
    names = presets_with(**preset_filter)
    where = f"the preset{'s' if len(names) > 1 else ''} {', '.join(names)} ha{'ve' if len(names) > 1 else 's'} them" \
        if names else "no preset has them; add them with --set"
    return f"The store lacks the trials to answer this: it needs {need}; {where} (`posembed lab run --preset NAME`)."


def _summary(comparisons: list[Comparison], name_a: str, name_b: str) -> str:
    verdicts = [f"{c.task}/{c.scheme}: {c.verdict(name_a, name_b)} ({METRIC_NAMES.get(c.metric, c.metric)} "
                f"{c.a.interval.text()} vs {c.b.interval.text()})" for c in comparisons]
    return "; ".join(verdicts)


def _tally(comparisons: list[Comparison], names: tuple[str, str], what: str) -> str:
    """``"add better in 1, concat better in 0, alike in 2, cannot tell in 5 of 8 task/scheme pairs"``."""
    words = [c.verdict(*names) for c in comparisons]
    counts = [f"{name} better in {words.count(f'{name} better')}" for name in names]
    counts += [f"alike in {words.count('alike')}",
               f"cannot tell in {sum(w.startswith('cannot tell') for w in words)}"]
    return f"{', '.join(counts)} of {len(words)} {what}"


def _decided(rows: list[list[Any]]) -> bool:
    """Whether any row's verdict (its last cell) is ``alike`` or a winner."""
    return any(row[-1] == "alike" or row[-1].endswith(" better") for row in rows)


def _seed_counts(comparisons: list[Comparison]) -> str:
    counts = sorted({n for c in comparisons for n in (c.a.n, c.b.n)})
    return f"{'-'.join(map(str, (counts[0], counts[-1]))) if len(counts) > 1 else counts[0]} seed{'s' if counts[-1] > 1 else ''}"


def _header(name_a: str, name_b: str, second: str = "scheme") -> list[str]:
    interval = f"mean [{CONFIDENCE:.0%} interval]"
    return ["task", second, "metric at L", f"{name_a} (A): {interval}", f"{name_b} (B): {interval}", "Δ = B − A",
            "seeds (A, B)", "verdict"]


def learned_vs_sinusoidal(data: LabData) -> Section:
    """Question 1: learned vs sinusoidal absolute positions at the training length."""
    title = "Q1. Learned or sinusoidal positions, at the training length?"
    comparisons = [c for task in data.tasks() if (c := compare(data, task, ("learned", "base"), ("sinusoidal", "base")))]
    if not comparisons:
        return Section(title, lacking("the base variant of both learned and sinusoidal",
                                      schemes=("learned", "sinusoidal"), variants=("base",)), anchor="q1")
    tally = _tally(comparisons, ("learned", "sinusoidal"), "tasks")
    answer = f"{tally} ({_seed_counts(comparisons)} per group). " + _summary(comparisons, "learned", "sinusoidal") + "."
    rows = [[*c.row(), c.verdict("learned", "sinusoidal")] for c in comparisons]
    return Section(title, answer, [INTERVAL_NOTE], [(_header("learned", "sinusoidal", "schemes"), rows)],
                   verdict=f"learned vs sinusoidal: {tally}", anchor="q1", decided=_decided(rows))


INTERVAL_NOTE = (
    f"Means over seeds at the training length L, each with its {CONFIDENCE:.0%} percentile bootstrap interval over "
    "the seeds (every resample of the seed values; with 2 or 3 seeds this is the range of the seeds). 'alike' when "
    f"every difference the two intervals allow is within {NOISE_FLOOR}; '<name> better' when the intervals do not "
    "overlap; 'cannot tell' when they overlap, or a group has one seed. charlm is judged by validation loss (nats)."
)


def variant_question(data: LabData, title: str, variant: str, names: tuple[str, str], need: str,
                     anchor: str = "") -> Section:
    """Questions 2, 3 and 5: the ``base`` variant (A) against ``variant`` (B), per task and scheme."""
    comparisons = []
    for task in data.tasks():
        for scheme in ordered(s for (_, s, v) in data.groups(task) if v == variant):
            comparison = compare(data, task, (scheme, "base"), (scheme, variant))
            if comparison is not None:
                comparisons.append(comparison)
    if not comparisons:
        return Section(title, lacking(need, variants=("base", variant)), anchor=anchor)
    tally = _tally(comparisons, names, "task/scheme pairs")
    answer = f"{tally} ({_seed_counts(comparisons)} per group). " + _summary(comparisons, *names) + "."
    rows = [[*c.row(), c.verdict(*names)] for c in comparisons]
    return Section(title, answer, [INTERVAL_NOTE], [(_header(*names), rows)],
                   verdict=f"{names[0]} vs {names[1]}: {tally}", anchor=anchor, decided=_decided(rows))


@dataclass(frozen=True)
class ScoreRow:
    """One scheme's extrapolation on one task (``base`` variant, means over seeds).

    ``per_length`` holds ``(length, mean)`` for every evaluated length > L (mean ``None``: not
    measurable there, e.g. past a position table); ``beyond`` their mean (``None`` if any is
    ``None``), the score ranked; ``at_train`` the mean at L; ``interval`` the score of each seed
    (its own mean beyond L) as a mean and 95 % bootstrap interval over the seeds.
    """

    scheme: str
    at_train: float | None
    beyond: float | None
    per_length: tuple[tuple[int, float | None], ...]
    rank: int = 0
    interval: Interval = Interval.of(())

    @property
    def longest(self) -> int:
        return self.per_length[-1][0]

    @property
    def at_longest(self) -> float | None:
        return self.per_length[-1][1]


def _mean_or_none(stat: Stat) -> float | None:
    return stat.mean if stat.n else None


def _seed_scores(trials: list, metric: str, lengths: list[int]) -> list[float]:
    """Each seed's own mean of ``metric`` over ``lengths`` (a seed missing any length has none)."""
    scores = []
    for trial in trials:
        values = [metric_stat([trial], metric, n) for n in lengths]
        if all(v.n for v in values):
            scores.append(sum(v.mean for v in values) / len(values))
    return scores


def ranking_scores(data: LabData, task: str, metric: str | None = None) -> list[ScoreRow]:
    """Schemes of ``task`` ranked by ``metric`` beyond the training length (ties share a rank)."""
    metric = metric or judged_metric(task)
    rows = []
    for (_, scheme, variant), trials in data.groups(task).items():
        if variant != "base":
            continue
        context = train_length(trials)
        lengths = [n for n in metric_lengths(trials, metric) if n > context]
        if not lengths:
            continue
        beyond = [_mean_or_none(metric_stat(trials, metric, n)) for n in lengths]
        score = None if None in beyond else sum(beyond) / len(beyond)
        at_train = _mean_or_none(metric_stat(trials, metric, context))
        rows.append(ScoreRow(scheme, at_train, score, tuple(zip(lengths, beyond, strict=True)),
                             interval=Interval.of(_seed_scores(trials, metric, lengths) if score is not None else ())))
    sign = -1.0 if HIGHER_IS_BETTER[metric] else 1.0
    key = [math.inf if r.beyond is None else sign * r.beyond for r in rows]
    return sorted((ScoreRow(**{**r.__dict__, "rank": 1 + sum(k < key[i] for k in key)}) for i, r in enumerate(rows)),
                  key=lambda r: r.rank)


def against_best(scores: list[ScoreRow]) -> list[str]:
    """Each row against the first (best) one: ``best``, ``cannot tell`` (the intervals overlap, or
    either rests on one seed) or ``worse``; ``n/a`` for a row not measurable beyond L."""
    best = scores[0].interval
    words = []
    for index, r in enumerate(scores):
        if r.beyond is None:
            words.append("n/a")
        elif index == 0 or r.rank == scores[0].rank:
            words.append("best")
        elif best.n < 2 or r.interval.n < 2 or r.interval.overlaps(best):
            words.append("cannot tell")
        else:
            words.append("worse")
    return words


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _ranking_table(task: str, scores: list[ScoreRow], context: int) -> Table:
    metric = METRIC_NAMES.get(judged_metric(task), judged_metric(task))
    lengths = [n for n, _ in scores[0].per_length]
    header = [f"{task}: rank", "scheme", "family", f"{metric} at L = {context}",
              *[f"at {n} ({n / context:.3g}x)" for n in lengths],
              f"mean beyond L [{CONFIDENCE:.0%} interval]", "against the best", "seeds"]
    rows = []
    for r, word in zip(scores, against_best(scores)):
        by_length = dict(r.per_length)
        rows.append([r.rank, r.scheme, scheme_family(r.scheme), _fmt(r.at_train),
                     *[_fmt(by_length.get(n)) for n in lengths], r.interval.text() if r.beyond is not None else "n/a",
                     word, r.interval.n])
    return header, rows


def _best_of(task: str, scores: list[ScoreRow]) -> str:
    """``"copy: cannot tell (alibi, rope overlap)"``, ``"copy: alibi"`` (every other one worse) or
    ``"copy: all 6 tied"``."""
    words = against_best(scores)
    best = [r.scheme for r, w in zip(scores, words) if w == "best"]
    unsure = [r.scheme for r, w in zip(scores, words) if w == "cannot tell"]
    if len(best) == len(scores) > 1:
        return f"{task}: all {len(scores)} tied"
    if unsure:
        return f"{task}: cannot tell ({', '.join(best + unsure)} overlap)"
    return f"{task}: {', '.join(best)}"


def extrapolation(data: LabData) -> Section:
    """Question 4: which schemes keep working beyond the training length, ranked per task and overall."""
    title = "Q4. Which scheme extrapolates? (ranking by the judged metric beyond the training length)"
    tables, ranks, bests, decided = [], {}, [], False
    for task in data.tasks():
        scores = ranking_scores(data, task)
        if len(scores) < 2:
            continue
        tables.append(_ranking_table(task, scores, train_length(next(iter(data.groups(task).values())))))
        bests.append(_best_of(task, scores))
        decided = decided or "worse" in against_best(scores)
        for r in scores:
            ranks.setdefault(r.scheme, []).append(r.rank)
    if not tables:
        return Section(title, lacking("the base variant of two schemes or more, evaluated beyond L",
                                      variants=("base",)), anchor="q4")
    overall = sorted(ranks.items(), key=lambda item: sum(item[1]) / len(item[1]))
    answer = ("Best beyond L per task: " + "; ".join(bests) + ". Mean rank over tasks (1 = best, by the means; ties "
              "share a rank): " + ", ".join(f"{scheme} {sum(r) / len(r):.2g}" for scheme, r in overall) + ".")
    note = (f"Base variant; each seed's mean beyond L, then their mean and {CONFIDENCE:.0%} bootstrap interval over the "
            "seeds. Higher is better for accuracy and exact match, lower for validation loss. n/a beyond L (e.g. past "
            "a position table) ranks last. 'against the best': 'cannot tell' where a scheme's interval overlaps the "
            "best one's (or either has one seed), 'worse' where it lies wholly on the worse side; the ranks follow "
            "the means and say nothing where the intervals overlap.")
    return Section(title, answer, [note], tables, verdict="best beyond L: " + "; ".join(bests), anchor="q4",
                   decided=decided)


def frozen_vs_trained(data: LabData, drift: Table) -> Section:
    """Question 5: frozen vs trained position table, and how far the trained table drifts."""
    section = variant_question(
        data, "Q5. Frozen or trained position table? How far does it drift in training?", "frozen",
        ("trained", "frozen"), "the frozen and base variants of a scheme with parameters (e.g. learned)", anchor="q5")
    header, rows = drift
    trained = [row for row in rows if row[2] != "frozen"]
    if trained:
        section.answer += " Drift of the trained tables (||W - W0|| / ||W0||): " + "; ".join(
            f"{row[0]}/{row[1]}/{row[2]} {row[4]}" for row in trained) + "."
        section.tables.append((header, rows))
    else:
        section.paragraphs.append("No stored trial has trainable position parameters, so no drift was measured.")
    return section
