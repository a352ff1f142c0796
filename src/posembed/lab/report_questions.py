"""The lab report's answers: one :class:`Section` per seed question, computed from the stored trials.

Every answer is a comparison of means over seeds at the task's training length L (the judged
metric: ``accuracy`` for order, ``exact_match`` for the algorithmic tasks, validation loss for
charlm) or beyond it. Two groups count as *alike* when their means differ by no more than the
noise: ``max(NOISE_FLOOR, 2 * sqrt(std_a^2 + std_b^2))`` (the floor alone with one seed). When
the store lacks the trials a question needs, the section says so and names the presets that
have them. The rules themselves are the pure functions of :mod:`posembed.lab.verdicts`.

>>> a, b = Stat((0.50, 0.52)), Stat((0.60, 0.62))
>>> c = Comparison("copy", "learned", "exact_match", 8, a, b)
>>> round(c.delta, 3), round(c.noise, 4), c.verdict("add", "concat")
(0.1, 0.04, 'concat better')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from posembed.lab.report_tables import (
    HIGHER_IS_BETTER, LabData, Stat, metric_lengths, metric_stat, ordered, scheme_family, train_length,
)
from posembed.lab.verdicts import NOISE_FLOOR, noise, pair_verdict

__all__ = [
    "Section", "Comparison", "NOISE_FLOOR", "judged_metric", "compare", "presets_with", "learned_vs_sinusoidal",
    "variant_question", "extrapolation", "ranking_scores", "ScoreRow", "frozen_vs_trained", "lacking",
]

Table = tuple[list[str], list[list[Any]]]


@dataclass
class Section:
    """A question's title, its one-line numeric answer, supporting text and tables."""

    title: str
    answer: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


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
    def noise(self) -> float:
        """:func:`posembed.lab.verdicts.noise` of the two groups."""
        return noise(self.a.std, self.b.std, self.a.n, self.b.n)

    def verdict(self, name_a: str, name_b: str) -> str:
        """``alike``, ``<name> better`` or ``n/a`` (:func:`posembed.lab.verdicts.pair_verdict`)."""
        return pair_verdict(self.delta, self.noise, HIGHER_IS_BETTER[self.metric], name_a, name_b)

    def row(self, *extra: Any) -> list[Any]:
        return [self.task, self.scheme, *extra, f"{self.metric} @ {self.length}", self.a.text(), self.b.text(),
                f"{self.delta:+.4g}", f"{self.noise:.2g}"]


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
    verdicts = [f"{c.task}/{c.scheme}: {c.verdict(name_a, name_b)} ({c.metric} {c.a.mean:.4g} vs {c.b.mean:.4g})"
                for c in comparisons]
    return "; ".join(verdicts)


def learned_vs_sinusoidal(data: LabData) -> Section:
    """Question 1: learned vs sinusoidal absolute positions at the training length."""
    title = "Q1. Learned or sinusoidal positions, at the training length?"
    comparisons = [c for task in data.tasks() if (c := compare(data, task, ("learned", "base"), ("sinusoidal", "base")))]
    if not comparisons:
        return Section(title, lacking("the base variant of both learned and sinusoidal",
                                      schemes=("learned", "sinusoidal"), variants=("base",)))
    alike = sum(c.verdict("learned", "sinusoidal") == "alike" for c in comparisons)
    answer = f"Alike on {alike} of {len(comparisons)} tasks. " + _summary(comparisons, "learned", "sinusoidal") + "."
    header = ["task", "schemes", "metric @ L", "learned (A)", "sinusoidal (B)", "Δ = B - A", "noise", "verdict"]
    rows = [[*c.row(), c.verdict("learned", "sinusoidal")] for c in comparisons]
    return Section(title, answer, [_NOISE_NOTE], [(header, rows)])


_NOISE_NOTE = (
    f"Means over seeds at the training length L; 'alike' when |Δ| <= noise = max({NOISE_FLOOR}, "
    "2·sqrt(std_A² + std_B²)) (the floor alone with one seed). charlm is judged by validation loss (nats)."
)


