"""The context report's verdicts under the one rule (posembed.stats.verdict.decide): primary comparisons
named before the run, seed-paired tests on log perplexity, "alike" only by TOST, "cannot tell" with
the detectable difference; passkey retrieval counted over seeds; simulated whole reports."""

from __future__ import annotations

import math
import random
import re
import statistics

import pytest

from posembed.lab.context.published import CLAIMS
from posembed.lab.context.store import NO_DEPTH
from posembed.lab.report.context import Results, context_page
from posembed.lab.report.context_verdicts import (
    PASSKEY_MARGIN,
    PERPLEXITY_MARGIN,
    PRIMARY,
    RETRIEVES,
    retrieval_counts,
    verdicts,
)

BODY = {
    "name": "context",
    "context": 96,
    "finetune_scale": 4,
    "finetune_steps": 100,
    "references": ["alibi"],
    "dim": 64,
    "depth": 2,
    "steps": 2000,
    "passkey_only_steps": 800,
    "passkey_fraction": 0.5,
}
#: the (model, method, length, metric) cells the six primary comparisons read, in CLAIMS' order
CELLS = {
    "yarn_vs_pi_no_ft": (("rope", "yarn", 768, "perplexity"), ("rope", "linear", 768, "perplexity")),
    "scaling_vs_extrapolation": (("rope", "linear", 768, "perplexity"), ("rope", "extrapolate", 768, "perplexity")),
    "alibi_vs_rope": (("alibi", "none", 768, "perplexity"), ("rope", "extrapolate", 768, "perplexity")),
    "yarn_vs_pi_passkey_ft": (
        ("rope+yarn@4x", "yarn", 384, "passkey_mean"),
        ("rope+linear@4x", "linear", 384, "passkey_mean"),
    ),
    "pi_vs_yarn_ppl_ft": (("rope+yarn@4x", "yarn", 384, "perplexity"), ("rope+linear@4x", "linear", 384, "perplexity")),
    "yarn_vs_pi_beyond_ft": (
        ("rope+yarn@4x", "yarn", 768, "perplexity"),
        ("rope+linear@4x", "linear", 768, "perplexity"),
    ),
}


def _row(model, method, length, metric, value, seed, depth=NO_DEPTH) -> dict:
    return {
        "model": model,
        "method": method,
        "length": length,
        "metric": metric,
        "depth": depth,
        "value": value,
        "seed": seed,
    }


def _results(cells: dict[tuple, list[float]]) -> Results:
    """A study holding ``cells``: (model, method, length, metric) -> one value per seed 0, 1, ..."""
    rows = [_row(*cell, value, seed) for cell, values in cells.items() for seed, value in enumerate(values)]
    rows.append(_row("rope", "extrapolate", 96, "perplexity", 6.0, 0))
    return Results(rows, BODY)


def _verdict(results: Results, key: str) -> dict:
    return next(row for row, claim in zip(verdicts(results), CLAIMS) if claim.key == key)


def test_the_primary_comparisons_are_the_published_claims_with_stated_margins():
    assert [p.claim.key for p in PRIMARY] == [c.key for c in CLAIMS] == list(CELLS)
    assert {p.margin for p in PRIMARY} == {PERPLEXITY_MARGIN, PASSKEY_MARGIN}
    assert PERPLEXITY_MARGIN == pytest.approx(math.log(1.02)) and PASSKEY_MARGIN == 0.05
    text = context_page(_results({CELLS["yarn_vs_pi_no_ft"][0]: [10.0, 11.0, 12.0]})).markdown()
    assert "The 6 primary comparisons below were named before the run" in text
    assert "holds the chance of any false 'better' or false 'alike' over all of them at 5 %" in text


def test_a_consistent_seed_paired_difference_reproduces_with_the_paired_t_p_over_its_family():
    from scipy import stats

    yarn, linear = [10.0, 14.0, 9.0], [31.0, 40.0, 29.5]  # the seeds vary, the ratio hardly does
    row = _verdict(
        _results({CELLS["yarn_vs_pi_no_ft"][0]: yarn, CELLS["yarn_vs_pi_no_ft"][1]: linear}), "yarn_vs_pi_no_ft"
    )
    assert row["verdict"] == "reproduces" and row["seeds"] == 3
    logs = [math.log(b) - math.log(a) for a, b in zip(yarn, linear)]
    p = stats.ttest_rel([math.log(v) for v in linear], [math.log(v) for v in yarn]).pvalue
    # the family is this one comparison: its difference and its equivalence cannot both hold, so Holm under
    # Shaffer's constraint multiplies by 1 (posembed.stats.verdict.decide)
    assert row["p (Holm)"] == pytest.approx(min(1.0, p), rel=1e-9)
    mean = sum(logs) / 3
    half = stats.t.ppf(0.975, 2) * statistics.stdev(logs) / math.sqrt(3)
    assert row["difference"] == (
        f"perplexity ratio rope / linear : rope / yarn = {math.exp(mean):.3g} "
        f"[{math.exp(mean - half):.3g}, {math.exp(mean + half):.3g}] (95 % paired t interval "
        "over the seed pairs, on log perplexity)"
    )


