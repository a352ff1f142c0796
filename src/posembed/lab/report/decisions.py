"""The lab report's family of tested comparisons, decided once with :func:`posembed.stats.decide`.

The family holds the experiment's primary comparisons, named by its preset before the run
(:data:`posembed.lab.presets.PRIMARY`), and the paper checks of Q6 that the store can answer
(Press et al.: ALiBi's 8x/1x perplexity ratio against each scheme that paper compared, learned's
and sinusoidal's ratio against the 1.5 threshold; Kazemnejad et al.: NoPE and T5 bias against
every other scheme beyond L on copy and reverse). Holm (with the logical constraint that a
comparison's two nulls cannot both hold) runs over all of them, so the chance of any false
verdict word in one report is at most 5 % when nothing differs. Everything else the report
shows is an exploratory comparison: numbers and an unadjusted p, never a winner word.

Values are per seed. Two groups that ran on the same seeds (the lab seeds the data from the
trial's seed, so they saw the same batches) are compared with the seed-paired t; otherwise
Welch's t. Validation loss is already the log of perplexity; ratios are tested on the log scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from posembed.lab.config import BASE_BESIDE
from posembed.lab.presets import RATIO_MARGIN, Primary, primary_comparisons
from posembed.lab.report.tables import LabData, metric_lengths, train_length
from posembed.lab.sweep.store import TrialRecord
from posembed.lab.task_registry import METRICS, task_entry
from posembed.lab.verdicts import FAIL_RATIO, KAZEMNEJAD_FAVOURED, PRESS_SCHEMES
from posembed.stats import Comparison, Decision, decide

__all__ = ["LabDecisions", "lab_decisions", "seed_values", "judged_metric", "group_comparison", "group_labels", "ratio_values",
           "beyond_values", "THRESHOLD"]

#: the name of the constant arm of a threshold test (Press's "fails": ratio >= 1.5)
THRESHOLD = f"threshold {FAIL_RATIO}"


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
    """``{seed: perplexity at the longest context / at L}`` (``inf`` where the longest is not measurable)."""
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


def group_comparison(data: LabData, name: str, task: str, a: tuple[str, str], b: tuple[str, str],
                     names: tuple[str, str], measure: str = "at L", primary: bool = True) -> Comparison | None:
    """``b`` against ``a`` (``(scheme, variant)`` groups of ``task``); None when a group is missing
    or a ratio is not measurable on some seed."""
    groups = data.groups(task)
    trials_a, trials_b = groups.get((task, *a)), groups.get((task, *b))
    if not trials_a or not trials_b:
        return None
    if measure == "ratio":
        values_a, values_b = ratio_values(trials_a), ratio_values(trials_b)
        if not all(math.isfinite(v) for v in (*values_a.values(), *values_b.values())):
            return None
        higher, margin, log = False, RATIO_MARGIN, True
    elif measure == "beyond":
        metric = judged_metric(task)
        values_a, values_b = beyond_values(trials_a, metric), beyond_values(trials_b, metric)
        higher, margin, log = METRICS[metric].higher_is_better, METRICS[metric].margin, False
    else:
        metric = judged_metric(task)
        length = train_length(trials_a)
        values_a, values_b = seed_values(trials_a, metric, length), seed_values(trials_b, metric, length)
        higher, margin, log = METRICS[metric].higher_is_better, METRICS[metric].margin, False
    if not values_a or not values_b:
        return None
    xs, ys, test = _paired(values_a, values_b)
    return Comparison(name, names[0], names[1], xs, ys, higher, margin, test=test, log_scale=log, primary=primary)


def _primary(data: LabData, p: Primary) -> Comparison | None:
    what = "8x/1x perplexity ratio" if p.measure == "ratio" else f"{judged_metric(p.task)} at L"
    names = group_labels(p.a, p.b)
    return group_comparison(data, f"{p.question} {p.task}: {names[1]} vs {names[0]}, {what}", p.task, p.a, p.b,
                            names, p.measure)


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
    """Press et al.'s checks: learned and sinusoidal against the threshold, ALiBi against the rest."""
    groups = data.groups("charlm")
    found = []
    for scheme in ("learned", "sinusoidal"):
        ratios = ratio_values(groups.get(("charlm", scheme, "base"), []))
        if len(ratios) >= 2 and all(math.isfinite(r) for r in ratios.values()):
            values = tuple(ratios[s] for s in sorted(ratios))
            found.append(Comparison(f"Press: {scheme} fails beyond L (8x/1x ratio >= {FAIL_RATIO})", scheme, THRESHOLD,
                                    values, (FAIL_RATIO,) * len(values), False, RATIO_MARGIN, test="paired",
                                    log_scale=True))
    for scheme in PRESS_SCHEMES:
        if scheme != "alibi":
            c = group_comparison(data, f"Press: alibi flatter than {scheme} (8x/1x ratio)", "charlm",
                                 ("alibi", "base"), (scheme, "base"), ("alibi", scheme), "ratio")
            found.append(c) if c is not None else None
    return found


