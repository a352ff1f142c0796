"""The lab report's family of tested comparisons, decided once with :func:`posembed.stats.verdict.decide`.

The family holds the experiment's primary comparisons (:data:`posembed.lab.presets.PRIMARY`,
named before the run) at *every training point* the trials were evaluated at (each trial's
``during`` points and the end: :meth:`~posembed.lab.report.tables.LabData.points`), and, at the
end of training, the paper checks of Q6 that the store can answer (Press et al.: learned's and
sinusoidal's matched 8x/1x perplexity ratio against the 1.5 threshold and ALiBi's against each
scheme that paper compared; Vaswani et al.: learned and sinusoidal differ by more than the
margin; Kazemnejad et al.: NoPE and T5 bias against every other scheme beyond L on copy and
reverse). Holm (with the logical constraint that a comparison's two nulls cannot both hold) runs
over all of those looks at once: looks at one question at several points are correlated, and
Holm holds under any dependence, so the chance of any false verdict word in one report, at any
point, is at most 5 % when nothing differs (simulated: :mod:`posembed.lab.report.simulate`).
Everything else the report shows is an exploratory comparison: numbers and an unadjusted p,
never a winner word.

Values are per seed. Two groups that ran on the same seeds (the lab seeds the data from the
trial's seed, so they saw the same batches) are compared with the seed-paired t; otherwise
Welch's t. Validation loss is already the log of perplexity; the matched ratio is a difference
of matched losses (the log of the matched perplexity ratio); the unmatched ratio (perplexity over
all positions, different text at each length) is tested on the log scale, exploratory only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from posembed.lab.config import BASE_BESIDE
from posembed.lab.presets import RATIO_MARGIN, Interaction, Measure, Primary, primary_comparisons
from posembed.lab.report.tables import FINAL, LabData, metric_lengths, point_label, train_length
from posembed.lab.sweep.store import TrialRecord
from posembed.lab.task_registry import METRICS, task_entry
from posembed.lab.verdicts import FAIL_RATIO, KAZEMNEJAD_FAVOURED, PRESS_SCHEMES
from posembed.stats.verdict import ALPHA, Comparison, Decision, decide

__all__ = [
    "LabDecisions",
    "Look",
    "lab_decisions",
    "seed_values",
    "judged_metric",
    "group_comparison",
    "group_labels",
    "ratio_values",
    "matched_ratio_values",
    "beyond_values",
    "THRESHOLD",
    "MATCHED",
    "asked_comparison",
    "VASWANI_BEYOND",
    "beyond_margin",
]

#: the name of the constant arm of a threshold test (Press's "fails": matched ratio >= 1.5)
THRESHOLD = f"threshold {FAIL_RATIO}"
#: the metric of the matched-text ratio (the loss on the same characters at every length)
MATCHED = "matched_loss"
#: the name of Vaswani et al.'s "disagree" test: learned and sinusoidal differ by more than the margin
VASWANI_BEYOND = "Vaswani: learned and sinusoidal differ by more than the margin"


def judged_metric(task: str) -> str:
    """The metric compared at the training length: the task's main one (charlm: validation loss, in nats)."""
    return task_entry(task).metric


def seed_values(trials: Sequence[TrialRecord], metric: str, length: int) -> dict[int, float]:
    """``{seed: value}`` of ``metric`` at ``length`` (seeds without a value left out)."""
    found = {}
    for trial in trials:
        value = trial.metric(metric).get(length)
        if value is not None:
            found[trial.config.seed] = float(value)
    return found


def ratio_values(trials: Sequence[TrialRecord]) -> dict[int, float]:
    """``{seed: perplexity at the longest context / at L}`` over all positions of each window (the
    *unmatched* ratio: a longer context scores more, different text; ``inf`` where the longest is
    not measurable). Exploratory only: :func:`matched_ratio_values` is the tested one."""
    if not trials:
        return {}
    longest = max(metric_lengths(trials, "perplexity"), default=None)
    found = {}
    for trial in trials:
        ppl = trial.metric("perplexity")
        at_l = ppl.get(trial.config.context)
        if at_l:
            at_longest = ppl.get(longest) if longest is not None else None
            found[trial.config.seed] = math.inf if at_longest is None else at_longest / at_l
    return found


def matched_ratio_values(trials: Sequence[TrialRecord]) -> dict[int, float]:
    """``{seed: matched_loss at the longest context - at L}``: the log of the matched perplexity
    ratio, on the same characters at every length (0 for a model that ignores distant context).
    ``inf`` where the longest is not measurable; empty when the store has no matched loss."""
    if not trials:
        return {}
    longest = max(metric_lengths(trials, MATCHED), default=None)
    found = {}
    for trial in trials:
        loss = trial.metric(MATCHED)
        at_l = loss.get(trial.config.context)
        if at_l is not None and longest is not None:
            at_longest = loss.get(longest)
            found[trial.config.seed] = math.inf if at_longest is None else at_longest - at_l
    return found