def test_the_same_means_unpaired_would_differ_pairing_is_by_seed():
    """Shuffling one arm's seeds breaks the pairing: the same six numbers no longer decide."""
    yarn, linear = [10.0, 14.0, 9.0], [12.0, 17.0, 11.0]  # about 1.2x on every seed
    paired = _verdict(
        _results({CELLS["yarn_vs_pi_no_ft"][0]: yarn, CELLS["yarn_vs_pi_no_ft"][1]: linear}), "yarn_vs_pi_no_ft"
    )
    shuffled = _verdict(
        _results({CELLS["yarn_vs_pi_no_ft"][0]: yarn, CELLS["yarn_vs_pi_no_ft"][1]: [17.0, 11.0, 12.0]}),
        "yarn_vs_pi_no_ft",
    )
    assert paired["p (Holm)"] < 0.05 < shuffled["p (Holm)"]


def test_only_the_seeds_both_arms_have_are_paired():
    rows = [_row("rope", "yarn", 768, "perplexity", v, s) for s, v in ((0, 10.0), (1, 11.0), (2, 12.0))]
    rows += [_row("rope", "linear", 768, "perplexity", v, s) for s, v in ((1, 30.0), (2, 33.0), (3, 31.0))]
    row = _verdict(Results(rows, BODY), "yarn_vs_pi_no_ft")
    assert row["seeds"] == 2 and row["ours"] == "rope / yarn 11.5 [11, 12] vs rope / linear 31.5 [30, 33]"


def test_reversed_alike_and_cannot_tell_on_either_side_of_their_rules():
    def verdict(key, a, b):
        return _verdict(_results({CELLS[key][0]: a, CELLS[key][1]: b}), key)["verdict"]

    assert (
        verdict("scaling_vs_extrapolation", [40.0, 50.0, 45.0], [20.0, 24.0, 23.0]) == "does not reproduce (reversed)"
    )
    # equal within a 0.1 % spread: alike (TOST at 2 %); a tie claim reproduces, an ordering does not
    same = ([6.00, 6.10, 6.05], [6.001, 6.102, 6.049])
    assert verdict("pi_vs_yarn_ppl_ft", *same) == "reproduces (alike)"
    assert verdict("yarn_vs_pi_no_ft", *same) == "does not reproduce (alike within 2% of perplexity)"
    # 3 % apart on every seed (+- 0.1 %): outside the 2 % margin, a difference, so the tie does not reproduce
    assert verdict("pi_vs_yarn_ppl_ft", [6.0, 6.1, 6.05], [6.18, 6.29, 6.225]) == "does not reproduce (a difference)"
    # the same ratio on every seed: no spread, nothing to test
    assert (
        verdict("pi_vs_yarn_ppl_ft", [6.0, 6.1], [6.18, 6.283]) == "cannot tell (no spread over the seed pairs to test)"
    )
    noisy = verdict("yarn_vs_pi_no_ft", [10.0, 30.0, 12.0], [30.0, 10.0, 31.0])
    assert re.fullmatch(
        r"cannot tell \(could detect a ratio of [\d.]+x; about \d+ seeds per arm would detect the "
        r"difference seen\)",
        noisy,
    ), noisy
    key = "yarn_vs_pi_passkey_ft"
    assert verdict(key, [1.0, 0.95, 1.0], [0.0, 0.05, 0.0]) == "reproduces"
    assert verdict(key, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]) == "not testable (both retrieve nothing)"
    assert verdict(key, [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]) == (
        "cannot tell (could detect no difference of accuracy (it would take more than 1); about 97 seeds per arm "
        "would detect the difference seen)"
    )
    assert verdict(key, [1.0], [0.0]) == "cannot tell (1 seed)"


