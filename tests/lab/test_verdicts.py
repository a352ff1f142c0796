"""The verdict rules of :mod:`posembed.lab.verdicts` at and around their thresholds."""

from __future__ import annotations

import math

import pytest

from posembed.lab import verdicts as rules
from posembed.lab.report.tables import Stat


@pytest.mark.parametrize(("learned", "sinusoidal", "alibi", "expected"), [
    (1.50, 1.60, 0.92, "agree"),           # both fail (the threshold itself fails), ALiBi flattest
    (1.50, 1.42, 0.92, "partly"),          # sinusoidal under 1.5: does not fail
    (1.10, 1.20, 1.30, "disagree"),        # nothing fails, ALiBi steepest
    (math.inf, 2.0, 0.935, "agree"),       # learned past its table: fails; 0.935 within 2 % of 0.92 (rope)
])
def test_press_follows_fail_ratio_and_flat_tolerance(learned, sinusoidal, alibi, expected):
    ratios = {"learned": learned, "sinusoidal": sinusoidal, "rope": 0.92 if alibi > 0.92 else 2.0, "alibi": alibi}
    assert rules.press(ratios) == expected


def test_press_flattest_is_among_the_schemes_that_paper_compared():
    ratios = {"learned": 2.0, "sinusoidal": 2.0, "alibi": 1.0}
    assert rules.press({**ratios, "fire": 0.5, "kerple": 0.7}) == "agree"  # later schemes are not in the claim
    assert rules.press({**ratios, "rope": 0.5}) == "partly"
    assert rules.press({"learned": 2.0, "rope": 0.5}) == "cannot tell"  # no ALiBi


def test_kazemnejad_combines_copy_and_reverse():
    tied = {"nope": 0.0, "rope": 0.0}
    assert rules.kazemnejad({"copy": tied, "reverse": tied}) == "cannot tell"
    assert rules.kazemnejad({"copy": {"t5_bias": 0.5, "rope": 0.49, "learned": 0.1}, "reverse": tied}) == "agree"
    assert rules.kazemnejad({"copy": {"nope": 0.5, "rope": 0.4}, "reverse": {"nope": None, "rope": 0.4}}) == "partly"


def test_the_one_verdict_rule_is_reexported():
    """The lab's verdicts module hands out posembed.stats' rule itself, not a copy of it."""
    from posembed import stats

    for name in ("Comparison", "Decision", "decide", "describe", "holm", "welch", "paired_t", "mcnemar", "tost",
                 "min_detectable_difference", "distinguishing"):
        assert getattr(rules, name) is getattr(stats, name) and name in rules.__all__
    assert rules.vaswani([True, True]) == "agree" and rules.vaswani([]) == "cannot tell"


def test_bootstrap_interval_is_the_exact_percentile_interval_of_the_resampled_means():
    # 2 seeds: 4 resamples, means a, (a+b)/2 twice, b: a quarter of the mass on each end
    assert rules.bootstrap_interval([0.3, 0.1]) == (0.1, 0.3)
    # 5 values, three 0 and two 1: P(mean = 0) = (3/5)^5 = 0.078 >= 2.5 %, so the low end is 0;
    # P(mean >= 0.8) = P(4 or 5 ones) = 5 (2/5)^4 (3/5) + (2/5)^5 = 0.087 >= 2.5 %, P(mean = 1) = 0.0102 < 2.5 %
    low, high = rules.bootstrap_interval([0, 0, 0, 1, 1])
    assert (low, high) == (0.0, pytest.approx(0.8))
    # beyond 5 values: a seeded draw, the same interval every call, inside the range and around the mean
    values = [0.1 * i for i in range(8)]
    first = rules.bootstrap_interval(values)
    assert first == rules.bootstrap_interval(values)
    assert 0.0 < first[0] < 0.35 < first[1] < 0.7
    assert rules.bootstrap_interval([2.0]) == (2.0, 2.0)


