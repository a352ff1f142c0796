"""posembed.stats.verdict: exact values against scipy.stats, and the error rates by seeded simulation.

The simulations draw every group from one distribution (nothing differs) and count how often
the rule says "better" or "alike": per comparison and per family (Holm over the family's tests).
Each rate is asserted at most 5 % up to Monte Carlo error (three binomial standard errors of the
count; the rate itself is printed by ``-s``). Power is checked at a stated true difference.
"""

from __future__ import annotations

import math
import random
import statistics
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from posembed.stats import verdict as stats
from posembed.stats.verdict import Comparison, decide

#: simulated draws per rate: 2000 gives a Monte Carlo standard error of 0.49 points at 5 %
DRAWS = 2000


def _at_most(rate: float, bound: float, draws: int = DRAWS) -> bool:
    """``rate`` is consistent with a true rate <= ``bound`` (within 3 binomial standard errors)."""
    return rate <= bound + 3 * math.sqrt(bound * (1 - bound) / draws)


A, B = [0.91, 1.07, 0.98, 1.12, 1.03], [1.21, 1.18, 1.35, 1.09, 1.27]


# --- exact values against scipy.stats ---------------------------------------------------------


def test_welch_matches_scipy():
    got = stats.welch(A, B[:4])
    ref = sps.ttest_ind(B[:4], A, equal_var=False)
    assert got.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert got.df == pytest.approx(ref.df, rel=1e-12)
    assert got.interval == pytest.approx(tuple(ref.confidence_interval(0.95)), rel=1e-10)
    assert got.difference == pytest.approx(np.mean(B[:4]) - np.mean(A), rel=1e-14)


def test_paired_t_matches_scipy():
    got = stats.paired_t(A, B)
    ref = sps.ttest_rel(B, A)
    assert got.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert got.df == ref.df == 4
    assert got.interval == pytest.approx(tuple(ref.confidence_interval(0.95)), rel=1e-10)


@pytest.mark.parametrize("only_a, only_b, both, neither", [(0, 4, 3, 1), (7, 2, 20, 21), (5, 5, 0, 0), (0, 0, 3, 2)])
def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs(only_a, only_b, both, neither):
    a = [1] * only_a + [0] * only_b + [1] * both + [0] * neither
    b = [0] * only_a + [1] * only_b + [1] * both + [0] * neither
    got = stats.mcnemar(a, b)
    m = only_a + only_b
    assert got.p == pytest.approx(sps.binomtest(only_b, m, 0.5).pvalue if m else 1.0, rel=1e-12)
    assert got.difference == (only_b - only_a) / len(a)


def test_tost_is_two_one_sided_welch_tests():
    margin = 0.3
    got = stats.tost(stats.welch(A, B), margin)
    b = np.array(B)
    lower = sps.ttest_ind(b + margin, A, equal_var=False, alternative="greater").pvalue
    upper = sps.ttest_ind(b - margin, A, equal_var=False, alternative="less").pvalue
    assert got == pytest.approx(max(lower, upper), rel=1e-10)


def test_describe_gives_scipys_t_interval_from_three_values_and_the_range_below():
    mean, low, high, label = stats.describe(A)
    ref = sps.t.interval(0.95, len(A) - 1, loc=np.mean(A), scale=sps.sem(A))
    assert (low, high) == pytest.approx(ref, rel=1e-12) and mean == pytest.approx(np.mean(A))
    assert label == "95 % t interval"
    assert stats.describe([2.0, 1.0]) == (1.5, 1.0, 2.0, "the seeds' range")
    assert stats.describe([3.0])[3] == "one seed" and math.isnan(stats.describe([])[0])