def test_retrieval_is_a_count_of_seeds_reaching_the_criterion_not_a_rounded_mean():
    rows = [_row("rope", "extrapolate", 96, "passkey_mean", v, s) for s, v in enumerate((1.0, 0.0125, 0.95))]
    rows += [_row("alibi", "none", 96, "passkey_mean", v, s) for s, v in enumerate((RETRIEVES, 0.79, 0.0))]
    results = Results(rows, BODY)
    assert retrieval_counts(results) == {"rope": (2, 3, [1.0, 0.0125, 0.95]), "alibi": (1, 3, [0.8, 0.79, 0.0])}
    note = context_page(results).retrieval
    assert "rope 2 of 3 seeds (1, 0.013, 0.95); alibi 1 of 3 seeds (0.8, 0.79, 0)" in note  # 0.8 counts, 0.79 not


def _null_study(rng: random.Random, seeds: int, shift: float = 0.0, noise: float = 0.1) -> Results:
    """Every arm of every primary comparison drawn from one distribution per seed (a seed effect
    shared by the arms, as a shared model gives, plus independent noise of sd ``noise`` on log
    perplexity); ``shift`` raises ``rope+linear@4x``'s log perplexity at 4x L by that much."""
    rows = []
    for seed in range(seeds):
        shared = rng.gauss(0.0, 0.3)
        for cell in {cell for pair in CELLS.values() for cell in pair}:
            if cell[3] == "passkey_mean":
                value = min(1.0, max(0.0, 0.5 + shared / 2 + rng.gauss(0.0, 0.2)))
            else:
                value = math.exp(math.log(10.0) + shared + rng.gauss(0.0, noise))
                if cell[:3] == ("rope+linear@4x", "linear", 384):
                    value *= math.exp(shift)
            rows.append(_row(*cell, value, seed))
    return Results(rows, BODY)


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [3, 5])
def test_simulated_reports_where_nothing_differs_make_a_false_directional_claim_at_most_5_percent(seeds):
    rng = random.Random(20261127 + seeds)
    reports, false = 400, 0
    for _ in range(reports):
        words = [row["verdict"] for row in verdicts(_null_study(rng, seeds))]
        # nothing differs: "reproduces" of an ordering, "reversed" and "a difference" are all false;
        # "alike" is true here, and the tie claim's "reproduces (alike)" with it
        false += any(
            w in ("reproduces", "does not reproduce (reversed)", "does not reproduce (a difference)") for w in words
        )
    # at most 5 % up to Monte Carlo error (three binomial standard errors, as tests/test_stats.py): Holm under
    # Shaffer's constraint holds the family-wise rate at 5 % in theory; 3,000 reports gave 5.5 % (3 seeds) and 5.0 %
    assert false / reports <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reports)


@pytest.mark.slow
def test_simulated_reports_call_a_tie_alike_when_it_is_one_and_rarely_when_it_sits_at_the_margin():
    def alike(shift: float, seed: int, reports: int) -> float:
        rng = random.Random(seed)
        return (
            sum(
                _verdict(_null_study(rng, 5, shift=shift, noise=0.005), "pi_vs_yarn_ppl_ft")["verdict"]
                == "reproduces (alike)"
                for _ in range(reports)
            )
            / reports
        )

    assert alike(PERPLEXITY_MARGIN, 7, 300) <= 0.05  # a true 2 % difference: "alike" would be false
    assert alike(0.0, 8, 100) >= 0.5  # no difference and little noise: the test has the power to say so


def test_each_verdict_row_says_whether_it_decided_and_the_warning_reads_that_not_the_words():
    from posembed.lab.report.context_results import too_small

    tie = CELLS["pi_vs_yarn_ppl_ft"]
    decided = _verdict(_results({tie[0]: [6.0, 6.1, 6.05], tie[1]: [6.001, 6.102, 6.049]}), "pi_vs_yarn_ppl_ft")
    assert decided["decided"] is True and decided["verdict"] == "reproduces (alike)"
    noisy = _results(
        {CELLS["yarn_vs_pi_no_ft"][0]: [10.0, 30.0, 12.0], CELLS["yarn_vs_pi_no_ft"][1]: [30.0, 10.0, 31.0]}
    )
    rows = verdicts(noisy)
    assert not any(row["decided"] for row in rows)
    assert "no primary comparison decides" in too_small(noisy, rows)
    reworded = [{**row, "verdict": "reproduces, it seems"} for row in rows]
    assert "no primary comparison decides" in too_small(noisy, reworded)
    assert "no primary comparison decides" not in too_small(noisy, [{**rows[0], "decided": True}])
