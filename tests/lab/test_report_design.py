"""Issue 40's design in the lab report: each question across its schemes, verdicts at every training
point under one family, the questions and seeds recorded before the run, and the whole procedure
simulated where nothing differs. Issue 41's reports that stand alone.

The stores are synthetic (:func:`posembed.lab.report.simulate.null_data`, written through the
real :class:`~posembed.lab.sweep.store.ResultsStore`), so no test trains a model except the one
that checks the runner records the questions."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from posembed.lab.config import apply_overrides
from posembed.lab.presets import PRIMARY, Group, Interaction, Measure, Primary, get_preset
from posembed.lab.registration import META_KEY, record, registration
from posembed.lab.report import build_sections, write_report
from posembed.lab.report.decisions import VASWANI_BEYOND, beyond_margin, family, lab_decisions
from posembed.lab.report.questions import changes, exploratory, group_text, training_table, verdict_text
from posembed.lab.report.simulate import claims_winner, false_claims, null_data
from posembed.lab.report.tables import FINAL, LabData, load_lab_data
from posembed.lab.sweep.runner import run_experiment
from posembed.lab.sweep.store import ResultsStore
from posembed.stats.verdict import ALPHA, Comparison, decide


def write_store(out: Path, data: LabData, preset: str = "quick", registered: bool = True) -> Path:
    """``data``'s trials in a real results store at ``out`` (with the runner's record, if ``registered``)."""
    with ResultsStore(out, get_preset(preset)) as store:
        for trial in data.trials:
            store.add(trial)
        if registered:
            store.note_once(META_KEY, record(preset, tuple(sorted({t.config.seed for t in data.trials}))))
    return out


#: sinusoidal every_layer worse than once at the end only: a verdict that changes as the model trains
LATE = {("sinusoidal", "every_layer"): (0.0, 0.0, 0.08)}


@pytest.fixture(scope="module")
def late(tmp_path_factory) -> tuple[Path, str, str]:
    out = write_store(tmp_path_factory.mktemp("late"), null_data(np.random.default_rng(5), shift=LATE))
    md, html = write_report(out)
    return out, md.read_text(encoding="utf-8"), html.read_text(encoding="utf-8")


# --- the questions (presets.PRIMARY) -------------------------------------------------------------


def test_q2_and_q3_ask_learned_and_sinusoidal_with_their_interaction_and_an_amplitude_control():
    """Issue 40 item 2: Q3 was asked of sinusoidal only, Q2 of learned only."""
    for name in ("quick", "full"):
        asked = PRIMARY[name]
        for question, variant in (("Q2", "concat"), ("Q3", "every_layer")):
            pairs = {(p.a.key, p.b.key) for p in asked if isinstance(p, Primary) and p.question == question}
            assert {((s, "base"), (s, variant)) for s in ("learned", "sinusoidal")} <= pairs
            (inter, *_) = [p for p in asked if isinstance(p, Interaction) and p.question == question]
            assert {inter.first.a.scheme, inter.second.a.scheme} == {"learned", "sinusoidal"}
        amplitude = [
            p
            for p in asked
            if isinstance(p, Interaction) and "scaled_sinusoidal" in {p.first.a.scheme, p.second.a.scheme}
        ]
        assert amplitude and (("scaled_sinusoidal", "base"), ("scaled_sinusoidal", "every_layer")) in {
            (p.a.key, p.b.key) for p in asked if isinstance(p, Primary)
        }
        assert [p.measure for p in asked if p.question == "Q4"] == [Measure.MATCHED_RATIO]


def test_primary_is_typed_and_an_interaction_keeps_to_one_task_and_measure():
    with pytest.raises(TypeError, match="Groups and measure a Measure"):
        Primary("Q9", "charlm", Group("learned"), Group("sinusoidal"), "ratio")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Groups"):
        Primary("Q9", "charlm", ("learned", "base"), Group("sinusoidal"))  # type: ignore[arg-type]
    a = Primary("Q9", "charlm", Group("learned"), Group("learned", "concat"))
    with pytest.raises(ValueError, match="one task and measure"):
        Interaction("Q9", a, Primary("Q9", "copy", Group("sinusoidal"), Group("sinusoidal", "concat")))


# --- training points ------------------------------------------------------------------------------


def test_lab_data_at_a_point_holds_that_points_evaluations_and_refuses_a_point_outside_training(late):
    data = load_lab_data(late[0])
    assert data.points() == (0.1, 0.3, FINAL)
    early = data.at(0.3)
    assert len(early.trials) == len(data.trials)
    assert {p.step for t in early.trials for p in t.evals} == {90}
    assert data.at(FINAL) is data and data.step_at(0.1) == 30
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"fraction of the steps in \(0, 1\]"):
            data.at(bad)


def test_every_primary_is_tested_at_every_point_in_one_family():
    data = null_data(np.random.default_rng(1))
    decisions = lab_decisions(data)
    for asked in PRIMARY["quick"]:
        assert [look.point for look, _ in decisions.over_training(asked)] == [0.1, 0.3, FINAL]
    checks = [d for d in decisions.family if decisions.look(d).asked is None]
    assert len(decisions.family) == 3 * len(PRIMARY["quick"]) + len(checks)
    assert decisions.tests == 2 * len(decisions.family)  # Holm ran over every look's two tests at once
    # the adjusted p of a look is the same whether or not the report shows it: one decide() over all
    alone = decide([d.comparison for d in decisions.family])
    assert [d.p_adjusted for d in alone] == [d.p_adjusted for d in decisions.family]


def test_a_verdict_that_changes_over_training_is_said_in_words_and_tabled(late):
    _, md, _ = late
    assert "The verdict of Q3 (sinusoidal) changes as the model trains: cannot tell at 10 % (step 30)" in md
    assert "sinusoidal once better at 100 % (end)" in md
    data = null_data(np.random.default_rng(5), shift=LATE)
    decisions = lab_decisions(data)
    header, rows = training_table(decisions, "Q3")
    assert header == [
        "question",
        "comparison",
        "point",
        "Δ = B − A [95 % interval]",
        "p (Holm)",
        "could detect",
        "verdict",
    ]
    assert [r[2] for r in rows if r[1] == "sinusoidal"] == ["10 % (step 30)", "30 % (step 90)", "100 % (end)"]
    assert not changes(lab_decisions(null_data(np.random.default_rng(5), spread=1e-4)), "Q1")


# --- confirmation on fresh seeds -----------------------------------------------------------------


def test_the_runner_records_the_questions_and_seeds_before_the_first_trial(tmp_path, tinyshakespeare):
    tiny = [
        "schemes=learned",
        "variants=base",
        "seeds=0",
        "steps=10",
        "log_every=1",
        "dim=16",
        "heads=2",
        "batch=4",
        "charlm.context=8",
        "eval_batches=1",
        f"text={tinyshakespeare}",
    ]
    experiment = apply_overrides(get_preset("quick"), tiny)
    run_experiment(experiment, tmp_path, checkpoints=False, progress=False)
    with ResultsStore(tmp_path) as store:
        stored = json.loads(store.meta()[META_KEY])
    assert stored["preset"] == "quick" and stored["deciding_seeds"] == [0] and stored["confirms"] is False
    assert stored["explored_seeds"] == list(range(7)) and len(stored["questions"]) == len(PRIMARY["quick"])
    assert stored["declared_at"] == registration("quick").declared_at
    with ResultsStore(tmp_path, experiment) as store:  # a resumed run keeps the first record
        store.note_once(META_KEY, "{}")
        assert json.loads(store.meta()[META_KEY]) == stored


@pytest.mark.slow
def test_the_report_says_which_seeds_explored_and_which_confirm_and_that_quick_is_a_preview(late, tmp_path):
    _, md, _ = late
    assert "Seeds 0-6 explored: the questions were named after their results." in md
    assert "so its verdicts preview, they do not confirm." in md
    assert "a preview at its scale; the study that decides these questions is `posembed lab run --preset full" in md
    fresh = dataclasses.replace  # a full run on fresh seeds confirms
    data = null_data(np.random.default_rng(2))  # quick's groups, stored as a full run on fresh seeds
    data.trials = [fresh(t, config=fresh(t.config, seed=t.config.seed + 1000)) for t in data.trials]
    text = write_report(write_store(tmp_path / "full", data, preset="full"))[0].read_text(encoding="utf-8")
    assert "none explored, so its verdicts confirm on fresh seeds." in text and "is a preview" not in text
    planned = len(get_preset("full").seeds)  # 7 of the study's seeds here: a report before all have run is interim
    assert f"the study is interim: 7 of its {planned} seeds have reported" in text
    old = write_report(write_store(tmp_path / "old", null_data(np.random.default_rng(3)), registered=False))[0]
    assert "holds no record of its questions made before the run" in old.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_whole_procedure_makes_a_false_claim_in_at_most_5_percent_of_null_reports():
    """Seeded and fast; the stored 4,000-report run is results/lab-simulation.json. Judging each
    look alone (no family) claims a winner in most reports: the simulation can tell the two apart."""
    rate, reports, looks = false_claims(np.random.default_rng(40), reports=40)
    assert looks > 30 and rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reports)
    assert false_claims(np.random.default_rng(40), reports=5, per_look=True)[0] > 0.5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_simulation_judges_as_the_report_decides(seed):
    """claims_winner is decide()'s word rule without the power side: the same answer, null or not."""
    for shift in (None, {("learned", "concat"): (0.0, 0.02, 0.03)}):
        data = null_data(np.random.default_rng(seed), shift=shift)
        said = any(
            d.word.endswith(" better") and (d.comparison.name != VASWANI_BEYOND or beyond_margin(d))
            for d in lab_decisions(data).family
        )
        assert claims_winner(family(data)[0]) == said


