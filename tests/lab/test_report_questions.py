"""The verdict logic of the lab report's questions, on trial records with chosen numbers.

The records are the store's own :class:`TrialRecord` with real :class:`TrialConfig` s; only the
evaluated numbers are chosen, so each test can make a paper's claim hold or fail and check the
report computes the matching verdict (no verdict is fixed in the code)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.lab.calibration import NANOGPT_CPU
from posembed.lab.report.calibration import calibration_section, calibration_trials
from posembed.lab.report.questions import Comparison, compare, extrapolation, ranking_scores, variant_question
from posembed.lab.verdicts import NOISE_FLOOR
from posembed.lab.report.tables import LabData, Stat, load_lab
from posembed.lab.sweep.store import TrialRecord
from posembed.lab.tasks import EvalPoint


def record(task: str, scheme: str, values: dict[int, float | None], *, variant: str = "base", seed: int = 0,
           context: int = 8, seconds_per_step: float = 0.01, config=None) -> TrialRecord:
    """A stored-trial record whose judged metric takes ``values`` ({length: value})."""
    cfg = config or dataclasses.replace(NANOGPT_CPU if task == "charlm" else dataclasses.replace(NANOGPT_CPU, task=task),
                                        scheme=scheme, variant=variant, seed=seed, context=context, dim=32)
    evals = []
    for length, value in values.items():
        if task == "charlm":
            evals += [EvalPoint("perplexity", length, value, "" if value else "n/a (table limit)"),
                      EvalPoint("val_loss", length, math.log(value) if value else None, "" if value else "n/a")]
        else:
            evals.append(EvalPoint("exact_match", length, value, "" if value is not None else "n/a (table limit)"))
    return TrialRecord(config=cfg, evals=evals, curve=[(1, 3.0), (2, 2.0)], drift=None, num_params=1000, final_loss=2.0,
                       seconds=10 * seconds_per_step, seconds_per_step=seconds_per_step, world_size=1, checkpoint=None,
                       finished_at="2026-01-01T00:00:00+00:00")


def lab(*records: TrialRecord) -> LabData:
    return LabData(Path("unused"), {"name": "synthetic"}, list(records))


def q6(*records: TrialRecord) -> str:
    return calibration_section(lab(*records)).answer


def charlm(scheme: str, at_l: float, at_8l: float, seed: int = 0) -> TrialRecord:
    return record("charlm", scheme, {8: at_l, 16: (at_l + at_8l) / 2, 64: at_8l}, seed=seed)


def charlm_seeds(scheme: str, at_l: float, at_8l: float, spread: float = 0.01) -> list[TrialRecord]:
    """Two seeds whose perplexity at 8 L is ``at_8l`` -/+ ``spread`` (relative): ratios a little apart."""
    return [charlm(scheme, at_l, at_8l * (1 + sign * spread), seed=s) for s, sign in enumerate((-1, 1))]


def test_nanogpt_calibration_verdict_and_time_per_iteration():
    cal = dataclasses.replace(NANOGPT_CPU)
    inside = record("charlm", "learned", {}, config=cal, seconds_per_step=0.0512)
    inside.evals.append(EvalPoint("val_loss", 64, 1.90))
    assert calibration_trials(lab(inside)) == [inside]
    assert "val loss 1.9000 vs 1.886 ± 0.05: within, 51.2 ms/iteration" in q6(inside)
    outside = dataclasses.replace(inside, evals=[EvalPoint("val_loss", 64, 1.95)])
    assert "val loss 1.9500 vs 1.886 ± 0.05: OUTSIDE" in q6(outside)
    short_cfg = dataclasses.replace(cal, steps=100)
    short = dataclasses.replace(inside, config=short_cfg)
    assert "not comparable (100 steps on 'tinyshakespeare')" in q6(short)
    other = charlm("learned", 10.0, 30.0)  # width 32: not the recipe
    assert calibration_trials(lab(other)) == [] and "no stored trial trains nanoGPT's CPU recipe" in q6(other)


@pytest.mark.parametrize(
    ("learned", "sinusoidal", "alibi", "verdict"),
    [
        ((10.0, 30.0), (10.0, 25.0), (10.0, 11.0), "agree"),       # both fail, alibi flattest
        ((10.0, 30.0), (10.0, 25.0), (10.0, 40.0), "partly"),      # both fail, alibi steepest
        ((10.0, 10.5), (10.0, 10.2), (10.0, 12.0), "disagree"),    # nothing fails, alibi steepest
    ],
)
def test_press_verdict_follows_the_perplexity_ratios(learned, sinusoidal, alibi, verdict):
    answer = q6(*charlm_seeds("learned", *learned), *charlm_seeds("sinusoidal", *sinusoidal),
                *charlm_seeds("alibi", *alibi))
    assert f"Press et al. (learned/sinusoidal fail beyond L, ALiBi flattest): {verdict}." in answer
    one_seed = q6(charlm("learned", *learned), charlm("sinusoidal", *sinusoidal), charlm("alibi", *alibi))
    assert "ALiBi flattest): cannot tell." in one_seed


def test_press_cannot_tell_where_a_ratio_interval_straddles_the_threshold():
    # learned: ratios 1.4 and 1.6 on its two seeds, astride 1.5; the other parts are clear
    learned = [charlm("learned", 10.0, 14.0, seed=0), charlm("learned", 10.0, 16.0, seed=1)]
    section = calibration_section(lab(*learned, *charlm_seeds("sinusoidal", 10.0, 25.0), *charlm_seeds("alibi", 10.0, 11.0)))
    assert "ALiBi flattest): cannot tell." in section.answer
    press = section.paragraphs[2]
    assert "learned ratio 1.5 [1.4, 1.6]: fails (>= 1.5) cannot tell" in press
    assert "sinusoidal ratio 2.5 [2.48, 2.52]: fails (>= 1.5) agree" in press
    assert "alibi ratio 1.1 [1.09, 1.11]: flatter than learned, sinusoidal (within 2%) agree" in press


def copy_trials(seeds: int = 2, spread: float = 0.01, **beyond: float) -> list[TrialRecord]:
    """``seeds`` trials per scheme, exact match beyond L ``value`` + ``spread`` x seed."""
    return [record("copy", scheme, {8: 1.0, 12: value + spread * seed, 16: value + spread * seed}, seed=seed)
            for scheme, value in beyond.items() for seed in range(seeds)]


@pytest.mark.parametrize(
    ("scores", "verdict"),
    [
        ({"nope": 0.8, "t5_bias": 0.6, "learned": 0.1, "alibi": 0.3}, "agree"),
        ({"nope": 0.2, "t5_bias": 0.1, "learned": 0.1, "rope": 0.9}, "disagree"),
        ({"nope": 0.0, "learned": 0.0, "alibi": 0.0}, "cannot tell"),
        ({"learned": 0.5, "alibi": 0.9}, "cannot tell"),
    ],
)
def test_kazemnejad_verdict_follows_exact_match_beyond_training_length(scores, verdict):
    assert f"NoPE and T5 bias best on copy/reverse): {verdict}." in q6(*copy_trials(**scores))
    assert "NoPE and T5 bias best on copy/reverse): cannot tell." in q6(*copy_trials(seeds=1, **scores))


def test_kazemnejad_cannot_tell_where_the_best_intervals_overlap():
    # nope 0.5 and 0.8 on its two seeds, rope 0.6 and 0.7: nope's mean is higher, but the intervals overlap
    trials = copy_trials(spread=0.3, nope=0.5) + copy_trials(spread=0.1, rope=0.6)
    assert "NoPE and T5 bias best on copy/reverse): cannot tell." in q6(*trials)
    assert "copy: cannot tell (nope 0.65 [0.5, 0.8], rope 0.65 [0.6, 0.7])" in calibration_section(lab(*trials)).paragraphs[3]


def test_vaswani_and_q1_disagree_when_sinusoidal_is_clearly_better():
    trials = [record("copy", "learned", {8: v}, seed=s) for s, v in enumerate((0.50, 0.52))]
    trials += [record("copy", "sinusoidal", {8: v}, seed=s) for s, v in enumerate((0.90, 0.92))]
    comparison = compare(lab(*trials), "copy", ("learned", "base"), ("sinusoidal", "base"))
    assert comparison.delta == pytest.approx(0.40) and comparison.verdict("learned", "sinusoidal") == "sinusoidal better"
    assert "Vaswani et al. (learned ≈ sinusoidal): disagree." in q6(*trials)


def test_ranking_puts_unmeasurable_lengths_last_and_ties_share_a_rank():
    trials = copy_trials(alibi=0.7, nope=0.7, rope=0.2)
    trials.append(record("copy", "learned", {8: 1.0, 12: 0.9, 16: None}))  # past its table at 16
    trials.append(record("copy", "learned", {8: 1.0, 12: 0.9, 16: None}, seed=1))
    ranks = {r.scheme: r.rank for r in ranking_scores(lab(*trials), "copy")}
    assert ranks == {"alibi": 1, "nope": 1, "rope": 3, "learned": 4}
    section = extrapolation(lab(*trials))
    assert "alibi 1, nope 1, rope 3, learned 4." in section.answer
    assert "Best beyond L per task: copy: alibi, nope." in section.answer  # rope's [0.2, 0.21] lies wholly below
    (header, rows), = section.tables
    assert [row[-2] for row in rows] == ["best", "best", "worse", "n/a"]
    assert rows[0][header.index("mean beyond L [95% interval]")] == "0.705 [0.7, 0.71]"
    assert section.decided


def test_extrapolation_cannot_tell_the_best_from_an_overlapping_scheme():
    trials = copy_trials(spread=0.2, alibi=0.5) + copy_trials(spread=0.0, rope=0.55)
    section = extrapolation(lab(*trials))
    assert "Best beyond L per task: copy: cannot tell (alibi, rope overlap)." in section.answer
    assert not section.decided
    tied = extrapolation(lab(*copy_trials(spread=0.0, alibi=0.0, rope=0.0, nope=0.0)))
    assert "Best beyond L per task: copy: all 3 tied." in tied.answer


def test_variant_question_counts_wins_per_side():
    trials = [record("copy", "learned", {8: v}, variant="base", seed=s) for s, v in enumerate((0.2, 0.22))]
    trials += [record("copy", "learned", {8: v}, variant="every_layer", seed=s) for s, v in enumerate((0.6, 0.64))]
    section = variant_question(lab(*trials), "Q3", "every_layer", ("once", "every layer"), "x")
    assert section.answer.startswith("once better in 0, every layer better in 1, alike in 0, cannot tell in 0 of 1 "
                                     "task/scheme pairs (2 seeds per group)")
    header, rows = section.tables[0]
    assert rows == [["copy", "learned", "exact match at 8", "0.21 [0.2, 0.22]", "0.62 [0.6, 0.64]", "+0.41", "2, 2",
                     "every layer better"]]
    assert section.decided and section.verdict.startswith("once vs every layer: once better in 0")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=5),
       st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=5))
def test_comparison_is_antisymmetric_and_uses_sample_std(a, b):
    sa, sb = Stat.of(a), Stat.of(b)
    assert sa.std == pytest.approx(statistics.stdev(a), abs=1e-12)
    forward, backward = Comparison("copy", "x", "exact_match", 8, sa, sb), Comparison("copy", "x", "exact_match", 8, sb, sa)
    assert forward.delta == pytest.approx(-backward.delta, abs=1e-12)
    assert backward.verdict("B", "A") == forward.verdict("A", "B")
    ia, ib = sa.interval, sb.interval
    assert min(a) <= ia.low <= ia.mean <= ia.high <= max(a)
    widest = max(abs(ib.high - ia.low), abs(ia.high - ib.low))
    assert (forward.verdict("A", "B") == "alike") == (widest <= NOISE_FLOOR)
    overlap = ia.low <= ib.high and ib.low <= ia.high
    assert (forward.verdict("A", "B") == "cannot tell") == (overlap and widest > NOISE_FLOOR)


def test_load_lab_rejects_a_plain_file(tmp_path):
    path = tmp_path / "file.txt"
    path.write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        load_lab(path)
