"""A decision as the lab report writes it: one table row, its verdict in words, the rule it was
decided by, and one question's verdicts over training.

Verdict words are :func:`posembed.stats.verdict.decide`'s; this module only says them: a difference shown
inside the margin says so, an interaction says whether the answer depends on the scheme, the
Vaswani test says whether the difference lies beyond the margin; a bounded measure's interval
stays in its bounds; the rule note says what this run used (seeds per group, training points,
tests in the family).
"""

from __future__ import annotations

import math
from typing import Any

from posembed.lab.presets import Interaction, Measure, Primary
from posembed.lab.report.decisions import THRESHOLD, VASWANI_BEYOND, LabDecisions, Look, beyond_margin, judged_metric
from posembed.lab.report.tables import LabData
from posembed.lab.task_registry import METRICS
from posembed.lab.verdicts import FAIL_RATIO
from posembed.stats.verdict import ALPHA, Comparison, Decision, Outcome, describe, number_text

__all__ = [
    "group_text",
    "DECISION_HEADER",
    "decision_row",
    "shown_name",
    "mdd_text",
    "verdict_text",
    "rule_note",
    "short_label",
    "TRAINING_HEADER",
    "training_table",
    "changes",
]

Table = tuple[list[str], list[list[Any]]]


def group_text(
    values: tuple[float, ...] | list[float], digits: int = 4, bounds: tuple[float, float] | None = None
) -> str:
    """``mean [low, high]`` with what the interval is (:func:`posembed.stats.verdict.describe`); a measure
    bounded to ``bounds`` (accuracy: ``(0, 1)``) has its t interval clipped to them, and says so.

    >>> group_text([1.0, 2.0]), group_text([1.0, 2.0, 3.0]), group_text([2.5])
    ('1.5 [1, 2] (2 seeds: their range)', '2 [-0.4841, 4.484] (3 seeds: 95 % t)', '2.5 (1 seed)')
    >>> group_text([0.1, 0.9, 0.95], bounds=(0.0, 1.0))
    '0.65 [0, 1] (3 seeds: 95 % t, clipped to [0, 1])'
    """
    mean, low, high, _ = describe(list(values))
    n = len(values)
    if not n:
        return "n/a"
    if n == 1:
        return f"{mean:.{digits}g} (1 seed)"
    what = "their range" if n == 2 else "95 % t"
    if bounds is not None and (low < bounds[0] or high > bounds[1]):
        low, high = max(low, bounds[0]), min(high, bounds[1])
        what += f", clipped to [{bounds[0]:g}, {bounds[1]:g}]"
    return f"{mean:.{digits}g} [{low:.{digits}g}, {high:.{digits}g}] ({n} seeds: {what})"


#: the columns of every tested comparison's row
DECISION_HEADER = [
    "comparison",
    "A",
    "B",
    "Δ = B − A [95 % interval]",
    "test",
    "p (Holm)",
    "verdict",
    "could detect (80 % power)",
]


def _p(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2g}"


def _bounds(c: Comparison) -> tuple[float, float] | None:
    """``(0, 1)`` for a comparison of a bounded measure (accuracy, exact match), else None."""
    bounded = [m for m, entry in METRICS.items() if entry.fraction]
    return (0.0, 1.0) if any(f"{m} at L" in c.name for m in bounded) or c.name.endswith("beyond L") else None


def _delta(d: Decision) -> str:
    """``Δ [interval]`` on the tested scale; a difference of bounded measures stays within ``[-1, 1]``."""
    c, (low, high) = d.comparison, d.interval
    scale = " (log)" if c.log_scale else ""
    if math.isnan(low):
        return f"{d.difference:+.3g}"
    clipped = ""
    if _bounds(c) is not None and (low < -1 or high > 1):
        low, high, clipped = max(low, -1.0), min(high, 1.0), " (clipped to [-1, 1])"
    return f"{d.difference:+.3g} [{low:+.3g}, {high:+.3g}]{scale}{clipped}"


def shown_name(name: str) -> str:
    """A comparison's name without its question prefix (``"Q1 charlm: ..."`` -> ``"charlm: ..."``)."""
    head, _, rest = name.partition(" ")
    return rest if head[:1] == "Q" and head[1:].isdigit() else name


def decision_row(d: Decision, look: Look | None = None) -> list[Any]:
    """One row of :data:`DECISION_HEADER` (Δ on the tested scale: log for ratios)."""
    c = d.comparison
    bounds = _bounds(c)
    test = {"paired": "seed-paired t", "welch": "Welch t", "mcnemar": "McNemar"}[c.test]
    p = f"{_p(d.p)} ({_p(d.p_adjusted)})" if d.claims else _p(d.p)
    return [
        shown_name(c.name),
        f"{c.a}: {group_text(c.values_a, bounds=bounds)}",
        f"{c.b}: {group_text(c.values_b, bounds=bounds)}",
        _delta(d),
        test,
        p,
        verdict_text(d, look),
        mdd_text(d) if d.claims else "—",
    ]


def mdd_text(d: Decision) -> str:
    """The minimum detectable difference as the report prints it (``n/a`` where nothing could be tested)."""
    return number_text(d.mdd)


def _margin_words(d: Decision, look: Look | None) -> str:
    """The margin as the report states it: ``"0.02-nat"``, ``"5-point"``, ``"0.0488 (log ratio)"``."""
    m, asked = d.comparison.margin, look.asked if look is not None else None
    if asked is not None and asked.measure is Measure.AT_L:
        metric = METRICS[judged_metric(asked.task)]
        return f"{m * 100:g}-point" if metric.fraction else f"{m:g}-nat"
    return f"{m:g} (log ratio)" if asked is not None else f"{m:g}"