def beyond_values(trials: Sequence[TrialRecord], metric: str) -> dict[int, float]:
    """``{seed: mean of metric over the lengths beyond L}``; a length not measurable counts as 0
    (a model that cannot read the input gets nothing right)."""
    if not trials:
        return {}
    context = train_length(trials)
    lengths = [n for n in metric_lengths(trials, metric) if n > context]
    if not lengths:
        return {}
    return {t.config.seed: sum(t.metric(metric).get(n) or 0.0 for n in lengths) / len(lengths) for t in trials}


def _paired(a: dict[int, float], b: dict[int, float]) -> tuple[tuple[float, ...], tuple[float, ...], str]:
    """Aligned by seed and ``paired`` when both have the same seeds (two or more), else ``welch``."""
    if set(a) == set(b) and len(a) >= 2:
        seeds = sorted(a)
        return tuple(a[s] for s in seeds), tuple(b[s] for s in seeds), "paired"
    return tuple(a.values()), tuple(b.values()), "welch"


def _measured(
    data: LabData, task: str, group: tuple[str, str], measure: str
) -> tuple[dict[int, float], bool, float, bool]:
    """``({seed: value}, higher_is_better, margin, log_scale)`` of one group on ``measure``
    (``"at L"``, ``"matched ratio"``, ``"ratio"``: unmatched, or ``"beyond"``)."""
    trials = data.groups(task).get((task, *group), [])
    if measure == Measure.MATCHED_RATIO.value:
        return matched_ratio_values(trials), False, RATIO_MARGIN, False
    if measure == "ratio":
        return ratio_values(trials), False, RATIO_MARGIN, True
    metric = judged_metric(task)
    entry = METRICS[metric]
    if measure == "beyond":
        return beyond_values(trials, metric), entry.higher_is_better, entry.margin, False
    return (
        (seed_values(trials, metric, train_length(trials)) if trials else {}),
        entry.higher_is_better,
        entry.margin,
        False,
    )


def group_comparison(
    data: LabData,
    name: str,
    task: str,
    a: tuple[str, str],
    b: tuple[str, str],
    names: tuple[str, str],
    measure: str = "at L",
    primary: bool = True,
    topic: str = "",
) -> Comparison | None:
    """``b`` against ``a`` (``(scheme, variant)`` groups of ``task``) about ``topic``; None when a group is
    missing or a ratio is not measurable on some seed."""
    values_a, higher, margin, log = _measured(data, task, a, measure)
    values_b = _measured(data, task, b, measure)[0]
    if not values_a or not values_b or not all(math.isfinite(v) for v in (*values_a.values(), *values_b.values())):
        return None
    xs, ys, test = _paired(values_a, values_b)
    return Comparison(
        name, names[0], names[1], xs, ys, higher, margin, test=test, log_scale=log, primary=primary, topic=topic
    )


def _what(task: str, measure: Measure) -> str:
    return "matched 8x/1x ratio (log)" if measure is Measure.MATCHED_RATIO else f"{judged_metric(task)} at L"


def _differences(data: LabData, p: Primary) -> dict[int, float]:
    """``{seed: b - a}`` of one contrast, on the seeds both groups have."""
    a = _measured(data, p.task, p.a.key, p.measure.value)[0]
    b = _measured(data, p.task, p.b.key, p.measure.value)[0]
    return {s: b[s] - a[s] for s in sorted(set(a) & set(b)) if math.isfinite(a[s]) and math.isfinite(b[s])}


def contrast_label(p: Primary) -> str:
    """``"learned: concat - add"``: one contrast of an interaction, named for its scheme."""
    a, b = group_labels(p.a.key, p.b.key)
    return f"{p.a.scheme}: {b.removeprefix(p.a.scheme + ' ')} − {a.removeprefix(p.a.scheme + ' ')}"