@pytest.mark.parametrize("df", [2.0, 4.0, 9.5, math.inf])
def test_min_detectable_difference_has_about_80_percent_power(df):
    """At the MDD the power of the two-sided test (noncentral t; normal for df = inf) is 0.80."""
    se, alpha = 0.7, 0.05 / 6
    mdd = stats.min_detectable_difference(se, df, alpha)
    if math.isinf(df):
        crit = sps.norm.ppf(1 - alpha / 2)
        power = sps.norm.sf(crit - mdd / se) + sps.norm.cdf(-crit - mdd / se)
        assert power == pytest.approx(0.80, abs=1e-12)
    else:
        crit = sps.t.ppf(1 - alpha / 2, df)
        lower = sps.nct.cdf(-crit, df, mdd / se)  # NaN where it underflows (df = 2 here)
        power = sps.nct.sf(crit, df, mdd / se) + (0.0 if math.isnan(lower) else lower)
        assert power == pytest.approx(0.80, abs=1e-9)


def test_holm_by_hand():
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([math.nan, 0.01]) == [1.0, 0.02]
    assert stats.holm([]) == []
    # Shaffer: with at most 2 true nulls among 4, the first two steps multiply by 2, not 4 and 3
    assert stats.holm([0.01, 0.02, 0.03, 0.04], max_true=2) == pytest.approx([0.02, 0.04, 0.06, 0.06])
    with pytest.raises(ValueError, match="max_true must be at least 1"):
        stats.holm([0.1], max_true=0)


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12))
def test_holm_never_lowers_a_p_and_keeps_the_order(ps):
    adjusted = stats.holm(ps)
    assert all(p <= q <= 1.0 for p, q in zip(ps, adjusted))
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    assert all(adjusted[i] <= adjusted[j] for i, j in zip(order, order[1:]))
    assert min(adjusted) == pytest.approx(min(1.0, len(ps) * min(ps)))


# --- the rule's words --------------------------------------------------------------------------


def _c(a, b, **kw) -> Comparison:
    defaults = dict(name="x", a="a", b="b", values_a=a, values_b=b, higher_is_better=True, margin=0.1)
    return Comparison(**{**defaults, **kw})


def test_decide_words():
    ahead = _c([0.50, 0.51, 0.49, 0.50], [0.70, 0.71, 0.69, 0.72])
    same = _c([0.50, 0.51, 0.49, 0.50], [0.50, 0.505, 0.495, 0.51])
    loose = _c([0.2, 0.6, 0.4], [0.3, 0.9, 0.5])
    d_ahead, d_same, d_loose = decide([ahead, same, loose])
    assert d_ahead.word == "b better" and d_same.word == "alike" and d_loose.word == "cannot tell"
    assert decide([_c(ahead.values_a, ahead.values_b, higher_is_better=False)])[0].word == "a better"
    assert d_loose.mdd > abs(d_loose.difference) and "could detect" in d_loose.text()
    assert "Holm p" in d_ahead.text() and d_ahead.interval_label == "95 % Welch t interval"


def test_a_decision_is_an_outcome_and_its_word_is_rendered_from_it():
    """Reports branch on the outcome and the winner, never on the word's spelling: an arm named like a verdict
    (``"x better"``, ``"alike"``) is still an arm."""
    from posembed.stats.verdict import Outcome

    values = (0.50, 0.51, 0.49, 0.50), (0.70, 0.71, 0.69, 0.72)
    d = decide([Comparison("x", "alike", "x better", *values, True, 0.1), _c(*values, primary=False)])
    assert d[0].outcome is Outcome.B_BETTER and d[0].winner == "x better" and d[0].word == "x better better"
    assert d[0].claims and not d[1].claims and d[1].outcome is Outcome.EXPLORATORY and d[1].word is None
    assert d[0].decides and not d[1].decides
    behind = decide([Comparison("y", "alike", "b", *values, False, 0.1)])[0]
    assert behind.outcome is Outcome.A_BETTER and behind.winner == "alike" and behind.outcome is not Outcome.ALIKE
    assert d[0].text() == f"{d[0].word} ({d[0].details()})" and d[1].text().startswith("exploratory (b - a = ")