# --- reports that stand alone (issue 41 item 4) ---------------------------------------------------


def test_the_interval_sentence_says_what_this_run_used(late, tmp_path):
    _, md, _ = late
    assert "This run has 7 seeds per group; intervals are 95 % t intervals of the mean." in md
    assert "from 3 seeds, the seeds' range for 2" not in md
    data = null_data(np.random.default_rng(4))
    data.trials = [t for t in data.trials if t.config.seed < 2]
    two = write_report(write_store(tmp_path, data))[0].read_text(encoding="utf-8")
    assert "This run has 2 seeds per group; intervals are the two seeds' range (not a 95 % interval)." in two


def test_code_renders_as_code_in_the_html_and_no_placeholder_is_left(late):
    _, md, html = late
    assert "<code>posembed lab run --preset full --out lab-full</code>" in html
    assert not re.findall(r"<p>[^<]*`", html)  # no raw backtick left in a paragraph
    assert not re.findall(r"\b(?:NAME|DIR)\b", md + html)  # "--preset NAME", "--out DIR" were placeholders


def test_each_summary_line_carries_its_question(late):
    _, md, _ = late
    summary = md.split("## Summary")[1].split("## Answers")[0]
    lines = [line for line in summary.splitlines() if line.startswith("- [Q")]
    assert len(lines) == 6 and all(re.match(r"- \[Q\d\. [A-Z][^?]*\?", line) for line in lines), lines
    assert "- [Q2. Add or concatenate positions, at equal width?: learned: " in summary


