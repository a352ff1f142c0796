"""What a t test could detect, and how many seeds it would need: the power side of :mod:`posembed.stats.verdict`.

- :func:`min_detectable_difference`: the smallest true difference a two-sided test with this
  standard error and degrees of freedom detects with probability ``power`` (scipy's noncentral t,
  or the normal for ``df = inf``, solved by ``brentq``; ``tests/test_stats.py`` checks it against
  statsmodels' ``ttest_power``);
- :func:`seeds_to_detect`: how many units (seeds) per arm would make a difference of the size seen
  detectable at that power, the standard error shrinking as ``1 / sqrt(n)``: what a "cannot tell"
  asks of the next run.

scipy is imported lazily (the ``lab`` extra).

>>> round(min_detectable_difference(1.0, math.inf), 3)
2.802
>>> seeds_to_detect(0.02, se=0.01, df=1.0, units=2, test="paired", alpha=0.05)
7
"""

from __future__ import annotations

import math

__all__ = ["min_detectable_difference", "seeds_to_detect", "t_cdf", "t_quantile", "POWER", "MAX_SEEDS"]

#: the power at which a minimum detectable difference is stated
POWER = 0.80
#: :func:`seeds_to_detect` looks no further than this many seeds per arm
MAX_SEEDS = 1000


def _special():
    import scipy.special  # lazy: the lab extra

    return scipy.special


def t_cdf(df: float, x: float) -> float:
    """The t distribution's CDF (the normal's for ``df = inf``)."""
    return float(_special().ndtr(x) if math.isinf(df) else _special().stdtr(df, x))


def t_quantile(df: float, q: float) -> float:
    """The t distribution's quantile (the normal's for ``df = inf``)."""
    return float(_special().ndtri(q) if math.isinf(df) else _special().stdtrit(df, q))


def _power(shift: float, df: float, critical: float) -> float:
    """Power of the two-sided test with this critical value at a true ``difference / se`` of ``shift``
    (scipy's noncentral t, ``nctdtr``; the normal for ``df = inf``)."""
    if math.isinf(df):
        return float(_special().ndtr(shift - critical) + _special().ndtr(-critical - shift))
    upper = 1.0 - float(_special().nctdtr(df, shift, critical))
    lower = float(_special().nctdtr(df, shift, -critical))  # NaN far out in the tail, where it is ~0
    if math.isnan(upper):
        raise ArithmeticError(f"the noncentral t gave no power at df={df}, shift={shift}")
    return upper + (0.0 if math.isnan(lower) else lower)


def min_detectable_difference(se: float, df: float, alpha: float = 0.05, power: float = POWER) -> float:
    """Smallest true difference a two-sided level-``alpha`` t test with this standard error and
    degrees of freedom detects with probability ``power`` (the noncentral t, solved by
    ``scipy.optimize.brentq``; the normal for ``df = inf``). NaN where nothing can be tested: no
    standard error, a zero one (no spread: no test, so no detectable difference to state), or no
    degrees of freedom.

    >>> round(min_detectable_difference(1.0, math.inf), 3), round(min_detectable_difference(1.0, 4.0), 3)
    (2.802, 3.761)
    >>> min_detectable_difference(0.0, 4.0)
    nan
    """
    from scipy.optimize import brentq  # lazy: the lab extra

    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha} and {power}")
    if not (se > 0 and df > 0) or math.isinf(se):
        return math.nan
    critical = t_quantile(df, 1.0 - alpha / 2)
    high = critical + t_quantile(math.inf, power) + 1.0
    while _power(high, df, critical) < power:
        high *= 2.0
    shift = brentq(lambda s: _power(s, df, critical) - power, 0.0, high, xtol=1e-15, rtol=4 * 2.0**-52, maxiter=200)
    return shift * se


def _welch_at(n: int, variances: tuple[float, float]) -> tuple[float, float]:
    """Welch's standard error and Welch-Satterthwaite degrees of freedom at ``n`` seeds per arm."""
    va, vb = variances[0] / n, variances[1] / n
    return math.sqrt(va + vb), (va + vb) ** 2 / ((va**2 + vb**2) / (n - 1.0))


def seeds_to_detect(
    difference: float,
    *,
    se: float,
    df: float,
    units: int,
    test: str,
    alpha: float,
    power: float = POWER,
    units_b: int | None = None,
    variances: tuple[float, float] | None = None,
) -> int | None:
    """Seeds per arm at which a true difference of ``difference`` is detected with ``power``.

    From a test on ``units`` seeds per arm with standard error ``se`` and ``df`` degrees of
    freedom: at ``n`` seeds the standard error is ``se * sqrt(units / n)`` and the degrees of
    freedom ``n - 1`` (``"paired"``) or ``df * (n - 1) / (units - 1)`` (``"welch"``, its
    Welch-Satterthwaite value scaled). A Welch test whose arms have different counts (``units``
    for arm a, ``units_b`` for arm b) needs the arms' sample ``variances``: at ``n`` seeds per arm
    its standard error is ``sqrt((var_a + var_b) / n)``, whatever each arm had. ``None`` where it
    cannot be said: no difference or no noise estimate, McNemar's hits (their unit is a query, not
    a seed), or beyond :data:`MAX_SEEDS`. The count is at least the larger arm's.

    >>> seeds_to_detect(1.0, se=0.5, df=4.0, units=2, units_b=8, variances=(0.1, 1.9), test="welch", alpha=0.05)
    18
    """
    if units_b is not None and units_b != units and test == "welch" and variances is None:
        raise ValueError(f"a Welch test on {units} and {units_b} seeds needs the arms' variances")
    if test not in ("paired", "welch") or not (se > 0 and df > 0 and units >= 2) or not difference:
        return None
    if variances is not None and not (test == "welch" and min(variances) >= 0 and sum(variances) > 0):
        raise ValueError(
            f"variances are a Welch test's two arms' sample variances (>= 0, not both 0), got "
            f"{variances} for test {test!r}"
        )

    def detects(n: int) -> bool:
        if variances is not None:
            se_n, dof = _welch_at(n, variances)
        else:
            se_n, dof = se * math.sqrt(units / n), n - 1.0 if test == "paired" else df * (n - 1.0) / (units - 1.0)
        return min_detectable_difference(se_n, dof, alpha, power) <= abs(difference)

    start = max(units, units_b or units)
    if detects(start):
        return start
    if not detects(MAX_SEEDS):
        return None
    low, high = start, MAX_SEEDS  # detects(low) is False, detects(high) is True
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if detects(middle) else (middle, high)
    return high