def _kazemnejad(data: LabData) -> list[Comparison]:
    """Kazemnejad et al.'s checks: each favoured scheme against every other one, exact match beyond L."""
    found = []
    for task in ("copy", "reverse"):
        schemes = [s for (_, s, v) in data.groups(task) if v == "base"]
        for favoured in (s for s in KAZEMNEJAD_FAVOURED if s in schemes):
            for other in (s for s in schemes if s not in KAZEMNEJAD_FAVOURED):
                c = group_comparison(data, f"Kazemnejad {task}: {favoured} vs {other} beyond L", task,
                                     (other, "base"), (favoured, "base"), (other, favoured), "beyond")
                found.append(c) if c is not None else None
    return found


@dataclass(frozen=True)
class LabDecisions:
    """Every decision of one report, by comparison name, and the primaries asked of the store."""

    by_name: dict[str, Decision]
    asked: tuple[Primary, ...]
    missing: tuple[Primary, ...]

    def primaries(self, question: str) -> list[Decision]:
        """The primary (tested) comparisons of ``question`` ("Q1" ...)."""
        return [d for d in self.by_name.values() if d.comparison.primary and d.comparison.name.startswith(f"{question} ")]

    def starting(self, prefix: str) -> list[Decision]:
        return [d for name, d in self.by_name.items() if name.startswith(prefix)]

    @property
    def family(self) -> list[Decision]:
        return [d for d in self.by_name.values() if d.comparison.primary]

    def margin_note(self) -> str:
        return (f"'alike' only where an equivalence test (TOST) puts the whole difference within the margin: "
                f"{METRICS['val_loss'].margin} nats of validation loss, {METRICS['accuracy'].margin:.0%} points of "
                f"accuracy or exact match, {math.exp(RATIO_MARGIN) - 1:.0%} of a perplexity ratio")


def family(data: LabData) -> tuple[list[Comparison], tuple[Primary, ...], tuple[Primary, ...]]:
    """The report's tested comparisons: its primaries (those the store holds), then the paper checks."""
    asked = primary_comparisons(data.name)
    comparisons, missing = [], []
    for p in asked:
        c = _primary(data, p)
        (comparisons.append(c) if c is not None else missing.append(p))
    return comparisons + _press(data) + _kazemnejad(data), asked, tuple(missing)


def lab_decisions(data: LabData, exploratory: Sequence[Comparison] = ()) -> LabDecisions:
    """Decide the family (and the ``exploratory`` comparisons, which get numbers only) in one call."""
    tested, asked, missing = family(data)
    extra = [c for c in exploratory if c.name not in {t.name for t in tested}]
    decisions = decide(tested + [Comparison(**{**c.__dict__, "primary": False}) for c in extra])
    return LabDecisions({d.comparison.name: d for d in decisions}, asked, missing)