@pytest.mark.parametrize("bad", [[], None])
def test_bootstrap_interval_refuses_no_values(bad):
    with pytest.raises((ValueError, TypeError)):
        rules.bootstrap_interval(bad)


def test_bootstrap_interval_refuses_a_confidence_outside_0_1():
    with pytest.raises(ValueError, match="confidence must be in \\(0, 1\\), got 1.5"):
        rules.bootstrap_interval([1.0, 2.0], confidence=1.5)


@pytest.mark.parametrize(("a", "b", "expected"), [
    ((0.50, 0.52), (0.60, 0.62), "B better"),       # apart
    ((0.50, 0.52), (0.51, 0.62), "cannot tell"),    # B's low end inside A's interval
    ((0.50, 0.51), (0.505, 0.515), "alike"),        # every allowed difference within the 0.02 floor
    ((0.50, 0.52), (0.53, 0.531), "B better"),      # apart by more than the floor's width
    ((0.50,), (0.60, 0.62), "cannot tell (1 seed)"),
    ((), (0.60, 0.62), "n/a"),
])
def test_interval_verdict(a, b, expected):
    A, B = rules.Interval.of(a), rules.Interval.of(b)
    assert rules.interval_verdict(A, B, True, "A", "B") == expected


def test_press_intervals_judge_each_part_on_its_interval():
    r = lambda *v: rules.Interval.of(list(v))  # noqa: E731
    apart = {"learned": r(1.6, 1.7), "sinusoidal": r(1.6, 1.8), "rope": r(1.2, 1.3), "alibi": r(0.9, 0.95)}
    assert rules.press_parts(apart) == {"learned fails": "agree", "sinusoidal fails": "agree", "alibi flattest": "agree"}
    assert rules.press_intervals(apart) == "agree"
    astride = {**apart, "learned": r(1.4, 1.6)}  # learned's interval straddles the 1.5 threshold
    assert rules.press_parts(astride)["learned fails"] == "cannot tell" and rules.press_intervals(astride) == "cannot tell"
    steeper = {**apart, "rope": r(0.5, 0.6)}  # RoPE wholly below ALiBi
    assert rules.press_parts(steeper)["alibi flattest"] == "disagree" and rules.press_intervals(steeper) == "partly"
    close = {**apart, "rope": r(0.93, 1.0)}  # overlaps ALiBi's interval
    assert rules.press_parts(close)["alibi flattest"] == "cannot tell"
    one_seed = {"learned": r(2.0), "sinusoidal": r(2.0), "alibi": r(0.9)}
    assert rules.press_intervals(one_seed) == "cannot tell"
    assert rules.press_intervals({"learned": r(math.inf, math.inf), "alibi": r(0.9, 0.95)}) == "agree"


def test_kazemnejad_intervals():
    r = lambda *v: rules.Interval.of(list(v))  # noqa: E731
    apart = {"nope": r(0.5, 0.6), "rope": r(0.1, 0.2)}
    assert rules.kazemnejad_task_intervals(apart) == "agree"
    assert rules.kazemnejad_task_intervals({"nope": r(0.1, 0.2), "rope": r(0.5, 0.6)}) == "disagree"
    assert rules.kazemnejad_task_intervals({"nope": r(0.3, 0.6), "rope": r(0.1, 0.4)}) == "cannot tell"
    assert rules.kazemnejad_task_intervals({"nope": r(0.0, 0.0), "rope": r(0.0, 0.01)}) == "cannot tell"  # all tied
    assert rules.kazemnejad_task_intervals({"nope": r(0.5), "rope": r(0.1)}) == "cannot tell"  # one seed
    assert rules.kazemnejad_task_intervals({"nope": r(0.5, 0.6), "rope": r(0.1, 0.2), "learned": r()}) == "agree"
    assert rules.kazemnejad_intervals({"copy": apart, "reverse": {"nope": r(0.3, 0.6), "rope": r(0.1, 0.4)}}) \
        == "cannot tell"
