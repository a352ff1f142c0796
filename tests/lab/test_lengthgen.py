"""The ``lengthgen`` preset: a valid sweep the runner expands, and one tiny trial of it end to end."""

from __future__ import annotations

import dataclasses

from posembed.lab.config import apply_overrides
from posembed.lab.lengthgen.presets import LENGTHGEN_SCHEMES, lengthgen
from posembed.lab.lengthgen.ranking import mean_reciprocal_rank, ood_scores
from posembed.lab.sweep.listing import store_rows
from posembed.lab.sweep.runner import expand, run_experiment
from posembed.lab.sweep.store import ResultsStore


def test_preset_expands_to_every_scheme_and_randomized_where_positions_exist():
    trials = expand(lengthgen())
    base = [t.scheme for t in trials if t.variant == "base"]
    randomized = [t.scheme for t in trials if t.variant == "randomized"]
    assert base == list(LENGTHGEN_SCHEMES)
    assert "nope" not in randomized and set(randomized) == set(LENGTHGEN_SCHEMES) - {"nope"}
    assert all(t.randomized_positions for t in trials if t.variant == "randomized")
    copy = lengthgen().base("copy")
    assert [round(copy.context * s) for s in copy.eval_scales] == [16, 17, 18, 20, 24, 32]


def test_reverse_is_there_when_asked():
    exp = apply_overrides(lengthgen(), ["tasks=copy,reverse"])
    assert {t.task for t in expand(exp)} == {"copy", "reverse"}
    assert dataclasses.replace(exp.base("reverse"), task="copy") == exp.base("copy")


def test_a_tiny_version_runs_and_stores_exact_match_past_L(tmp_path):
    exp = apply_overrides(
        lengthgen(),
        [
            "schemes=rope",
            "steps=3",
            "dim=16",
            "depth=1",
            "heads=2",
            "batch=4",
            "eval_batches=1",
            "warmup=0",
            "log_every=1",
        ],
    )
    summary = run_experiment(exp, tmp_path, checkpoints=False, progress=False)
    assert summary.trained == 2  # base and randomized
    with ResultsStore(tmp_path, exp) as store:
        records = store.records()
    assert len(records) == 2
    for record in records:
        found = record.metric("exact_match")
        assert sorted(found) == [16, 17, 18, 20, 24, 32] and all(0.0 <= v <= 1.0 for v in found.values())
    rows, context = store_rows(tmp_path)
    assert context == {"copy": 16} and len(rows) == 12
    scores = ood_scores(rows, context)
    assert set(scores) == {("copy", "rope", "base"), ("copy", "rope", "randomized")}
    assert set(mean_reciprocal_rank(scores)) == {("rope", "base"), ("rope", "randomized")}


def test_reciprocal_ranks_average_over_tasks_and_share_ties():
    scores = {
        ("copy", "a", "base"): 0.3,
        ("copy", "b", "base"): 0.1,
        ("reverse", "a", "base"): 0.0,
        ("reverse", "b", "base"): 0.0,
    }
    assert mean_reciprocal_rank(scores) == {("a", "base"): (1.0 + 1 / 1.5) / 2, ("b", "base"): (0.5 + 1 / 1.5) / 2}
