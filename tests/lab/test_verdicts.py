"""The verdict words of :mod:`posembed.lab.verdicts`: one rule (:mod:`posembed.stats.verdict`), the papers'
thresholds."""

from __future__ import annotations

import pytest

from posembed.lab import verdicts as rules


def test_the_one_verdict_rule_is_reexported():
    """The lab's verdicts module hands out posembed.stats.verdict' rule itself, not a copy of it."""
    from posembed.stats import verdict as stats

    for name in (
        "Comparison",
        "Decision",
        "decide",
        "describe",
        "holm",
        "welch",
        "paired_t",
        "mcnemar",
        "tost",
        "min_detectable_difference",
        "distinguishing",
    ):
        assert getattr(rules, name) is getattr(stats, name) and name in rules.__all__


@pytest.mark.parametrize(
    "old",
    [
        "Interval",
        "bootstrap_interval",
        "interval_verdict",
        "pair_verdict",
        "noise",
        "press",
        "press_intervals",
        "kazemnejad",
        "kazemnejad_intervals",
        "vaswani",
        "vaswani_intervals",
        "combine",
    ],
)
def test_no_second_verdict_rule_is_left_beside_it(old):
    """The mean and interval-overlap rules (a test at alpha 1/3 with 2 seeds, issue 33) are gone."""
    assert not hasattr(rules, old)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (["agree", "agree"], "agree"),
        (["disagree"], "disagree"),
        (["agree", "disagree"], "partly"),
        (["agree", "cannot tell"], "cannot tell"),
        (["agree", rules.ONE_SEED], "cannot tell"),
        ([], "cannot tell"),
    ],
)
def test_combine_strict(parts, expected):
    assert rules.combine_strict(parts) == expected


def test_nanogpt_is_within_the_tolerance_either_side():
    assert rules.nanogpt(1.93, 1.886, 0.05) == "within" and rules.nanogpt(1.836, 1.886, 0.05) == "within"
    assert rules.nanogpt(1.94, 1.886, 0.05) == "OUTSIDE" and rules.nanogpt(1.83, 1.886, 0.05) == "OUTSIDE"