def variant_question(data: LabData, title: str, variant: str, names: tuple[str, str], need: str) -> Section:
    """Questions 2, 3 and 5: the ``base`` variant (A) against ``variant`` (B), per task and scheme."""
    comparisons = []
    for task in data.tasks():
        for scheme in ordered(s for (_, s, v) in data.groups(task) if v == variant):
            comparison = compare(data, task, (scheme, "base"), (scheme, variant))
            if comparison is not None:
                comparisons.append(comparison)
    if not comparisons:
        return Section(title, lacking(need, variants=("base", variant)))
    alike = sum(c.verdict(*names) == "alike" for c in comparisons)
    wins = {name: sum(c.verdict(*names) == f"{name} better" for c in comparisons) for name in names}
    answer = (f"{names[0]} better in {wins[names[0]]}, {names[1]} better in {wins[names[1]]}, alike in {alike} of "
              f"{len(comparisons)} task/scheme pairs. " + _summary(comparisons, *names) + ".")
    header = ["task", "scheme", "metric @ L", f"{names[0]} (A)", f"{names[1]} (B)", "Δ = B - A", "noise", "verdict"]
    rows = [[*c.row(), c.verdict(*names)] for c in comparisons]
    return Section(title, answer, [_NOISE_NOTE], [(header, rows)])


@dataclass(frozen=True)
class ScoreRow:
    """One scheme's extrapolation on one task (``base`` variant, means over seeds).

    ``per_length`` holds ``(length, mean)`` for every evaluated length > L (mean ``None``: not
    measurable there, e.g. past a position table); ``beyond`` their mean (``None`` if any is
    ``None``), the score ranked; ``at_train`` the mean at L.
    """

    scheme: str
    at_train: float | None
    beyond: float | None
    per_length: tuple[tuple[int, float | None], ...]
    rank: int = 0

    @property
    def longest(self) -> int:
        return self.per_length[-1][0]

    @property
    def at_longest(self) -> float | None:
        return self.per_length[-1][1]


def _mean_or_none(stat: Stat) -> float | None:
    return stat.mean if stat.n else None


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
        rows.append(ScoreRow(scheme, at_train, score, tuple(zip(lengths, beyond, strict=True))))
    sign = -1.0 if HIGHER_IS_BETTER[metric] else 1.0
    key = [math.inf if r.beyond is None else sign * r.beyond for r in rows]
    return sorted((ScoreRow(**{**r.__dict__, "rank": 1 + sum(k < key[i] for k in key)}) for i, r in enumerate(rows)),
                  key=lambda r: r.rank)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _ranking_table(task: str, scores: list[ScoreRow], context: int) -> Table:
    metric = judged_metric(task)
    lengths = [n for n, _ in scores[0].per_length]
    header = [f"{task}: rank", "scheme", "family", f"{metric} @ L={context}",
              *[f"@ {n} ({n / context:.3g}x)" for n in lengths], f"mean {metric} beyond L"]
    rows = []
    for r in scores:
        by_length = dict(r.per_length)
        rows.append([r.rank, r.scheme, scheme_family(r.scheme), _fmt(r.at_train),
                     *[_fmt(by_length.get(n)) for n in lengths], _fmt(r.beyond)])
    return header, rows


def extrapolation(data: LabData) -> Section:
    """Question 4: which schemes keep working beyond the training length, ranked per task and overall."""
    title = "Q4. Which scheme extrapolates? (ranking by the judged metric beyond the training length)"
    tables, ranks = [], {}
    for task in data.tasks():
        scores = ranking_scores(data, task)
        if len(scores) < 2:
            continue
        tables.append(_ranking_table(task, scores, train_length(next(iter(data.groups(task).values())))))
        for r in scores:
            ranks.setdefault(r.scheme, []).append(r.rank)
    if not tables:
        return Section(title, lacking("the base variant of two schemes or more, evaluated beyond L",
                                      variants=("base",)))
    overall = sorted(ranks.items(), key=lambda item: sum(item[1]) / len(item[1]))
    answer = "Mean rank over tasks (1 = best; ties share a rank): " + ", ".join(
        f"{scheme} {sum(r) / len(r):.2g}" for scheme, r in overall) + "."
    note = ("Base variant, means over seeds; higher is better for accuracy and exact match, lower for validation "
            "loss. n/a beyond L (e.g. past a position table) ranks last. Ranks follow the means exactly: "
            f"differences below the noise floor ({NOISE_FLOOR}) are not meaningful.")
    return Section(title, answer, [note], tables)


def frozen_vs_trained(data: LabData, drift: Table) -> Section:
    """Question 5: frozen vs trained position table, and how far the trained table drifts."""
    section = variant_question(
        data, "Q5. Frozen or trained position table? How far does it drift in training?", "frozen",
        ("trained", "frozen"), "the frozen and base variants of a scheme with parameters (e.g. learned)")
    header, rows = drift
    trained = [row for row in rows if row[2] != "frozen"]
    if trained:
        section.answer += " Drift of the trained tables (||W - W0|| / ||W0||): " + "; ".join(
            f"{row[0]}/{row[1]}/{row[2]} {row[4]}" for row in trained) + "."
        section.tables.append((header, rows))
    else:
        section.paragraphs.append("No stored trial has trainable position parameters, so no drift was measured.")
    return section
