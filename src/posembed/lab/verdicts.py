"""The lab's verdict rules, as pure functions of the numbers they judge.

The one rule every report decides by is :mod:`posembed.stats` (re-exported here: ``Comparison``,
``Decision``, ``decide``, ``describe``, ...): the seed as the unit, Holm over a report's family at
5 %, "alike" only from an equivalence test. The lab report (:mod:`posembed.lab.report.decisions`)
and docs/results.md's lab section (``tools/lab_page.py``, checked by
``tests/test_readme_verdicts.py``) use it. The names below are the papers' thresholds and how
partial verdicts combine; the point rules and the interval rules (:class:`Interval`,
:func:`interval_verdict`, ...) are the earlier ones, kept while the context study's report still
uses them.

- :func:`pair_verdict`: two groups are ``alike`` when their means differ by no more than the
  noise, ``max(NOISE_FLOOR, 2 * sqrt(std_a^2 + std_b^2))`` (:func:`noise`; the floor alone with
  one seed), else the better one wins.
- :func:`vaswani`: Vaswani et al. 2017, Table 3 (E), learned ~ sinusoidal at the training
  length: ``agree`` per task where the two are alike, ``disagree`` where not.
- :func:`press`: Press et al. 2022 (ALiBi): learned and sinusoidal *fail* beyond L (perplexity
  at the longest context >= ``FAIL_RATIO`` x at L, or not measurable), and ALiBi degrades least
  among the schemes that paper compared (:data:`PRESS_SCHEMES`; smallest ratio within
  ``FLAT_TOLERANCE``). Schemes published later (Kerple, FIRE, ...) are not part of that claim.
- :func:`kazemnejad`: Kazemnejad et al. 2023: NoPE or T5 bias generalise best on copy and
  reverse (best exact match beyond L within the noise floor of every other scheme's best),
  ``cannot tell`` for a task where every scheme ties.
- :func:`nanogpt`: the calibration loss within ``tolerance`` of the published one.

Partial verdicts combine with :func:`combine`: all ``agree`` -> ``agree``, all ``disagree`` ->
``disagree``, a mix -> ``partly``, none -> ``cannot tell``.

Those rules judge means. The report judges *intervals* (:func:`interval_verdict`,
:func:`press_intervals`, :func:`kazemnejad_intervals`, :func:`vaswani_intervals`): every group's
mean gets a 95 % percentile **bootstrap over seeds** (:func:`bootstrap_interval`: every one of the
``n^n`` resamples of the seed values for ``n <= 5``, so it is exact and deterministic), and a
comparison whose intervals overlap is ``cannot tell``, as is one resting on a single seed. With
2 or 3 seeds the 95 % bootstrap interval of the mean is the range of the seeds (no resample
puts less than 1/27 of its mass on the extremes). Parts combine strictly (:func:`combine_strict`):
one part that cannot tell makes the paper's verdict ``cannot tell``.

>>> press({"learned": 15.9 / 10.6, "sinusoidal": 15.2 / 10.7, "alibi": 9.5 / 10.3})
'partly'
>>> vaswani([True, True, True, False]), combine([])
('partly', 'cannot tell')
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from posembed.stats import (Comparison, Decision, Estimate, decide, describe, distinguishing, holm, mcnemar,
                            min_detectable_difference, paired_t, tost, welch)

__all__ = [
    "AGREE", "DISAGREE", "PARTLY", "CANNOT_TELL", "NOISE_FLOOR", "FAIL_RATIO", "FLAT_TOLERANCE", "PRESS_SCHEMES",
    "KAZEMNEJAD_FAVOURED", "combine", "noise", "pair_verdict", "vaswani", "perplexity_ratio", "press_fails",
    "press_flattest", "press", "kazemnejad_task", "kazemnejad", "nanogpt", "CONFIDENCE", "Interval",
    "bootstrap_interval", "interval_verdict", "combine_strict", "vaswani_intervals", "press_intervals",
    "kazemnejad_intervals", "ONE_SEED",
    # the one verdict rule (posembed.stats), re-exported
    "Comparison", "Decision", "Estimate", "decide", "describe", "distinguishing", "holm", "mcnemar",
    "min_detectable_difference", "paired_t", "tost", "welch",
]

AGREE, DISAGREE, PARTLY, CANNOT_TELL = "agree", "disagree", "partly", "cannot tell"

#: smallest difference of means called a difference (accuracy/exact match: 2 points; loss: 0.02 nats)
NOISE_FLOOR = 0.02
#: perplexity at the longest context / at L from which a scheme "fails" beyond L
FAIL_RATIO = 1.5
#: relative slack allowed when calling a scheme the flattest
FLAT_TOLERANCE = 0.02
#: the schemes whose perplexity ratios Press et al. 2022 compared (learned: the lab's addition)
PRESS_SCHEMES = ("learned", "sinusoidal", "rope", "t5_bias", "alibi")
#: the schemes Kazemnejad et al. 2023 found to generalise best
KAZEMNEJAD_FAVOURED = ("nope", "t5_bias")


def combine(verdicts: Iterable[str]) -> str:
    """One verdict from several partial ones (``cannot tell`` and others are ignored).

    >>> combine(["agree", "agree"]), combine(["agree", "disagree"]), combine(["cannot tell"])
    ('agree', 'partly', 'cannot tell')
    """
    known = [v for v in verdicts if v in (AGREE, DISAGREE)]
    if not known:
        return CANNOT_TELL
    return known[0] if all(v == known[0] for v in known) else PARTLY


def noise(std_a: float, std_b: float, n_a: int, n_b: int) -> float:
    """``max(NOISE_FLOOR, 2 * sqrt(std_a^2 + std_b^2))``; the floor alone when a group has one seed.

    >>> round(noise(0.01, 0.0141, 2, 2), 4), noise(math.nan, 0.5, 1, 3)
    (0.0346, 0.02)
    """
    if n_a >= 2 and n_b >= 2:
        return max(NOISE_FLOOR, 2.0 * math.hypot(std_a, std_b))
    return NOISE_FLOOR


def pair_verdict(delta: float, noise_level: float, b_wins_when_higher: bool, name_a: str, name_b: str) -> str:
    """``alike``, ``<name> better`` or ``n/a`` for ``delta = mean(b) - mean(a)``.

    >>> pair_verdict(0.1, 0.04, True, "add", "concat"), pair_verdict(0.1, 0.04, False, "add", "concat")
    ('concat better', 'add better')
    >>> pair_verdict(0.03, 0.04, True, "a", "b"), pair_verdict(math.nan, 0.02, True, "a", "b")
    ('alike', 'n/a')
    """
    if math.isnan(delta):
        return "n/a"
    if abs(delta) <= noise_level:
        return "alike"
    return f"{name_b if (delta > 0) == b_wins_when_higher else name_a} better"


def vaswani(alike_per_task: Iterable[bool]) -> str:
    """Learned ~ sinusoidal: ``agree`` for each task where they are alike, combined."""
    return combine(AGREE if alike else DISAGREE for alike in alike_per_task)


def perplexity_ratio(at_train: float | None, at_longest: float | None) -> float:
    """Perplexity at the longest context over perplexity at L (``inf`` when not measurable)."""
    if at_longest is None or not at_train:
        return math.inf
    return at_longest / at_train


def press_fails(ratio: float) -> bool:
    """Whether a scheme with this perplexity ratio fails beyond L.

    >>> press_fails(1.42), press_fails(1.5), press_fails(math.inf)
    (False, True, True)
    """
    return ratio >= FAIL_RATIO


def press_flattest(ratios: Mapping[str, float]) -> bool:
    """Whether ALiBi's ratio is the smallest (within ``FLAT_TOLERANCE``) among :data:`PRESS_SCHEMES`."""
    compared = [r for scheme, r in ratios.items() if scheme in PRESS_SCHEMES]
    return ratios["alibi"] <= min(compared) * (1 + FLAT_TOLERANCE)