def verdict_text(d: Decision, look: Look | None = None) -> str:
    """A decision's verdict in words: the one rule's word, and

    - for an interaction: "depends on the scheme (...)" / "the same for both schemes (within the margin)";
    - for a difference shown at the family's level that is smaller than the margin "alike" uses:
      "X better, by less than the 0.02-nat margin" (when the equivalence test shows it too) or
      "..., by less than the margin as estimated" (the point estimate inside, the interval not);
    - for Press's threshold test: "learned fails (its ratio is above 1.5)" or "... does not fail ...".
    """
    word = d.word or Outcome.EXPLORATORY.value
    if look is not None and isinstance(look.asked, Interaction):
        if d.winner is not None:
            (first, contrast), second = d.comparison.a.split(": ", 1), d.comparison.b.split(": ", 1)[0]
            return f"depends on the scheme ({contrast} is {d.difference:+.3g} for {second} against {first})"
        return "the same for both schemes (within the margin)" if d.outcome is Outcome.ALIKE else word
    if d.comparison.name == VASWANI_BEYOND and d.claims:
        return (
            "differ by more than the margin"
            if beyond_margin(d)
            else "within the margin on the side the difference points to"
            if d.winner is not None
            else word
        )
    if d.comparison.b == THRESHOLD and d.winner is not None:  # Press's "fails": the ratio against 1.5
        return (
            f"{d.comparison.a} fails (its ratio is above {FAIL_RATIO})"
            if d.winner == THRESHOLD
            else f"{d.comparison.a} does not fail (its ratio is below {FAIL_RATIO})"
        )
    if d.winner is None:
        return word
    if d.p_equivalence_adjusted < ALPHA:
        return f"{word}, by less than the {_margin_words(d, look)} margin"
    if abs(d.difference) < d.comparison.margin:
        return f"{word}, by less than the {_margin_words(d, look)} margin as estimated (the interval reaches past it)"
    return word


def rule_note(data: LabData, decisions: LabDecisions) -> str:
    """How every verdict of the report was decided, with what this run used (seeds per group,
    training points, how many tests the family holds)."""
    seeds = sorted({len(trials) for trials in data.groups().values()})
    per_group = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]} to {seeds[-1]}"
    n = seeds[-1]
    interval = (
        "95 % t intervals of the mean"
        if n >= 3
        else "the two seeds' range (not a 95 % interval)"
        if n == 2
        else "single values (one seed: no interval)"
    )
    points = ", ".join(f"{p:.0%}".replace("%", " %") for p in decisions.points)
    return (
        "Each seed is one unit. Groups that ran on the same seeds (and so the same data) are compared with the "
        "seed-paired t test, others with Welch's; charlm by validation loss (the log of perplexity), the matched "
        "ratio as a difference of matched losses (its log). A verdict word is given only to the primary comparisons "
        f"the preset named before the run, at every training point evaluated ({points} of the steps), and to Q6's "
        f"paper checks: Holm over all {decisions.tests} tests at once holds the chance of any false 'better' or "
        "'alike' anywhere in this report at 5 %; 'cannot tell' gives the smallest difference the comparison could "
        "have detected with 80 % power. 'exploratory' rows show numbers and an unadjusted p only: no winner. "
        f"This run has {per_group} seeds per group; intervals are {interval}."
    )


def short_label(asked: Primary | Interaction) -> str:
    """How a summary line names one asked comparison: the scheme it is about, or both schemes.

    >>> from posembed.lab.presets import PRIMARY
    >>> [short_label(p) for p in PRIMARY["quick"][:4]]
    ['learned vs sinusoidal', 'learned', 'sinusoidal', 'learned vs sinusoidal (interaction)']
    """
    if isinstance(asked, Interaction):
        return f"{asked.first.a.scheme} vs {asked.second.a.scheme} (interaction)"
    return asked.a.scheme if asked.a.scheme == asked.b.scheme else f"{asked.a.scheme} vs {asked.b.scheme}"


#: the columns of a question's verdicts over training
TRAINING_HEADER = [
    "question",
    "comparison",
    "point",
    "Δ = B − A [95 % interval]",
    "p (Holm)",
    "could detect",
    "verdict",
]


def training_table(decisions: LabDecisions, question: str) -> Table:
    """``question`` x scheme x training point: Δ, interval, Holm p, MDD and verdict of every look."""
    rows = []
    for asked in (a for a in decisions.asked if a.question == question):
        for look, d in decisions.over_training(asked):
            rows.append(
                [
                    question,
                    short_label(asked),
                    look.where,
                    _delta(d),
                    f"{_p(d.p)} ({_p(d.p_adjusted)})",
                    mdd_text(d),
                    verdict_text(d, look),
                ]
            )
    return list(TRAINING_HEADER), rows


def changes(decisions: LabDecisions, question: str) -> list[str]:
    """A sentence for each asked comparison of ``question`` whose verdict changes between
    training points (a finding: the answer depends on how far the model has learned)."""
    found = []
    for asked in (a for a in decisions.asked if a.question == question):
        looks = decisions.over_training(asked)
        if len({verdict_text(d, look) for look, d in looks}) > 1:
            path = "; ".join(f"{verdict_text(d, look)} at {look.where}" for look, d in looks)
            found.append(f"The verdict of {question} ({short_label(asked)}) changes as the model trains: {path}.")
    return found