def test_intervals_of_bounded_measures_stay_in_their_bounds():
    assert group_text([0.1, 0.9, 0.95], bounds=(0.0, 1.0)) == "0.65 [0, 1] (3 seeds: 95 % t, clipped to [0, 1])"
    assert group_text([0.5, 0.6, 0.7], bounds=(0.0, 1.0)) == "0.6 [0.3516, 0.8484] (3 seeds: 95 % t)"
    from posembed.lab.report.questions import decision_row

    (d,) = decide(
        [
            Comparison(
                "Q1 copy: sinusoidal vs learned, exact_match at L",
                "learned",
                "sinusoidal",
                (0.0, 0.9, 0.1),
                (1.0, 0.05, 0.95),
                True,
                0.05,
                test="paired",
            )
        ]
    )
    row = decision_row(d)
    low, high = (float(x) for x in row[3].split("[")[1].split("]")[0].split(", "))
    assert -1 <= low <= high <= 1 and "clipped to [-1, 1]" in row[3]
    assert "clipped to [0, 1]" in row[2]


def test_times_say_what_they_sum(late):
    _, md, _ = late
    assert "| training time, summed over the trials | " in md and "each trial's own training time added up" in md


def test_a_real_difference_inside_the_margin_is_said_so():
    """Issue 41: Q3 read "sinusoidal once better" at Δ = 0.0183 nats, inside its 0.02-nat margin."""
    data = null_data(
        np.random.default_rng(6),
        spread=0.001,
        seed_spread=0.001,
        shift={("sinusoidal", "every_layer"): (0.012, 0.012, 0.012)},
    )
    decisions = lab_decisions(data)
    (q3,) = [d for d in decisions.primaries("Q3") if d.comparison.b == "sinusoidal every_layer"]
    assert verdict_text(q3, decisions.look(q3)) == "sinusoidal once better, by less than the 0.02-nat margin"
    wide = null_data(
        np.random.default_rng(6),
        spread=0.004,
        seed_spread=0.001,
        shift={("sinusoidal", "every_layer"): (0.018, 0.018, 0.018)},
    )
    decisions = lab_decisions(wide)
    (q3,) = [d for d in decisions.primaries("Q3") if d.comparison.b == "sinusoidal every_layer"]
    assert q3.word == "sinusoidal once better" and q3.p_equivalence_adjusted >= ALPHA
    assert verdict_text(q3, decisions.look(q3)).endswith("as estimated (the interval reaches past it)")