def press(ratios: Mapping[str, float]) -> str:
    """Press et al.'s verdict from the charlm perplexity ratios ``{scheme: ppl@longest / ppl@L}``.

    ``cannot tell`` without ALiBi, or without learned and sinusoidal.
    """
    if "alibi" not in ratios or not {"learned", "sinusoidal"} & set(ratios):
        return CANNOT_TELL
    parts = [AGREE if press_fails(ratios[s]) else DISAGREE for s in ("learned", "sinusoidal") if s in ratios]
    parts.append(AGREE if press_flattest(ratios) else DISAGREE)
    return combine(parts)


def kazemnejad_task(beyond: Mapping[str, float | None]) -> str:
    """One task's verdict from each scheme's mean exact match beyond L (``None``: not measurable).

    >>> kazemnejad_task({"nope": 0.0, "rope": 0.0, "learned": 0.0})
    'cannot tell'
    >>> kazemnejad_task({"nope": 0.31, "rope": 0.32, "learned": 0.0}), kazemnejad_task({"nope": 0.1, "rope": 0.5})
    ('agree', 'disagree')
    """
    values = {s: (-math.inf if v is None else v) for s, v in beyond.items()}
    favoured = [values[s] for s in KAZEMNEJAD_FAVOURED if s in values]
    others = [v for s, v in values.items() if s not in KAZEMNEJAD_FAVOURED]
    if not favoured or not others or max(values.values()) - min(values.values()) <= NOISE_FLOOR:
        return CANNOT_TELL
    return AGREE if max(favoured) >= max(others) - NOISE_FLOOR else DISAGREE