def asked_comparison(data: LabData, asked: Primary | Interaction, where: str = "") -> Comparison | None:
    """The comparison one asked question makes on ``data`` (None when the store lacks its groups);
    ``where`` names the training point in its name (``""``: the end)."""
    at = f" at {where}" if where else ""
    if isinstance(asked, Primary):
        names = group_labels(asked.a.key, asked.b.key)
        return group_comparison(
            data,
            f"{asked.question} {asked.task}{at}: {names[1]} vs {names[0]}, {_what(asked.task, asked.measure)}",
            asked.task,
            asked.a.key,
            asked.b.key,
            names,
            asked.measure.value,
            topic=asked.question,
        )
    first, second = _differences(data, asked.first), _differences(data, asked.second)
    seeds = sorted(set(first) & set(second))
    if len(seeds) < 2:
        return None
    names = contrast_label(asked.first), contrast_label(asked.second)
    metric = judged_metric(asked.task)
    margin = RATIO_MARGIN if asked.measure is Measure.MATCHED_RATIO else METRICS[metric].margin
    return Comparison(
        f"{asked.question} {asked.task}{at}: interaction, {names[1]} vs {names[0]}, {_what(asked.task, asked.measure)}",
        names[0],
        names[1],
        tuple(first[s] for s in seeds),
        tuple(second[s] for s in seeds),
        METRICS[metric].higher_is_better,
        margin,
        test="paired",
        topic=asked.question,
    )


