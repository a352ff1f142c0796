"""The presets' sweeps: the later 1-D schemes in ``survey``, each trained in a tiny trial and reported
in its family's rows of the lab report's tables."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from posembed.lab.config import TASKS, apply_overrides
from posembed.lab.presets import CLASSIC_SCHEMES, LATER_SCHEMES, get_preset
from posembed.lab.report import write_report
from posembed.lab.report.tables import scheme_family
from posembed.lab.sweep import runner
from posembed.lab.sweep.runner import run_experiment
from posembed.lab.sweep.store import load_results
from posembed.lab.training.train import build_trial_scheme
from posembed.schemes.factory import FACTORY
from tests.lab.test_report import md_tables

#: the later schemes that only serve causal attention (their check_attention refuses the encoder)
CAUSAL_ONLY = {"fire", "forgetting", "cope"}

#: every later scheme on the copy task, 3 steps at width 16: seconds in all
TINY = [
    f"schemes={','.join(LATER_SCHEMES)}",
    "tasks=copy",
    "variants=base",
    "seeds=0",
    "steps=3",
    "log_every=1",
    "dim=16",
    "heads=2",
    "batch=8",
    "copy.context=4",
    'scheme_kwargs={"cope.npos_max": 16}',
]


def test_survey_trains_the_later_1d_schemes_beside_the_classic_ones():
    survey = get_preset("survey")
    assert survey.schemes == (*CLASSIC_SCHEMES, *LATER_SCHEMES)
    assert set(LATER_SCHEMES) <= set(FACTORY) and not {"rope_axial", "rope_pixtral", "mrope"} & set(survey.schemes)
    assert {scheme_family(s) for s in LATER_SCHEMES} == {"bias"}
    # smoke and quick are unchanged (their stores resume): no scheme arguments in their bases
    for name in ("smoke", "quick"):
        assert all(base.scheme_kwargs == () for base in get_preset(name).bases)


def _serves(scheme, cfg) -> bool:
    """Whether the built scheme accepts the task's attention (causal for the decoder tasks)."""
    try:
        scheme.check_attention(num_heads=cfg.heads, head_dim=cfg.dim // cfg.heads, causal=TASKS[cfg.task] == "decoder")
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("task", ["order", "copy", "reverse", "sort", "addition", "charlm"])
def test_every_survey_scheme_builds_for_every_task_and_only_causal_ones_refuse_the_encoder(task):
    base = get_preset("survey").base(task)
    for name in get_preset("survey").schemes:
        cfg = dataclasses.replace(base, scheme=name)
        scheme = build_trial_scheme(cfg, table_size=8 * cfg.context)  # cope finds its npos_max in the base
        if scheme is None:
            continue
        assert _serves(scheme, cfg) == (TASKS[task] == "decoder" or name not in CAUSAL_ONLY), (task, name)


@pytest.mark.skipif(not hasattr(runner, "refusal"), reason="lab/sweep/runner.py does not skip causal-only schemes yet")
def test_survey_expands_skipping_causal_only_schemes_on_the_encoder_only():
    trials = runner.expand(get_preset("survey"))
    pairs = {(cfg.task, cfg.scheme) for cfg in trials}
    for task in get_preset("survey").tasks:
        for scheme in get_preset("survey").schemes:
            assert ((task, scheme) in pairs) == (TASKS[task] == "decoder" or scheme not in CAUSAL_ONLY)


@pytest.fixture(scope="module")
def later_lab(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("later")
    run_experiment(apply_overrides(get_preset("smoke"), TINY), out, checkpoints=False, progress=False)
    return out, write_report(out)[0].read_text()


@pytest.mark.parametrize("scheme", LATER_SCHEMES)
def test_each_later_scheme_trains_and_lands_in_its_family_rows(scheme, later_lab):
    out, text = later_lab
    (trial,) = [t for t in load_results(out).trials if t.config.scheme == scheme]
    assert math.isfinite(trial.final_loss) and trial.num_params > 0
    tables = md_tables(text)
    (row,) = [r for r in tables["Results: copy"] if r["scheme"] == scheme]
    assert (row["family"], row["variant"], row["seeds"]) == (scheme_family(scheme), "base", "1")
    ranking = tables[next(k for k in tables if k.startswith("Q4."))]
    assert [r["family"] for r in ranking if r["scheme"] == scheme] == ["bias"]


def test_the_presets_that_give_verdicts_train_every_group_on_enough_seeds():
    """Issue 24: quick's verdicts rest on 2 seeds or more, full's, survey's and the context study's on 3."""
    from posembed.lab.context.presets import get_context_preset
    from posembed.lab.sweep.runner import expand

    for name, least in (("quick", 2), ("full", 3), ("survey", 3)):
        trials = expand(get_preset(name))
        seeds: dict[tuple, set[int]] = {}
        for trial in trials:
            seeds.setdefault((trial.task, trial.scheme, trial.variant), set()).add(trial.seed)
        assert min(len(s) for s in seeds.values()) >= least, name
    assert len(get_context_preset("context").seeds) == 3
    assert get_preset("smoke").seeds == (0,) and get_context_preset("context-smoke").seeds == (0,)  # banners say so


def test_the_stored_quick_run_is_the_quick_preset():
    """results/lab/quick holds the trials ``posembed lab run --preset quick`` trains, every one (the
    page's numbers are regenerated from them, so a preset change must come with a rerun)."""
    import json

    from posembed.lab.sweep.runner import expand

    stored = json.loads((Path(__file__).parents[2] / "results/lab/quick/trials.json").read_text(encoding="utf-8"))
    assert sorted(row["trial_id"] for row in stored) == sorted(t.trial_id for t in expand(get_preset("quick")))


def test_every_primary_comparison_names_groups_its_preset_trains():
    """A primary comparison the preset cannot answer would be a question asked of nothing."""
    from posembed.lab.presets import PRIMARY, Interaction
    from posembed.lab.sweep.runner import expand

    for name, primaries in PRIMARY.items():
        groups = {(t.task, t.scheme, t.variant) for t in expand(get_preset(name))}
        seeds = {t.seed for t in expand(get_preset(name))}
        for asked in primaries:
            for p in (asked.first, asked.second) if isinstance(asked, Interaction) else (asked,):
                assert {(p.task, *p.a.key), (p.task, *p.b.key)} <= groups, (name, p)
        assert len(seeds) >= 3, name  # a t interval, not the seeds' range
