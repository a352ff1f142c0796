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
from posembed.lab.report_calibration import calibration_section, calibration_trials
from posembed.lab.report_questions import Comparison, compare, extrapolation, ranking_scores, variant_question
from posembed.lab.report_tables import LabData, Stat, load_lab
from posembed.lab.store import TrialRecord
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


def charlm(scheme: str, at_l: float, at_8l: float) -> TrialRecord:
    return record("charlm", scheme, {8: at_l, 16: (at_l + at_8l) / 2, 64: at_8l})


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
    answer = q6(charlm("learned", *learned), charlm("sinusoidal", *sinusoidal), charlm("alibi", *alibi))
    assert f"Press et al. (learned/sinusoidal fail beyond L, ALiBi flattest): {verdict}." in answer


def test_press_cannot_tell_without_alibi():
    assert "ALiBi flattest): cannot tell." in q6(charlm("learned", 10.0, 30.0), charlm("rope", 10.0, 11.0))


def copy_trials(**beyond: float) -> list[TrialRecord]:
    return [record("copy", scheme, {8: 1.0, 12: value, 16: value}) for scheme, value in beyond.items()]


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


def test_vaswani_and_q1_disagree_when_sinusoidal_is_clearly_better():
    trials = [record("copy", "learned", {8: v}, seed=s) for s, v in enumerate((0.50, 0.52))]
    trials += [record("copy", "sinusoidal", {8: v}, seed=s) for s, v in enumerate((0.90, 0.92))]
    comparison = compare(lab(*trials), "copy", ("learned", "base"), ("sinusoidal", "base"))
    assert comparison.delta == pytest.approx(0.40) and comparison.verdict("learned", "sinusoidal") == "sinusoidal better"
    assert "Vaswani et al. (learned ≈ sinusoidal): disagree." in q6(*trials)


def test_ranking_puts_unmeasurable_lengths_last_and_ties_share_a_rank():
    trials = copy_trials(alibi=0.7, nope=0.7, rope=0.2)
    trials.append(record("copy", "learned", {8: 1.0, 12: 0.9, 16: None}))  # past its table at 16
    ranks = {r.scheme: r.rank for r in ranking_scores(lab(*trials), "copy")}
    assert ranks == {"alibi": 1, "nope": 1, "rope": 3, "learned": 4}
    assert "alibi 1, nope 1, rope 3, learned 4." in extrapolation(lab(*trials)).answer


def test_variant_question_counts_wins_per_side():
    trials = [record("copy", "learned", {8: v}, variant="base", seed=s) for s, v in enumerate((0.2, 0.22))]
    trials += [record("copy", "learned", {8: v}, variant="every_layer", seed=s) for s, v in enumerate((0.6, 0.64))]
    section = variant_question(lab(*trials), "Q3", "every_layer", ("once", "every layer"), "x")
    assert section.answer.startswith("once better in 0, every layer better in 1, alike in 0 of 1")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=5),
       st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=5))
def test_comparison_is_antisymmetric_and_uses_sample_std(a, b):
    sa, sb = Stat.of(a), Stat.of(b)
    assert sa.std == pytest.approx(statistics.stdev(a), abs=1e-12)
    forward, backward = Comparison("copy", "x", "exact_match", 8, sa, sb), Comparison("copy", "x", "exact_match", 8, sb, sa)
    assert forward.delta == pytest.approx(-backward.delta, abs=1e-12) and forward.noise == backward.noise
    assert backward.verdict("B", "A") == forward.verdict("A", "B")
    assert (forward.verdict("A", "B") == "alike") == (abs(forward.delta) <= forward.noise)


def test_load_lab_rejects_a_plain_file(tmp_path):
    path = tmp_path / "file.txt"
    path.write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        load_lab(path)
