"""The one verdict rule: a test at a stated error rate behind every "better", "alike" and "cannot tell".

The unit is a seed (or, for :func:`mcnemar`, one query's 0/1 hit). A :class:`Comparison` names two
arms, their per-unit values and how to test them; :func:`decide` judges one report's *family* of
comparisons together:

- the difference ``mean(b) - mean(a)`` is tested with Welch's t (:func:`welch`), a seed-paired t
  (:func:`paired_t`, when both arms ran on the same seeds and data) or the exact McNemar test on
  paired hits (:func:`mcnemar`); perplexity is tested on the log scale (``log_scale``);
- "alike" comes only from an equivalence test (:func:`tost`, two one-sided tests) that the
  difference lies within ``+/- margin``, a margin the report states;
- Holm's step-down correction (:func:`holm`) runs over *both* tests of every primary comparison
  (with Shaffer's logical constraint: a comparison's two nulls cannot both hold), so the chance of any false
  "better" or false "alike" in the report is at most ``alpha`` when nothing differs (checked by simulation in
  ``tests/test_stats.py``);
- a primary comparison that decides neither way says "cannot tell" with its minimum detectable
  difference (:func:`min_detectable_difference`): the true difference it would have detected with
  80 % power at the family's level; exploratory comparisons (``primary=False``) get numbers only.

:func:`describe` gives one group's interval for display, labelled for what it is: a 95 % t
interval from three values on, "the seeds' range" for two (a range of two seeds is not a 95 %
interval of anything). :func:`distinguishing` prints a value with the digits a threshold needs.

The tests themselves are scipy.stats' (``ttest_ind``, ``ttest_rel``, ``binomtest``); this module
states the rule around them. A spread within float rounding (:data:`JITTER`) is no spread: such a
comparison is not testable. McNemar's equivalence side is exact (:func:`mcnemar_equivalence`). The
power side (the MDD, the seeds a "cannot tell" would need) lives in :mod:`posembed.stats.power`
(scipy's noncentral t; statsmodels is the tests' reference only); scipy is imported lazily (the ``lab`` extra).

>>> a = Comparison("loss at L", "learned", "sinusoidal", (1.00, 1.02, 1.01, 0.99), (1.20, 1.22, 1.19, 1.21),
...                higher_is_better=False, margin=0.05)
>>> [d.word for d in decide([a])]
['learned better']
>>> describe([1.0, 2.0])
(1.5, 1.0, 2.0, "the seeds' range")
"""

from __future__ import annotations

import enum
import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from posembed.stats.power import POWER, min_detectable_difference, seeds_to_detect, t_cdf, t_quantile

__all__ = [
    "Comparison",
    "Decision",
    "Outcome",
    "Estimate",
    "decide",
    "holm",
    "welch",
    "paired_t",
    "mcnemar",
    "estimate",
    "tost",
    "mcnemar_equivalence",
    "min_detectable_difference",
    "seeds_to_detect",
    "seeds_clause",
    "describe",
    "distinguishing",
    "number_text",
    "TESTS",
    "POWER",
    "ALPHA",
    "CANNOT_TELL",
    "ALIKE",
    "SEEDS_RANGE",
    "T_INTERVAL",
    "JITTER",
]

#: the family-wise error rate every report holds
ALPHA = 0.05
#: the tests a comparison may name
TESTS = ("welch", "paired", "mcnemar")
CANNOT_TELL, ALIKE = "cannot tell", "alike"
#: a spread of values within this fraction of their magnitude is float rounding: no spread to test
JITTER = 1e-12
#: labels of :func:`describe`'s intervals
T_INTERVAL, SEEDS_RANGE, ONE_VALUE = "95 % t interval", "the seeds' range", "one seed"


