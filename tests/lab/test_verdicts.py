"""The verdict rules of :mod:`posembed.lab.verdicts` at and around their thresholds."""

from __future__ import annotations

import math

import pytest

from posembed.lab import verdicts as rules
from posembed.lab.report_questions import Comparison
from posembed.lab.report_tables import Stat


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


def test_comparison_verdict_is_the_pair_rule():
    a, b = Stat((0.50, 0.52)), Stat((0.60, 0.62))
    c = Comparison("charlm", "x", "val_loss", 8, a, b)  # lower is better: b's larger loss loses
    assert c.verdict("A", "B") == rules.pair_verdict(c.delta, c.noise, False, "A", "B") == "A better"
    assert c.noise == rules.noise(a.std, b.std, 2, 2)
    assert rules.vaswani([True, True]) == "agree" and rules.vaswani([]) == "cannot tell"