def test_a_claim_needs_its_adjusted_p_below_alpha_not_at_it():
    from posembed.stats.verdict import Estimate, Outcome, _outcome

    c, e = _c([0.5, 0.6], [0.7, 0.8]), Estimate(0.2, (0.1, 0.3), 0.01, 0.05, 2.0, "t")
    assert _outcome(c, e, 0.05, 0.5, 0.05) is Outcome.CANNOT_TELL
    assert _outcome(c, e, 0.5, 0.05, 0.05) is Outcome.CANNOT_TELL
    assert _outcome(c, e, 0.049, 0.5, 0.05) is Outcome.B_BETTER and _outcome(c, e, 0.5, 0.049, 0.05) is Outcome.ALIKE


def test_only_a_cannot_tell_names_the_seeds_it_would_need():
    import dataclasses

    from posembed.stats.verdict import Outcome, seeds_clause

    loose = decide([_c([0.0, 0.2], [0.1, 1.9, -1.2, 2.3, 0.4, -0.8, 1.5, 0.9], margin=0.01)])[0]
    assert loose.outcome is Outcome.CANNOT_TELL and loose.seeds_needed is not None
    assert loose.claims and not loose.decides
    said = f"; about {loose.seeds_needed} seeds per arm would detect the difference seen"
    assert seeds_clause(loose) == said and said in loose.text()
    decided = dataclasses.replace(loose, outcome=Outcome.B_BETTER)
    assert seeds_clause(decided) == "" and "seeds per arm" not in decided.text()


def test_exploratory_comparisons_get_numbers_and_no_word_and_do_not_enter_the_family():
    ahead = _c([0.50, 0.51, 0.49, 0.50], [0.70, 0.71, 0.69, 0.72])
    alone = decide([ahead])[0]
    first, extra = decide([ahead, _c(ahead.values_a, ahead.values_b, primary=False)])
    assert extra.word is None and math.isnan(extra.p_adjusted) and extra.p == first.p
    assert first.p_adjusted == alone.p_adjusted  # the exploratory one costs the family nothing
    assert "exploratory" in extra.text()


def test_log_scale_tests_the_log_ratio():
    d = decide([_c([10.0, 11.0, 12.0], [20.0, 22.0, 24.0], log_scale=True, higher_is_better=False)])[0]
    assert d.difference == pytest.approx(math.log(2.0))
    assert d.word == "a better"


def test_untestable_comparisons_cannot_tell():
    one_seed, flat = decide([_c([0.5], [0.9]), _c([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])])
    assert one_seed.word == flat.word == "cannot tell"
    assert math.isnan(one_seed.mdd) and "fewer than two" in one_seed.note
    assert "no spread" in flat.note
    tested = _c([0.50, 0.51, 0.49, 0.50], [0.70, 0.71, 0.69, 0.72])
    assert decide([tested, _c([0.0, 0.0], [0.0, 0.0])])[0].p_adjusted == decide([tested])[0].p_adjusted