@dataclass(frozen=True)
class Comparison:
    """Two arms' per-unit values and how to test them (see the module docstring)."""

    name: str
    a: str
    b: str
    values_a: tuple[float, ...]
    values_b: tuple[float, ...]
    higher_is_better: bool
    margin: float
    test: str = "welch"
    log_scale: bool = False
    primary: bool = True
    #: what was subtracted from b's values before they were given (a test of a difference *beyond* a margin
    #: shifts one arm by it); 0 for a plain comparison. Data for the reader of the decision, not used by the test.
    offset: float = 0.0
    #: what the comparison answers, for a report to find it by: a question (``"Q1"``) or a check (``"Press"``)
    topic: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "values_a", tuple(float(v) for v in self.values_a))
        object.__setattr__(self, "values_b", tuple(float(v) for v in self.values_b))
        if self.test not in TESTS:
            raise ValueError(f"{self.name}: test must be one of {TESTS}, got {self.test!r}")
        if not (math.isfinite(self.margin) and self.margin > 0):
            raise ValueError(f"{self.name}: margin must be a finite number > 0, got {self.margin}")
        values = self.values_a + self.values_b
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"{self.name}: every value must be finite, got {self.values_a} and {self.values_b}")
        if self.test == "mcnemar" and self.log_scale:
            raise ValueError(f"{self.name}: McNemar's 0/1 hits have no log scale")
        if self.log_scale and not all(v > 0 for v in values):
            raise ValueError(f"{self.name}: log_scale needs values > 0, got {self.values_a} and {self.values_b}")
        if self.test != "welch" and len(self.values_a) != len(self.values_b):
            raise ValueError(
                f"{self.name}: a {self.test} test pairs the units, got {len(self.values_a)} "
                f"values of {self.a} and {len(self.values_b)} of {self.b}"
            )
        if self.test == "mcnemar" and not self.margin < 1:
            raise ValueError(
                f"{self.name}: McNemar's margin is a difference of hit rates, it must be < 1, got {self.margin}"
            )
        if self.test == "mcnemar" and not set(values) <= {0.0, 1.0}:
            raise ValueError(f"{self.name}: McNemar's values are 0/1 hits, got {sorted(set(values) - {0.0, 1.0})}")

    def tested(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The values on the tested scale (their logarithms when ``log_scale``)."""
        if not self.log_scale:
            return self.values_a, self.values_b
        return tuple(map(math.log, self.values_a)), tuple(map(math.log, self.values_b))


class Outcome(enum.Enum):
    """What :func:`decide` concluded about one comparison: data the reports branch on; :attr:`Decision.word`
    renders it (the only place a verdict word is spelled)."""

    A_BETTER = "a better"
    B_BETTER = "b better"
    ALIKE = ALIKE
    CANNOT_TELL = CANNOT_TELL
    #: not in the family (``primary=False``): numbers only, no claim
    EXPLORATORY = "exploratory"


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` concluded about one comparison (differences on the tested scale).

    >>> c = Comparison("x", "learned", "rope", (1.0, 1.1, 0.9), (2.0, 2.1, 1.9), higher_is_better=False, margin=0.1)
    >>> d = decide([c])[0]
    >>> d.outcome, d.winner, d.word
    (<Outcome.A_BETTER: 'a better'>, 'learned', 'learned better')
    """

    comparison: Comparison
    outcome: Outcome
    difference: float
    interval: tuple[float, float]
    interval_label: str
    p: float
    p_adjusted: float
    p_equivalence: float
    p_equivalence_adjusted: float
    mdd: float
    note: str = field(default="")
    #: for a "cannot tell": the seeds per arm that would detect a true difference of the size seen at
    #: the MDD's level with 80 % power (:func:`~posembed.stats.power.seeds_to_detect`); ``None`` otherwise
    #: or where it cannot be said
    seeds_needed: int | None = None

    @property
    def winner(self) -> str | None:
        """The arm shown better (``comparison.a`` or ``.b``); ``None`` for any other outcome."""
        if self.outcome is Outcome.A_BETTER:
            return self.comparison.a
        return self.comparison.b if self.outcome is Outcome.B_BETTER else None

    @property
    def claims(self) -> bool:
        """Whether the decision makes a claim (a primary comparison's outcome); exploratory ones do not."""
        return self.outcome is not Outcome.EXPLORATORY

    @property
    def decides(self) -> bool:
        """Whether the decision settles its comparison: a difference or an equivalence shown."""
        return self.outcome in (Outcome.A_BETTER, Outcome.B_BETTER, Outcome.ALIKE)

    @property
    def word(self) -> str | None:
        """The outcome in words: ``"<winner> better"``, ``"alike"``, ``"cannot tell"``; ``None`` when exploratory."""
        if self.winner is not None:
            return f"{self.winner} better"
        return None if self.outcome is Outcome.EXPLORATORY else self.outcome.value

    def text(self, digits: int = 3) -> str:
        """``word (b - a = d [lo, hi], Holm p = ...; MDD ...)`` for a report's line."""
        return f"{self.word or Outcome.EXPLORATORY.value} ({self.details(digits)})"

    def details(self, digits: int = 3) -> str:
        """:meth:`text` without its word: the difference, its interval, the p values, the MDD of a "cannot tell"."""
        c, scale = self.comparison, " (log)" if self.comparison.log_scale else ""
        lo, hi = self.interval
        body = (
            f"{c.b} - {c.a}{scale} = {self.difference:+.{digits}g} [{lo:+.{digits}g}, {hi:+.{digits}g}], "
            f"p = {self.p:.2g}"
        )
        if self.claims:
            body += (
                f", Holm p = {self.p_adjusted:.2g}, equivalence (|d| < {c.margin:g}) Holm p = "
                f"{self.p_equivalence_adjusted:.2g}"
            )
        if self.outcome is Outcome.CANNOT_TELL:
            body += f"; could detect {number_text(self.mdd, digits)}{seeds_clause(self)}"
        return f"{body}{'; ' + self.note if self.note else ''}"


def number_text(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, ``"n/a"`` for NaN (an MDD where nothing could be tested).

    >>> number_text(0.012345), number_text(math.nan)
    ('0.0123', 'n/a')
    """
    return "n/a" if math.isnan(value) else f"{value:.{digits}g}"


def seeds_clause(decision: Decision) -> str:
    """``"; about N seeds per arm would detect the difference seen"`` for a "cannot tell", or ``""``."""
    needed = decision.seeds_needed if decision.outcome is Outcome.CANNOT_TELL else None
    return f"; about {needed} seeds per arm would detect the difference seen" if needed else ""


class Estimate(NamedTuple):
    """One test's difference ``mean(b) - mean(a)``, its 95 % interval, two-sided p, standard error
    and degrees of freedom (``inf`` for a normal approximation; NaN where it cannot be tested).
    ``discordant``: McNemar's ``(only_a, only_b, pairs)``, which its exact equivalence test reads."""

    difference: float
    interval: tuple[float, float]
    p: float
    se: float
    df: float
    label: str
    discordant: tuple[int, int, int] | None = None


def _stats():
    from scipy import stats  # lazy: the lab extra

    return stats


def _no_spread(values: Sequence[float], scale: Sequence[float]) -> bool:
    """Whether ``values`` vary by no more than float rounding of numbers the size of ``scale``'s.

    A difference that is the same on every seed up to its last bits (``log(6.18 / 6.0)`` against
    ``log(6.283 / 6.1)``) has a standard error of ~1e-17 and a t of ~1e15: not a measurement but
    rounding. Such a spread counts as none: the comparison is not testable.
    """
    return max(values) - min(values) <= JITTER * max(abs(v) for v in scale)


def _variance(values: Sequence[float]) -> float:
    """Sample variance (``ddof=1``) in floats (``statistics.variance`` is exact and slow)."""
    import numpy as np

    return float(np.var(values, ddof=1))


def _untestable(difference: float, se: float, df: float) -> Estimate:
    return Estimate(difference, (math.nan, math.nan), math.nan, se, df, "not testable")


def welch(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """Welch's unequal-variance t test of ``mean(b) - mean(a)`` (``scipy.stats.ttest_ind``,
    ``equal_var=False``: Welch-Satterthwaite df).

    Each arm needs two values; the p is NaN (not testable) without them or with no spread at all
    (none beyond float rounding, see :data:`JITTER`).

    >>> e = welch([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    >>> round(e.difference, 3), round(e.p, 4), round(e.df, 3)
    (2.0, 0.2209, 2.941)
    """
    n_a, n_b = len(a), len(b)
    difference = (statistics.fmean(b) - statistics.fmean(a)) if n_a and n_b else math.nan
    if n_a < 2 or n_b < 2:
        return _untestable(difference, math.nan, math.nan)
    if _no_spread(a, [*a, *b]) and _no_spread(b, [*a, *b]):
        return _untestable(difference, 0.0, math.nan)
    result = _stats().ttest_ind(b, a, equal_var=False)
    se = math.sqrt(_variance(a) / n_a + _variance(b) / n_b)
    return Estimate(difference, _interval(result), float(result.pvalue), se, float(result.df), "95 % Welch t interval")


def _interval(result) -> tuple[float, float]:
    low, high = result.confidence_interval(0.95)
    return float(low), float(high)


def paired_t(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """Seed-paired t test of ``mean(b - a)`` (``scipy.stats.ttest_rel``; arm ``a`` and ``b`` ran
    on the same seeds and data). Not testable (NaN p) below two pairs or when every pair differs
    alike up to float rounding (:data:`JITTER`).

    >>> e = paired_t([1.0, 2.0, 3.0], [1.5, 2.4, 3.7])
    >>> round(e.difference, 4), round(e.p, 4)
    (0.5333, 0.0263)
    >>> paired_t([math.log(6.0), math.log(6.1)], [math.log(6.18), math.log(6.283)]).p  # 3 % on both: no test
    nan
    """
    if len(a) != len(b):
        raise ValueError(f"paired_t pairs the values: got {len(a)} and {len(b)}")
    d = [y - x for x, y in zip(a, b)]
    if len(d) < 2:
        return _untestable(statistics.fmean(d) if d else math.nan, math.nan, math.nan)
    if _no_spread(d, [*a, *b]):
        return _untestable(statistics.fmean(d), 0.0, len(d) - 1.0)
    result = _stats().ttest_rel(b, a)
    se = math.sqrt(_variance(d) / len(d))
    return Estimate(
        statistics.fmean(d), _interval(result), float(result.pvalue), se, float(result.df), "95 % paired t interval"
    )


def mcnemar(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """Exact McNemar test on paired 0/1 hits: a two-sided binomial test of the discordant pairs
    (``scipy.stats.binomtest``).

    The difference is ``mean(b) - mean(a)`` with a Wald interval for paired proportions
    (asymptotic; the p is exact). ``p = 1`` when no pair is discordant. Its equivalence test
    (:func:`tost`) is exact too (:func:`mcnemar_equivalence`).

    >>> e = mcnemar([1, 1, 0, 0, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 0])
    >>> round(e.difference, 3), round(e.p, 4)
    (0.5, 0.125)
    """
    if len(a) != len(b):
        raise ValueError(f"mcnemar pairs the hits: got {len(a)} and {len(b)}")
    n = len(a)
    if not n:
        return _untestable(math.nan, math.nan, math.nan)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    m, difference = only_a + only_b, (only_b - only_a) / n
    p = float(_stats().binomtest(only_b, m, 0.5).pvalue) if m else 1.0
    se = math.sqrt(max(0.0, (only_a + only_b) / n - difference**2) / n)
    half = t_quantile(math.inf, 0.975) * se
    return Estimate(
        difference,
        (difference - half, difference + half),
        p,
        se,
        math.inf,
        "95 % Wald interval (paired hits)",
        (only_a, only_b, n),
    )


def estimate(comparison: Comparison) -> Estimate:
    """The difference test the comparison names, on its tested scale."""
    a, b = comparison.tested()
    return {"welch": welch, "paired": paired_t, "mcnemar": mcnemar}[comparison.test](a, b)


def tost(est: Estimate, margin: float) -> float:
    """Two one-sided tests' p that the true difference lies within ``(-margin, margin)``.

    On the t (or z) distribution of the estimate; exact for McNemar's paired hits (an estimate
    with ``discordant`` counts: :func:`mcnemar_equivalence`). NaN when a t estimate has no
    standard error (nothing can be shown equivalent).

    >>> round(tost(Estimate(0.01, (0, 0), 0.5, 0.02, 10.0, ""), 0.1), 4)
    0.0006
    """
    if not (margin > 0):
        raise ValueError(f"the equivalence margin must be > 0, got {margin}")
    if est.discordant is not None:
        return mcnemar_equivalence(*est.discordant, margin)
    if not (est.se > 0 and est.df > 0):
        return math.nan
    lower = 1.0 - t_cdf(est.df, (est.difference + margin) / est.se)
    upper = t_cdf(est.df, (est.difference - margin) / est.se)
    return max(lower, upper)


def mcnemar_equivalence(only_a: int, only_b: int, pairs: int, margin: float) -> float:
    """Exact p that paired hit rates differ by less than ``margin``: two one-sided exact
    unconditional tests (Suissa & Shuster 1991; Chan 1998) on ``pairs`` 0/1 pairs of which
    ``only_a`` hit in arm a only and ``only_b`` in arm b only.

    Each side's null (``p_b - p_a >= margin``, or ``<= -margin``) leaves one nuisance parameter,
    the discordance; its p is the largest probability, over that parameter, of a score statistic
    (:func:`_score_z`) at least as far toward equivalence as the one seen (the trinomial, summed exactly), so it
    holds its level at every sample size, which the normal approximation does not.

    >>> round(mcnemar_equivalence(0, 0, 100, 0.1), 5)  # 100 pairs, none discordant
    0.00047
    >>> round(mcnemar_equivalence(10, 10, 100, 0.1), 3), round(mcnemar_equivalence(10, 10, 60, 0.1), 3)
    (0.019, 0.099)
    """
    if not 0 < margin < 1:
        raise ValueError(
            f"McNemar's equivalence margin is a difference of hit rates: it must be in (0, 1), got {margin}"
        )
    if not (0 <= only_a and 0 <= only_b and only_a + only_b <= pairs):
        raise ValueError(f"discordant counts {only_a} and {only_b} must be >= 0 and sum to at most {pairs} pairs")
    return max(_exact_side(only_a, only_b, pairs, margin), _exact_side(only_b, only_a, pairs, margin))


def _score_z(only_a, only_b, pairs: int, margin: float):
    """Score statistic of ``p_b - p_a - margin`` (Tango 1998): the difference of discordant rates
    minus the margin over its standard error under the null's restricted maximum-likelihood fit
    (``p_b = p_a + margin``). NumPy arrays or numbers. At a fixed ``only_a`` it rises with ``only_b``
    (checked in ``tests/test_stats.py``)."""
    import numpy as np

    x_a, x_b = np.asarray(only_a, dtype=float), np.asarray(only_b, dtype=float)
    alike = pairs - x_a - x_b
    # the restricted fit of p_a: the positive root of 2n p^2 - B p - C = 0
    b = x_a * (1 - 3 * margin) + x_b * (1 - margin) - 2 * margin * alike
    c = x_a * margin * (1 - margin)
    p_a = (b + np.sqrt(b * b + 8 * pairs * c)) / (4 * pairs)
    variance = (2 * p_a + margin - margin * margin) / pairs
    return ((x_b - x_a) / pairs - margin) / np.sqrt(variance)


@functools.lru_cache(maxsize=4096)
def _exact_side(only_a: int, only_b: int, pairs: int, margin: float) -> float:
    """Exact p of the side whose null is ``p_b - p_a >= margin`` (small ``only_b`` rejects it)."""
    import numpy as np
    from scipy.optimize import minimize_scalar

    binom, n = _stats().binom, pairs
    seen = float(_score_z(only_a, only_b, n, margin))
    seen += 1e-12 * abs(seen)  # the seen point itself, whatever the rounding
    a = np.arange(n + 1)
    # the statistic rises with only_b at fixed only_a, so the region "as far or further" is
    # only_b <= bound[only_a]: found by bisection, every only_a at once
    low, high = np.full(n + 1, -1), n - a + 1
    while np.any(high - low > 1):
        middle = (low + high) // 2
        inside = _score_z(a, middle, n, margin) <= seen
        low, high = np.where(inside, middle, low), np.where(inside, high, middle)

    def probability(p_a: np.ndarray) -> np.ndarray:
        """P(region) when arm a alone hits with probability p_a and arm b alone with p_a + margin."""
        p_a = np.atleast_1d(p_a)[None, :]
        given = np.minimum(1.0, (p_a + margin) / (1.0 - p_a))
        inside = binom.cdf(low[:, None], (n - a)[:, None], given)
        return np.sum(binom.pmf(a[:, None], n, p_a) * inside, axis=0)

    grid = np.linspace(0.0, (1.0 - margin) / 2, 201)
    values = probability(grid)
    best = int(np.argmax(values))
    bounds = (grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)])
    refined = minimize_scalar(
        lambda x: -float(probability(x)[0]), bounds=bounds, method="bounded", options={"xatol": 1e-12}
    )
    return float(min(1.0, max(values[best], -refined.fun)))


def holm(p_values: Sequence[float], max_true: int | None = None) -> list[float]:
    """Holm's step-down adjusted p-values (a NaN p, a test that could not run, counts as 1).

    ``max_true``: at most this many of the nulls can hold at once (Shaffer 1986): step ``j``
    multiplies by ``min(m - j, max_true)`` instead of ``m - j``. :func:`decide` passes the number
    of comparisons, since a comparison's "no difference" and "differs by the margin or more"
    cannot both be true.

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    >>> holm([0.01, 0.04, 0.03, 0.9], max_true=2)
    [0.02, 0.08, 0.06, 0.9]
    """
    ps = [1.0 if math.isnan(p) else p for p in p_values]
    if any(not 0 <= p <= 1 for p in ps):
        raise ValueError(f"p-values must lie in [0, 1], got {p_values}")
    if max_true is not None and max_true < 1:
        raise ValueError(f"max_true must be at least 1, got {max_true}")
    m, running, adjusted = len(ps), 0.0, [0.0] * len(ps)
    for rank, i in enumerate(sorted(range(m), key=lambda j: ps[j])):
        factor = m - rank if max_true is None else min(m - rank, max_true)
        running = max(running, min(1.0, factor * ps[i]))
        adjusted[i] = running
    return adjusted


def _outcome(c: Comparison, est: Estimate, p_adj: float, p_eq_adj: float, alpha: float) -> Outcome:
    """A difference shown at the family's level wins over equivalence (it is the stronger claim)."""
    if p_adj < alpha:
        return Outcome.B_BETTER if (est.difference > 0) == c.higher_is_better else Outcome.A_BETTER
    if p_eq_adj < alpha:
        return Outcome.ALIKE
    return Outcome.CANNOT_TELL


def decide(comparisons: Sequence[Comparison], alpha: float = ALPHA) -> list[Decision]:
    """One report's family: Holm over every primary comparison's two tests (difference and
    equivalence), so P(any false "better" or false "alike") <= ``alpha`` when nothing differs.

    At most one of a comparison's two nulls can hold, so the step-down multiplies by at most the
    number of primary comparisons ``k`` (:func:`holm`'s ``max_true``). Primary comparisons get an
    :class:`Outcome`; exploratory ones (``primary=False``) get ``EXPLORATORY``, their raw p and NaN adjusted p.
    The MDD is at the family's first level (``alpha / k``) for primary comparisons, at ``alpha``
    for exploratory ones. A primary comparison that cannot be tested (fewer than two values per
    arm, or no spread) says "cannot tell" and stays out of the family.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    estimates = [estimate(c) for c in comparisons]
    equivalence = [tost(e, c.margin) for c, e in zip(comparisons, estimates)]
    # a comparison that cannot be tested (fewer than two values, no spread) can make no claim: it
    # says "cannot tell" and does not enter the family (its p would count as 1 and only cost power)
    primary = [i for i, c in enumerate(comparisons) if c.primary and not math.isnan(estimates[i].p)]
    adjusted = holm(
        [estimates[i].p for i in primary] + [equivalence[i] for i in primary], max_true=max(1, len(primary))
    )
    family = max(1, len(primary))
    decisions = []
    for i, (c, e, p_eq) in enumerate(zip(comparisons, estimates, equivalence)):
        if c.primary and i not in primary:
            p_adj = p_eq_adj = 1.0
            outcome, level = Outcome.CANNOT_TELL, alpha / family
        elif c.primary:
            k = primary.index(i)
            p_adj, p_eq_adj = adjusted[k], adjusted[k + len(primary)]
            outcome, level = _outcome(c, e, p_adj, p_eq_adj, alpha), alpha / family
        else:
            p_adj = p_eq_adj = math.nan
            outcome, level = Outcome.EXPLORATORY, alpha
        note = "" if e.se > 0 else "no spread to test" if e.se == 0 else "fewer than two values per arm"
        seeds = None if outcome is not Outcome.CANNOT_TELL else _seeds(c, e, level)
        decisions.append(
            Decision(
                c,
                outcome,
                e.difference,
                e.interval,
                e.label,
                e.p,
                p_adj,
                p_eq,
                p_eq_adj,
                min_detectable_difference(e.se, e.df, level),
                note,
                seeds,
            )
        )
    return decisions


def _seeds(c: Comparison, e: Estimate, level: float) -> int | None:
    """The seeds per arm a "cannot tell" would need (:func:`~posembed.stats.power.seeds_to_detect`), from both arms."""
    a, b = c.tested()
    spread = (_variance(a), _variance(b)) if c.test == "welch" and min(len(a), len(b)) > 1 else None
    if c.test == "welch" and (spread is None or not sum(spread) > 0):  # an arm below two values, or no spread
        return None
    return seeds_to_detect(
        e.difference, se=e.se, df=e.df, units=len(a), units_b=len(b), variances=spread, test=c.test, alpha=level
    )


def describe(values: Sequence[float]) -> tuple[float, float, float, str]:
    """``(mean, low, high, label)``: a 95 % t interval of the mean from three values, the seeds'
    range for two, the value itself for one (NaN and ``"no value"`` for none).

    >>> describe([5.0]), [round(x, 3) for x in describe([1.0, 2.0, 3.0])[:3]], describe([1.0, 2.0, 3.0])[3]
    ((5.0, 5.0, 5.0, 'one seed'), [2.0, -0.484, 4.484], '95 % t interval')
    """
    n = len(values)
    if not n:
        return math.nan, math.nan, math.nan, "no value"
    mean = statistics.fmean(values)
    if n == 1:
        return mean, mean, mean, ONE_VALUE
    if n == 2:
        return mean, min(values), max(values), SEEDS_RANGE
    half = t_quantile(n - 1.0, 0.975) * math.sqrt(_variance(values) / n)  # scipy's t.interval, 0 for no spread
    return mean, mean - half, mean + half, T_INTERVAL


def distinguishing(value: float, thresholds: Sequence[float] = (), digits: int = 3) -> str:
    """``value`` printed with at least ``digits`` significant digits and as many more as it takes
    for the printed number to sit on the same side of every threshold as the value itself.

    >>> distinguishing(1.4976, [1.5]), distinguishing(1.5024, [1.5]), distinguishing(1.5, [1.5])
    ('1.498', '1.502', '1.5')
    """
    if not math.isfinite(value):
        return str(value)
    for d in range(digits, 17):
        text = f"{value:.{d}g}"
        shown = float(text)
        if all((shown < t) == (value < t) and (shown > t) == (value > t) for t in thresholds):
            return text
    return repr(value)