def group_labels(a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
    """How the report names two ``(scheme, variant)`` groups: the scheme, and the variant unless it
    is ``base``; beside another variant of the same scheme, the base says what it is instead
    (``("sinusoidal once", "sinusoidal every_layer")``), so the verdict word names the winner.

    >>> group_labels(("learned", "base"), ("sinusoidal", "base"))
    ('learned', 'sinusoidal')
    >>> group_labels(("sinusoidal", "base"), ("sinusoidal", "every_layer"))
    ('sinusoidal once', 'sinusoidal every_layer')
    """

    def label(group: tuple[str, str], other: tuple[str, str]) -> str:
        scheme, variant = group
        if variant != "base":
            return f"{scheme} {variant}"
        return f"{scheme} {BASE_BESIDE[other[1]]}" if other[0] == scheme and other[1] in BASE_BESIDE else scheme

    return label(a, b), label(b, a)


def _press(data: LabData) -> list[Comparison]:
    """Press et al.'s checks on the matched ratio: learned and sinusoidal against the threshold,
    ALiBi against the rest."""
    groups = data.groups("charlm")
    found = []
    for scheme in ("learned", "sinusoidal"):
        ratios = matched_ratio_values(groups.get(("charlm", scheme, "base"), []))
        if len(ratios) >= 2 and all(math.isfinite(r) for r in ratios.values()):
            values = tuple(ratios[s] for s in sorted(ratios))
            found.append(
                Comparison(
                    f"Press: {scheme} fails beyond L (matched 8x/1x ratio >= {FAIL_RATIO})",
                    scheme,
                    THRESHOLD,
                    values,
                    (math.log(FAIL_RATIO),) * len(values),
                    False,
                    RATIO_MARGIN,
                    test="paired",
                    topic="Press",
                )
            )
    for scheme in PRESS_SCHEMES:
        if scheme != "alibi":
            c = group_comparison(
                data,
                f"Press: alibi flatter than {scheme} (matched 8x/1x ratio)",
                "charlm",
                ("alibi", "base"),
                (scheme, "base"),
                ("alibi", scheme),
                Measure.MATCHED_RATIO.value,
                topic="Press",
            )
            found.append(c) if c is not None else None
    return found


def _vaswani(data: LabData) -> list[Comparison]:
    """Vaswani et al.'s "disagree" test: learned and sinusoidal (base, charlm) differ by more than
    the margin. The sinusoidal arm is shifted by the margin towards the learned one, in the
    direction the difference points, so the one rule's difference test (two-sided) asks whether
    the difference lies beyond the margin; under any true difference within the margin it names
    a winner at most at the family's rate."""
    c = group_comparison(
        data,
        VASWANI_BEYOND,
        "charlm",
        ("learned", "base"),
        ("sinusoidal", "base"),
        ("learned", "sinusoidal"),
        topic="Vaswani",
    )
    if c is None or c.test != "paired":
        return []
    shift = math.copysign(c.margin, sum(c.values_b) - sum(c.values_a))
    return [
        Comparison(
            VASWANI_BEYOND,
            "learned",
            f"sinusoidal {-shift:+g}",
            c.values_a,
            tuple(v - shift for v in c.values_b),
            c.higher_is_better,
            c.margin,
            test="paired",
            offset=shift,
            topic="Vaswani",
        )
    ]


def beyond_margin(d: Decision) -> bool:
    """Whether the Vaswani test (:data:`VASWANI_BEYOND`) shows the difference *beyond* the margin:
    a "better" on the side the shift points to. (A "better" on the other side says the difference
    is within the margin on that side: true where nothing differs, and no disagreement.)"""
    return d.winner is not None and (d.difference > 0) == (d.comparison.offset > 0)


def _kazemnejad(data: LabData) -> list[Comparison]:
    """Kazemnejad et al.'s checks: each favoured scheme against every other one, exact match beyond L."""
    found = []
    for task in ("copy", "reverse"):
        schemes = [s for (_, s, v) in data.groups(task) if v == "base"]
        for favoured in (s for s in KAZEMNEJAD_FAVOURED if s in schemes):
            for other in (s for s in schemes if s not in KAZEMNEJAD_FAVOURED):
                c = group_comparison(
                    data,
                    f"Kazemnejad {task}: {favoured} vs {other} beyond L",
                    task,
                    (other, "base"),
                    (favoured, "base"),
                    (other, favoured),
                    "beyond",
                    topic=f"Kazemnejad {task}",
                )
                found.append(c) if c is not None else None
    return found


@dataclass(frozen=True)
class Look:
    """Where one tested comparison looks: the question asked (None: a paper check) and the
    training point (a fraction of the steps; :data:`FINAL` at the end) and its step."""

    asked: Primary | Interaction | None
    point: float = FINAL
    step: int | None = None

    @property
    def where(self) -> str:
        return point_label(self.point, self.step)


@dataclass(frozen=True)
class LabDecisions:
    """Every decision of one report, by comparison name; the primaries asked of the store, those
    it lacks at the end, the training points looked at and where each comparison looks."""

    by_name: dict[str, Decision]
    asked: tuple[Primary | Interaction, ...]
    missing: tuple[Primary | Interaction, ...]
    points: tuple[float, ...] = (FINAL,)
    looks: dict[str, Look] | None = None

    def look(self, decision: Decision) -> Look:
        return (self.looks or {}).get(decision.comparison.name, Look(None))

    def primaries(self, question: str, point: float = FINAL) -> list[Decision]:
        """The primary (tested) comparisons of ``question`` ("Q1" ...) at one training point."""
        return [
            d
            for d in self.family
            if (look := self.look(d)).asked is not None and look.asked.question == question and look.point == point
        ]

    def over_training(self, asked: Primary | Interaction) -> list[tuple[Look, Decision]]:
        """One asked comparison at every training point it was tested at, earliest first."""
        found = [(self.look(d), d) for d in self.family if self.look(d).asked == asked]
        return sorted(found, key=lambda item: item[0].point)

    def about(self, topic: str) -> list[Decision]:
        """Every decision about ``topic`` (a question, ``"Q1"``, or a check, ``"Press"``), tested or exploratory."""
        return [d for d in self.by_name.values() if d.comparison.topic == topic]

    @property
    def family(self) -> list[Decision]:
        return [d for d in self.by_name.values() if d.comparison.primary]

    @property
    def tests(self) -> int:
        """How many tests Holm ran over (a difference and an equivalence test per family member)."""
        return 2 * sum(1 for d in self.family if d.note == "")

    def margin_note(self) -> str:
        return (
            f"'alike' only where an equivalence test (TOST) puts the whole difference within the margin: "
            f"{METRICS['val_loss'].margin} nats of validation loss, {METRICS['accuracy'].margin:.0%} points of "
            f"accuracy or exact match, {math.exp(RATIO_MARGIN) - 1:.0%} of a perplexity ratio"
        )


def family(
    data: LabData,
) -> tuple[list[Comparison], dict[str, Look], tuple[Primary | Interaction, ...], tuple[Primary | Interaction, ...]]:
    """The report's tested comparisons: its primaries at every training point (those the store
    holds), then the paper checks at the end; where each looks; what was asked and is missing."""
    asked = primary_comparisons(data.name)
    comparisons, looks, missing = [], {}, []
    for point in data.points():
        at = data.at(point)
        step = at.step_at(point) if point != FINAL else None
        for p in asked:
            c = asked_comparison(at, p, "" if point == FINAL else point_label(point, step))
            if c is not None:
                comparisons.append(c)
                looks[c.name] = Look(p, point, step)
            elif point == FINAL:
                missing.append(p)
    checks = _press(data) + _vaswani(data) + _kazemnejad(data)
    return comparisons + checks, looks, asked, tuple(missing)


def lab_decisions(data: LabData, exploratory: Sequence[Comparison] = (), alpha: float = ALPHA) -> LabDecisions:
    """Decide the family (and the ``exploratory`` comparisons, which get numbers only) in one call."""
    tested, looks, asked, missing = family(data)
    extra = [c for c in exploratory if c.name not in {t.name for t in tested}]
    decisions = decide(tested + [Comparison(**{**c.__dict__, "primary": False}) for c in extra], alpha)
    return LabDecisions({d.comparison.name: d for d in decisions}, asked, missing, data.points(), looks)