def test_a_difference_shown_wins_over_equivalence():
    tight = _c([0.500, 0.501, 0.499, 0.500, 0.5005], [0.520, 0.521, 0.519, 0.520, 0.5205], margin=0.1)
    d = decide([tight])[0]
    assert d.p_adjusted < 0.05 and d.p_equivalence_adjusted < 0.05 and d.word == "b better"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(test="ranks"), "test must be one of"),
        (dict(margin=0.0), "margin must be"),
        (dict(margin=math.inf), "margin must be"),
        (dict(values_a=(1.0, math.nan)), "must be finite"),
        (dict(values_a=(1.0, -1.0), log_scale=True), "log_scale needs values > 0"),
        (dict(values_a=(1.0, 2.0, 3.0), test="paired"), "pairs the units"),
        (dict(values_a=(1.0, 0.5), test="mcnemar"), "0/1 hits"),
        (dict(values_a=(1.0, 0.0), values_b=(1.0, 1.0), test="mcnemar", log_scale=True), "no log scale"),
    ],
)
def test_bad_comparisons_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _c(kwargs.pop("values_a", (1.0, 2.0)), kwargs.pop("values_b", (1.0, 2.0)), **kwargs)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="p-values must lie in"):
        stats.holm([0.5, 1.5])
    with pytest.raises(ValueError, match="margin must be > 0"):
        stats.tost(stats.welch(A, B), 0.0)
    with pytest.raises(ValueError, match="alpha and power"):
        stats.min_detectable_difference(1.0, 3.0, alpha=0.0)
    with pytest.raises(ValueError, match="alpha must be"):
        decide([], alpha=1.0)
    with pytest.raises(ValueError, match="pairs the values"):
        stats.paired_t([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="pairs the hits"):
        stats.mcnemar([1], [1, 0])


@pytest.mark.parametrize(
    "value, threshold, shown",
    [(1.4976, 1.5, "1.498"), (1.5024, 1.5, "1.502"), (1.49999, 1.5, "1.49999"), (0.7, 1.5, "0.7")],
)
def test_distinguishing_prints_the_side_of_the_threshold(value, threshold, shown):
    assert stats.distinguishing(value, [threshold]) == shown
    assert (float(shown) < threshold) == (value < threshold)


# --- error rates by simulation (nothing differs) -----------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("test", ["welch", "paired"])
def test_per_comparison_false_positive_is_at_most_5_percent(test, n):
    rng = np.random.default_rng(100 + n)
    draws = rng.normal(size=(DRAWS, 2, n))
    run = stats.welch if test == "welch" else stats.paired_t
    rate = np.mean([run(a, b).p < 0.05 for a, b in draws])
    print(f"{test} n={n}: false 'better' in {rate:.2%}")
    assert _at_most(rate, 0.05)


def test_mcnemar_false_positive_is_at_most_5_percent():
    rng = np.random.default_rng(7)
    hits = rng.random(size=(DRAWS, 2, 50)) < 0.3
    rate = np.mean([stats.mcnemar(a, b).p < 0.05 for a, b in hits.astype(float)])
    print(f"mcnemar 50 queries: false 'better' in {rate:.2%}")
    assert _at_most(rate, 0.05)


@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 5])
def test_false_alike_at_the_margin_is_at_most_5_percent(n):
    """The true difference sits exactly on the margin: "alike" would be false."""
    rng = np.random.default_rng(200 + n)
    margin = 0.8
    draws = rng.normal(size=(DRAWS, 2, n))
    rate = np.mean([stats.tost(stats.welch(a, b + margin), margin) < 0.05 for a, b in draws])
    print(f"tost n={n}: false 'alike' in {rate:.2%}")
    assert _at_most(rate, 0.05)