def kazemnejad(per_task: Mapping[str, Mapping[str, float | None]]) -> str:
    """Kazemnejad et al.'s verdict over copy and reverse (``{task: {scheme: exact match beyond L}}``)."""
    return combine(kazemnejad_task(per_task[task]) for task in ("copy", "reverse") if task in per_task)


def nanogpt(loss: float, target: float, tolerance: float) -> str:
    """``within`` or ``OUTSIDE`` the published validation loss ``target +/- tolerance``.

    >>> nanogpt(1.895, 1.886, 0.05), nanogpt(2.0, 1.886, 0.05)
    ('within', 'OUTSIDE')
    """
    return "within" if abs(loss - target) <= tolerance else "OUTSIDE"


#: the confidence of every interval the report states
CONFIDENCE = 0.95
#: the verdict of a comparison that rests on one seed
ONE_SEED = "cannot tell (1 seed)"
#: largest seed count whose bootstrap enumerates every resample (5^5 = 3125)
_EXACT_UP_TO = 5
#: resamples drawn (with a fixed seed) beyond it
_RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` seeds and its 95 % bootstrap interval ``[low, high]`` (NaN: no value)."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Interval":
        """The mean of ``values`` and :func:`bootstrap_interval` of it."""
        if not values:
            return cls(math.nan, math.nan, math.nan, 0)
        low, high = bootstrap_interval(values)
        return cls(statistics.fmean(values), low, high, len(values))

    def overlaps(self, other: "Interval") -> bool:
        return self.low <= other.high and other.low <= self.high

    def text(self, digits: int = 4) -> str:
        """``mean [low, high]``; the bare mean for one seed; ``n/a`` for none.

        >>> Interval.of([0.5, 0.7]).text(), Interval.of([0.5]).text(), Interval.of([]).text()
        ('0.6 [0.5, 0.7]', '0.5 (1 seed)', 'n/a')
        """
        if not self.n:
            return "n/a"
        if self.n == 1:
            return f"{self.mean:.{digits}g} (1 seed)"
        return f"{self.mean:.{digits}g} [{self.low:.{digits}g}, {self.high:.{digits}g}]"


def _quantile(sorted_means: Sequence[float], q: float) -> float:
    """The smallest resampled mean with at least ``q`` of the mass at or below it."""
    index = max(0, math.ceil(q * len(sorted_means) - 1e-9) - 1)
    return sorted_means[index]


def bootstrap_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampling the seeds).

    Exact for up to five values (every ``n^n`` resample, equally weighted); beyond, 10 000
    resamples drawn with a fixed seed, so the same values always give the same interval.

    >>> bootstrap_interval([0.2, 0.4]), bootstrap_interval([1.0, 2.0, 3.0])
    ((0.2, 0.4), (1.0, 3.0))
    >>> [round(x, 4) for x in bootstrap_interval([0.0, 0.0, 0.0, 1.0, 1.0])]
    [0.0, 0.8]
    """
    if not values:
        raise ValueError("bootstrap_interval needs at least one value, got none")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = len(values)
    if n <= _EXACT_UP_TO:
        means = sorted(sum(sample) / n for sample in itertools.product(values, repeat=n))
    else:
        draw = random.Random(0)
        means = sorted(sum(draw.choices(values, k=n)) / n for _ in range(_RESAMPLES))
    tail = (1.0 - confidence) / 2  # clamped: the mean of n equal values may differ from them in the last bit
    return max(min(values), _quantile(means, tail)), min(max(values), _quantile(means, 1.0 - tail))


def interval_verdict(a: Interval, b: Interval, b_wins_when_higher: bool, name_a: str, name_b: str) -> str:
    """``alike``, ``<name> better``, ``cannot tell`` or ``n/a`` for group ``b`` against ``a``.

    ``n/a`` when either has no value; :data:`ONE_SEED` when either rests on one seed; ``alike``
    when every difference the two intervals allow is within :data:`NOISE_FLOOR`; ``<name>
    better`` when the intervals do not overlap; else ``cannot tell``.

    >>> A, B = Interval.of([0.50, 0.52]), Interval.of([0.60, 0.62])
    >>> interval_verdict(A, B, True, "add", "concat"), interval_verdict(A, B, False, "add", "concat")
    ('concat better', 'add better')
    >>> interval_verdict(A, Interval.of([0.51, 0.70]), True, "add", "concat")
    'cannot tell'
    >>> interval_verdict(A, Interval.of([0.505, 0.515]), True, "a", "b"), interval_verdict(A, Interval.of([0.6]), True, "a", "b")
    ('alike', 'cannot tell (1 seed)')
    """
    if not a.n or not b.n:
        return "n/a"
    if a.n < 2 or b.n < 2:
        return ONE_SEED
    if max(abs(b.high - a.low), abs(a.high - b.low)) <= NOISE_FLOOR:
        return "alike"
    if a.overlaps(b):
        return CANNOT_TELL
    return f"{name_b if (b.mean > a.mean) == b_wins_when_higher else name_a} better"


def combine_strict(verdicts: Iterable[str]) -> str:
    """Like :func:`combine`, but one part that cannot tell (or has one seed) makes it ``cannot tell``.

    >>> combine_strict(["agree", "disagree"]), combine_strict(["agree", "cannot tell"]), combine_strict([])
    ('partly', 'cannot tell', 'cannot tell')
    """
    verdicts = list(verdicts)
    if not verdicts or any(v not in (AGREE, DISAGREE) for v in verdicts):
        return CANNOT_TELL
    return combine(verdicts)


def vaswani_intervals(pair_verdicts: Iterable[str]) -> str:
    """Learned ~ sinusoidal from each task's :func:`interval_verdict`: ``alike`` agrees, a winner
    disagrees, anything else cannot tell (and so does the whole)."""
    return combine_strict(AGREE if v == "alike" else (DISAGREE if v.endswith(" better") else CANNOT_TELL)
                          for v in pair_verdicts)


def _fails(ratio: Interval) -> str:
    """Press's "fails beyond L" for one scheme's interval of perplexity ratios."""
    if ratio.n < 2:
        return CANNOT_TELL
    if ratio.low >= FAIL_RATIO:
        return AGREE
    return DISAGREE if ratio.high < FAIL_RATIO else CANNOT_TELL


def press_parts(ratios: Mapping[str, Interval]) -> dict[str, str]:
    """Each part of Press et al.'s claim judged on intervals of the per-seed perplexity ratios:
    ``{"learned fails": ..., "sinusoidal fails": ..., "alibi flattest": ...}``.

    ALiBi is flattest (``agree``) when its interval lies below every other compared scheme's,
    not (``disagree``) when some compared scheme's interval lies wholly below it, else
    ``cannot tell``. A ratio that is not measurable (``inf``) is a failure on every seed.
    """
    parts = {f"{s} fails": _fails(ratios[s]) for s in ("learned", "sinusoidal") if s in ratios}
    alibi = ratios["alibi"]
    others = [r for s, r in ratios.items() if s in PRESS_SCHEMES and s != "alibi"]
    if alibi.n < 2 or any(r.n < 2 for r in others):
        parts["alibi flattest"] = CANNOT_TELL
    elif all(alibi.high <= r.low * (1 + FLAT_TOLERANCE) for r in others):
        parts["alibi flattest"] = AGREE
    elif any(r.high * (1 + FLAT_TOLERANCE) < alibi.low for r in others):
        parts["alibi flattest"] = DISAGREE
    else:
        parts["alibi flattest"] = CANNOT_TELL
    return parts


def press_intervals(ratios: Mapping[str, Interval]) -> str:
    """Press et al.'s verdict on intervals (:func:`press_parts`, combined strictly); ``cannot
    tell`` without ALiBi, or without learned and sinusoidal.

    >>> r = lambda *v: Interval.of(list(v))
    >>> press_intervals({"learned": r(1.6, 1.7), "sinusoidal": r(1.1, 1.2), "alibi": r(0.9, 0.95)})
    'partly'
    >>> press_intervals({"learned": r(1.4, 1.6), "sinusoidal": r(1.1, 1.2), "alibi": r(0.9, 0.95)})
    'cannot tell'
    """
    if "alibi" not in ratios or not {"learned", "sinusoidal"} & set(ratios):
        return CANNOT_TELL
    return combine_strict(press_parts(ratios).values())


def kazemnejad_task_intervals(beyond: Mapping[str, Interval]) -> str:
    """One task's Kazemnejad verdict on intervals of each scheme's exact match beyond L.

    ``cannot tell`` when every scheme ties (the point rule), a group has one seed, or the best
    favoured scheme's interval overlaps the best other's (unless every difference they allow is
    within the noise floor: a tie counts as agreeing, as in :func:`kazemnejad_task`).

    >>> r = lambda *v: Interval.of(list(v))
    >>> kazemnejad_task_intervals({"nope": r(0.5, 0.6), "rope": r(0.1, 0.2)})
    'agree'
    >>> kazemnejad_task_intervals({"nope": r(0.3, 0.6), "rope": r(0.1, 0.4)})
    'cannot tell'
    """
    if kazemnejad_task({s: (None if not r.n else r.mean) for s, r in beyond.items()}) == CANNOT_TELL:
        return CANNOT_TELL
    measured = {s: r for s, r in beyond.items() if r.n}  # not measurable: ranks last, as in the point rule
    if any(r.n < 2 for r in measured.values()):
        return CANNOT_TELL
    favoured = [r for s, r in measured.items() if s in KAZEMNEJAD_FAVOURED]
    others = [r for s, r in measured.items() if s not in KAZEMNEJAD_FAVOURED]
    if not favoured or not others:
        return AGREE if favoured else DISAGREE
    favoured, other = max(favoured, key=lambda r: r.mean), max(others, key=lambda r: r.mean)
    if max(abs(favoured.high - other.low), abs(other.high - favoured.low)) <= NOISE_FLOOR:
        return AGREE
    if favoured.overlaps(other):
        return CANNOT_TELL
    return AGREE if favoured.mean > other.mean else DISAGREE


def kazemnejad_intervals(per_task: Mapping[str, Mapping[str, Interval]]) -> str:
    """Kazemnejad et al.'s verdict over copy and reverse on intervals, combined strictly; a task
    without a favoured scheme and another one was not measured and is left out."""
    measured = [scores for task, scores in per_task.items() if task in ("copy", "reverse") and
                {s for s in scores if s in KAZEMNEJAD_FAVOURED} and {s for s in scores if s not in KAZEMNEJAD_FAVOURED}]
    return combine_strict(kazemnejad_task_intervals(scores) for scores in measured)
