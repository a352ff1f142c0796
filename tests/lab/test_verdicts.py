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


def test_paper_verdicts_are_one_type_that_renders_as_its_word():
    import json

    assert rules.combine_strict([rules.AGREE, rules.DISAGREE]) is rules.PaperVerdict.PARTLY
    assert rules.no_difference(True, False) is rules.AGREE and f"{rules.CANNOT_TELL}" == "cannot tell"
    assert json.dumps([rules.PARTLY]) == '["partly"]' and str(rules.DISAGREE) == "disagree"


def test_the_vaswani_beyond_check_reads_the_offset_not_the_arm_label():
    """Whether the difference lies beyond the margin comes from the comparison's declared offset; the shifted
    arm's label is for people (it once was parsed back into a number)."""
    from posembed.lab.report.decisions import beyond_margin

    a, b = (1.00, 1.01, 0.99, 1.00), (1.10, 1.12, 1.09, 1.11)
    for offset, beyond in ((0.05, True), (-0.05, False)):
        shifted = tuple(v - offset for v in b)
        c = rules.Comparison(
            "v", "learned", "sinusoidal, shifted", a, shifted, False, 0.05, test="paired", offset=offset
        )
        (d,) = rules.decide([c])
        assert d.winner is not None and beyond_margin(d) is beyond


def test_a_winner_is_said_to_be_within_the_margin_only_when_it_is_shown_or_estimated_strictly_inside():
    import dataclasses

    from posembed.lab.report.rows import verdict_text
    from posembed.stats.verdict import ALPHA

    a, b = (1.00, 1.01, 0.99, 1.00), (1.10, 1.12, 1.09, 1.11)
    (d,) = rules.decide([rules.Comparison("x", "a", "b", a, b, True, 0.1, test="paired")])
    assert d.winner == "b"
    at_the_edges = dataclasses.replace(d, difference=0.1, p_equivalence_adjusted=ALPHA)
    assert verdict_text(at_the_edges) == "b better"
    inside = dataclasses.replace(d, difference=0.0999, p_equivalence_adjusted=ALPHA)
    assert verdict_text(inside).endswith("margin as estimated (the interval reaches past it)")
    shown = dataclasses.replace(d, difference=0.1, p_equivalence_adjusted=0.049)
    assert verdict_text(shown) == "b better, by less than the 0.1 margin"