def test_every_report_says_where_the_questions_it_does_not_test_are_answered(late):
    _, md, html = late
    elsewhere = md.split("### Questions this run does not test")[1]
    for where in (
        "`nn.Parameter`",
        "tests/schemes/test_learned.py",
        "`posembed encode",
        "`posembed inspect`",
        "docs/bert.md",
    ):
        assert where in elsewhere
    assert "<code>posembed inspect</code>" in html
    assert Path("tests/schemes/test_learned.py").is_file() and Path("docs/bert.md").is_file()


def test_sections_answer_with_the_interaction_in_words():
    data = null_data(
        np.random.default_rng(7), spread=0.001, seed_spread=0.001, shift={("learned", "concat"): (0.0, 0.0, 0.1)}
    )
    q2 = next(s for s in build_sections(data) if s.anchor == "q2")
    assert "depends on the scheme" in q2.answer and "learned vs sinusoidal (interaction)" in q2.verdict
    assert exploratory(data)  # the unmatched ratio and the per-task comparisons stay exploratory


def test_press_threshold_rows_say_fails_not_which_arm_is_better():
    """A scheme tested against Press's 1.5 threshold fails or does not; "threshold 1.5 better" said neither."""
    import math

    from posembed.lab.report.decisions import THRESHOLD
    from posembed.lab.report.rows import verdict_text
    from posembed.stats.verdict import Comparison, decide

    def verdict(values):
        (d,) = decide(
            [
                Comparison(
                    "Press: s fails beyond L (matched 8x/1x ratio >= 1.5)",
                    "learned",
                    THRESHOLD,
                    values,
                    (math.log(1.5),) * len(values),
                    False,
                    0.0488,
                    test="paired",
                )
            ]
        )
        return verdict_text(d)

    assert verdict((0.60, 0.58, 0.61, 0.59)) == "learned fails (its ratio is above 1.5)"
    assert verdict((0.01, 0.02, 0.0, 0.015)) == "learned does not fail (its ratio is below 1.5)"
    assert verdict((0.30, 0.50, 0.41, 0.39)) == "cannot tell"


def test_every_decision_names_what_it_answers_and_the_report_finds_it_by_that():
    """Each comparison of the stored full study says which question or paper check it answers (data, not a
    prefix of its printed name): the sections and Q6 gather their decisions by it."""
    from tools.lab_page import load_run

    data, _ = load_run("full")
    decisions = lab_decisions(data, exploratory(data))
    topics = {d.comparison.topic for d in decisions.by_name.values()}
    assert "" not in topics and {"Q1", "Q2", "Q3", "Q4", "Press", "Vaswani"} <= topics
    for d in decisions.by_name.values():
        head = d.comparison.name.split(":", 1)[0]
        assert d.comparison.topic in (head, head.split(" ", 1)[0]) or d.comparison.name == VASWANI_BEYOND
    renamed = {
        name: dataclasses.replace(d, comparison=dataclasses.replace(d.comparison, name="renamed " + name))
        for name, d in decisions.by_name.items()
    }
    again = dataclasses.replace(decisions, by_name=renamed)
    assert [d.comparison.name for d in again.about("Press")] == [
        "renamed " + d.comparison.name for d in decisions.about("Press")
    ]
    assert len(again.about("Press")) >= 3 and len(again.about("Q2")) >= 1