@pytest.mark.slow
@pytest.mark.parametrize("n, family", [(3, 4), (5, 6)])
def test_family_wise_false_claims_are_at_most_5_percent(n, family):
    """A family of primary comparisons, nothing differing: any "better" is false; "alike" is
    false where the true difference is the margin (half the comparisons)."""
    rng = np.random.default_rng(300 + n)
    margin, wrong = 0.8, 0
    for _ in range(DRAWS // 2):
        draws = rng.normal(size=(family, 2, n))
        shifts = [margin * (k % 2) for k in range(family)]
        family_ = [
            _c(a, b + s, margin=margin, test="paired" if k % 3 == 0 else "welch")
            for k, ((a, b), s) in enumerate(zip(draws, shifts))
        ]
        words = [d.word for d in decide(family_)]
        wrong += any(w.endswith("better") if s == 0 else w == "alike" for w, s in zip(words, shifts))
    rate = wrong / (DRAWS // 2)
    print(f"family of {family}, n={n}: a false claim in {rate:.2%} of reports")
    assert _at_most(rate, 0.05, DRAWS // 2)


def test_power_at_a_stated_difference():
    """Five seeds per arm, alone in its family (level 5 %), a true difference of 2 standard
    deviations: found in about 80 % of runs, as :func:`min_detectable_difference` predicts
    (1.94 sd at 8 degrees of freedom; Welch's are fewer, so a little less power)."""
    rng = np.random.default_rng(11)
    n, delta = 5, 2.0
    draws = rng.normal(size=(DRAWS // 2, 2, n))
    found = np.mean([d.word == "b better" for a, b in draws for d in decide([_c(a, b + delta)])])
    predicted = stats.min_detectable_difference(math.sqrt(2 / n), 8.0, 0.05)  # df at equal variances
    print(f"power at {delta} sd with {n} seeds: {found:.1%} (MDD at 80 %: {predicted:.2f} sd)")
    assert 0.70 <= found <= 0.90 and abs(predicted - delta) < 0.1


def test_seeds_to_detect_is_the_first_count_whose_test_has_the_power():
    """At the count it names, simulated seed-paired t tests of a true difference reject about 80 % of
    the time; one seed fewer falls short of what the power function says."""
    from posembed.stats.power import min_detectable_difference, seeds_to_detect

    sigma, difference, units = 1.0, 0.9, 4
    n = seeds_to_detect(difference, se=sigma / math.sqrt(units), df=units - 1, units=units, test="paired", alpha=0.05)
    assert n is not None and n > units
    assert min_detectable_difference(sigma / math.sqrt(n), n - 1, 0.05) <= difference
    assert min_detectable_difference(sigma / math.sqrt(n - 1), n - 2, 0.05) > difference
    rng = random.Random(7)
    runs = 2000
    hits = sum(
        stats.paired_t([0.0] * n, [rng.gauss(difference, sigma) for _ in range(n)]).p < 0.05 for _ in range(runs)
    )
    assert abs(hits / runs - 0.80) < 3 * math.sqrt(0.8 * 0.2 / runs) + 0.02, hits / runs


def test_seeds_to_detect_says_nothing_it_cannot_say():
    from posembed.stats.power import MAX_SEEDS, seeds_to_detect

    assert seeds_to_detect(0.0, se=1.0, df=2.0, units=3, test="paired", alpha=0.05) is None  # no difference
    assert seeds_to_detect(0.5, se=1.0, df=2.0, units=3, test="mcnemar", alpha=0.05) is None  # a query is the unit
    assert seeds_to_detect(0.5, se=0.0, df=2.0, units=3, test="paired", alpha=0.05) is None  # no noise estimate
    assert seeds_to_detect(1e-6, se=1.0, df=2.0, units=3, test="welch", alpha=0.05) is None  # past MAX_SEEDS
    assert seeds_to_detect(100.0, se=1.0, df=2.0, units=3, test="welch", alpha=0.05) == 3  # already detectable
    assert MAX_SEEDS == 1000


# --- issue 40 item 7: the rule's smaller defects ------------------------------------------------


def test_a_zero_standard_error_detects_nothing_it_can_state():
    """No spread is no test: its MDD is n/a (NaN), not "could detect 0"."""
    assert math.isnan(stats.min_detectable_difference(0.0, 4.0))
    flat = decide([_c([1.0, 2.0, 3.0], [1.5, 2.5, 3.5], test="paired")])[0]  # every pair differs by 0.5 exactly
    assert flat.word == "cannot tell" and flat.note == "no spread to test" and math.isnan(flat.mdd)
    assert "could detect n/a" in flat.text() and "could detect 0" not in flat.text()


def test_decision_rows_render_an_untestable_mdd_as_n_a():
    from posembed.lab.report.questions import decision_row

    flat = decide([_c([1.0, 2.0, 3.0], [1.5, 2.5, 3.5], test="paired")])[0]
    assert decision_row(flat)[-1] == "n/a"


@pytest.mark.parametrize(
    "test, a, b",
    [
        # the same 3 % perplexity ratio on every seed, on the log scale: the differences agree to the last bits
        ("paired", [math.log(6.0), math.log(6.1), math.log(6.2)], [math.log(6.18), math.log(6.283), math.log(6.386)]),
        ("welch", [0.1 + 0.2, 0.3, 0.3], [0.4, 0.1 + 0.3, 0.4]),  # each arm constant up to rounding
    ],
)
def test_float_jitter_is_no_spread(test, a, b):
    """A difference constant up to float rounding is not a measured difference: no p, no winner."""
    d = decide([_c(a, b, test=test)])[0]
    assert d.word == "cannot tell" and math.isnan(d.p) and d.note == "no spread to test" and math.isnan(d.mdd)
    assert d.difference == pytest.approx(statistics.fmean(b) - statistics.fmean(a))


def test_a_small_real_spread_is_still_tested():
    """Spreads far below the data's noise but far above rounding are measurements: tested as before."""
    a = [1.0, 2.0, 3.0, 4.0]
    b = [x + 0.5 + e for x, e in zip(a, (1e-9, -1e-9, 2e-9, 0.0))]
    assert stats.paired_t(a, b).p == pytest.approx(sps.ttest_rel(b, a).pvalue, rel=1e-12)
    assert decide([_c(a, b, test="paired")])[0].word == "b better"


@pytest.mark.slow
@pytest.mark.parametrize("pairs", [60, 100])
@pytest.mark.parametrize("only_a", [0.0, 0.02, 0.1])
def test_mcnemar_false_alike_at_the_margin_is_at_most_5_percent(pairs, only_a):
    """Paired hits whose true difference is the margin (arm b alone hits ``margin`` more often than
    arm a alone, at several discordance levels): "alike" is false. The z approximation said it in
    14.1 % (60 pairs) and 11.2 % (100) of these runs at p(a only) = 0; the exact test holds 5 %."""
    rng = np.random.default_rng(400 + pairs + int(only_a * 100))
    margin = 0.1
    counts = rng.multinomial(pairs, [only_a, only_a + margin, 1 - 2 * only_a - margin], size=DRAWS)
    wrong = 0
    for x_a, x_b, _ in counts:
        a = [1.0] * x_a + [0.0] * x_b + [0.0] * (pairs - x_a - x_b)
        b = [0.0] * x_a + [1.0] * x_b + [0.0] * (pairs - x_a - x_b)
        wrong += stats.tost(stats.mcnemar(a, b), margin) < 0.05
    rate = wrong / DRAWS
    print(f"mcnemar {pairs} pairs, p(a only) = {only_a}: false 'alike' in {rate:.2%}")
    assert _at_most(rate, 0.05)


def test_mcnemar_equivalence_is_the_largest_null_probability():
    """The exact p is the trinomial probability of the region "as close as seen", maximised over
    the nuisance: checked by brute-force enumeration on a fine grid, both sides."""
    from posembed.stats.verdict import _score_z

    pairs, margin, seen = 30, 0.2, (2, 3)
    x_a, x_b = np.meshgrid(np.arange(pairs + 1), np.arange(pairs + 1), indexing="ij")
    valid = x_a + x_b <= pairs

    def side(sa, sb, a_, b_):
        region = valid & (_score_z(a_, b_, pairs, margin) <= _score_z(sa, sb, pairs, margin) + 1e-12)
        best = 0.0
        for p_a in np.linspace(0, (1 - margin) / 2, 2001):
            probability = sps.multinomial.pmf(
                np.stack([a_, b_, pairs - a_ - b_], -1)[region], pairs, [p_a, p_a + margin, 1 - 2 * p_a - margin]
            )
            best = max(best, probability.sum())
        return best

    expected = max(side(*seen, x_a, x_b), side(seen[1], seen[0], x_a, x_b))
    assert stats.mcnemar_equivalence(*seen, pairs, margin) == pytest.approx(expected, rel=1e-4)
    assert stats.mcnemar_equivalence(*seen, pairs, margin) >= expected * (1 - 1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 400), st.floats(0.005, 0.95))
def test_the_score_statistic_rises_with_the_pairs_b_wins(pairs, margin):
    """The exact test's region is "only_b <= bound" at each only_a: it needs this monotonicity."""
    from posembed.stats.verdict import _score_z

    x_a = np.arange(pairs + 1)[:, None]
    x_b = np.arange(pairs + 1)[None, :]
    z = _score_z(x_a, x_b, pairs, margin)
    for k in range(pairs + 1):
        assert np.all(np.diff(z[k, : pairs - k + 1]) > 0)


def test_mcnemar_equivalence_shows_alike_from_many_concordant_pairs():
    """100 pairs, none discordant: alike within 0.1 (the z approximation had no standard error)."""
    assert stats.tost(stats.mcnemar([1.0] * 50 + [0.0] * 50, [1.0] * 50 + [0.0] * 50), 0.1) < 0.001


def test_welch_seeds_to_detect_reads_both_arms():
    """2 seeds of a quiet arm against 8 of a noisy one: at n seeds per arm the standard error is
    sqrt((var_a + var_b) / n) with Welch-Satterthwaite df; the count named is the first whose
    noncentral-t power (statsmodels) reaches 80 %. Arm a's count alone gave another answer."""
    from statsmodels.stats.power import ttest_power

    a, b = [0.0, 0.2], [0.1, 1.9, -1.2, 2.3, 0.4, -0.8, 1.5, 0.9]
    d = decide([_c(a, b, margin=0.01)])[0]
    assert d.word == "cannot tell" and d.seeds_needed is not None
    var_a, var_b = statistics.variance(a), statistics.variance(b)

    def power(n):
        se = math.sqrt((var_a + var_b) / n)
        df = (var_a + var_b) ** 2 / ((var_a**2 + var_b**2) / (n - 1))
        return ttest_power(abs(d.difference) / se, 1, 0.05, df=df)

    n = d.seeds_needed
    assert power(n) >= 0.80 - 1e-9 and power(n - 1) < 0.80 and n == 45  # arm a's count alone said 12


def test_an_untestable_welch_comparison_of_unequal_arms_needs_no_seed_count():
    one_seed, flat = decide([_c([0.5], [0.9, 1.0, 1.1]), _c([0.5, 0.5], [0.9, 0.9, 0.9])])
    assert one_seed.word == flat.word == "cannot tell" and one_seed.seeds_needed is flat.seeds_needed is None


def test_seeds_to_detect_refuses_unequal_welch_arms_without_their_variances():
    from posembed.stats.power import seeds_to_detect

    with pytest.raises(ValueError, match="needs the arms' variances"):
        seeds_to_detect(0.5, se=1.0, df=2.0, units=3, units_b=5, test="welch", alpha=0.05)
    with pytest.raises(ValueError, match="variances are a Welch test"):
        seeds_to_detect(0.5, se=1.0, df=2.0, units=3, variances=(1.0, 1.0), test="paired", alpha=0.05)


@pytest.mark.parametrize(
    "args, message",
    [((0, 0, 10, 1.0), "must be in \\(0, 1\\)"), ((5, 6, 10, 0.1), "sum to at most 10"), ((-1, 0, 10, 0.1), ">= 0")],
)
def test_mcnemar_equivalence_refuses_bad_counts(args, message):
    with pytest.raises(ValueError, match=message):
        stats.mcnemar_equivalence(*args)


def test_mcnemar_margin_must_be_a_difference_of_hit_rates():
    with pytest.raises(ValueError, match="must be < 1"):
        _c((1.0, 0.0), (1.0, 1.0), test="mcnemar", margin=1.0)


# --- the library calls agree with statsmodels --------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12))
def test_holm_is_statsmodels_holm(ps):
    from statsmodels.stats import multitest

    # multipletests runs gc.collect() on every call: about a second each on a test worker's grown heap
    with mock.patch("gc.collect"):
        expected = list(multitest.multipletests(ps, method="holm")[1])
    assert stats.holm(ps) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("df", [2.0, 6.0, 30.0, math.inf])
def test_the_mdd_is_where_statsmodels_power_is_80_percent(df):
    from statsmodels.stats.power import normal_power, ttest_power

    mdd = stats.min_detectable_difference(0.3, df, 0.01)
    found = normal_power(mdd / 0.3, 1, 0.01) if math.isinf(df) else ttest_power(mdd / 0.3, 1, 0.01, df=df)
    assert found == pytest.approx(0.80, abs=1e-9)
