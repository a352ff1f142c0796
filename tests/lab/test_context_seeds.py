"""The context study over seeds: one run per seed keyed as before, the report's intervals and verdicts."""

from __future__ import annotations

import dataclasses

import pytest

from posembed.lab.context.presets import ContextConfig, get_context_preset, with_overrides
from posembed.lab.context.store import NO_DEPTH, ContextStore
from posembed.lab.report.context import Results, context_page
from posembed.lab.report.context_results import empty_heatmaps
from posembed.lab.report.context_verdicts import verdicts


def test_the_context_preset_has_three_seeds_and_a_seed_keeps_the_id_stored_runs_have():
    study = get_context_preset("context")
    assert study.seeds == (0, 1, 2) and [run.seed for run in study.per_seed()] == [0, 1, 2]
    # the ids the store held before the study had seeds (main 58ece3f): seed 0 is the same run; the
    # adjacent-key curriculum trains differently, so the presets' own ids moved with it
    before = dataclasses.replace(study, passkey_adjacent_steps=0)
    assert before.per_seed()[0].config_id == "21bd4df7a6ff0810" and before.per_seed()[0].train_id == "990bc73ee87c47ab"
    assert (
        dataclasses.replace(get_context_preset("context-smoke"), passkey_adjacent_steps=0).config_id
        == "ccd4031ba0e45fe7"
    )
    assert study.per_seed()[0].config_id == "13afb0e36fbd2711" and study.per_seed()[0].train_id == "615a7c3ce9acdfe2"
    assert get_context_preset("context-smoke").config_id == "2ec4e41421b1d2b7"
    assert (
        len({run.config_id for run in study.per_seed()}) == 3 and len({run.train_id for run in study.per_seed()}) == 3
    )
    assert with_overrides(study, ["seeds=0,1"]).per_seed()[1].config_id == study.per_seed()[1].config_id


@pytest.mark.parametrize("seeds", [(), (0, 0), (-1,)])
def test_bad_seeds_are_refused_naming_the_value(seeds):
    with pytest.raises(ValueError, match=r"seeds must be distinct integers >= 0, at least one, got \("):
        ContextConfig(name="x", seeds=seeds)


def _rows(seed: int, values: dict[tuple[str, str, int, str], float]) -> list[dict]:
    return [
        {"model": m, "method": meth, "length": n, "metric": metric, "depth": NO_DEPTH, "value": v, "seed": seed}
        for (m, meth, n, metric), v in values.items()
    ]


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


def _study(per_seed: list[dict[str, float]]) -> Results:
    """RoPE yarn / linear / extrapolate and ALiBi at 8x L, with the given perplexities per seed."""
    rows = []
    for seed, values in enumerate(per_seed):
        rows += _rows(
            seed, {("rope", method, 768, "perplexity"): v for method, v in values.items() if method != "alibi"}
        )
        rows += _rows(
            seed,
            {("alibi", "none", 768, "perplexity"): values["alibi"], ("rope", "extrapolate", 96, "perplexity"): 5.0},
        )
    return Results(rows, BODY)


def test_results_hold_each_seed_and_the_mean_over_seeds():
    results = _study(
        [
            {"yarn": 10.0, "linear": 30.0, "extrapolate": 40.0, "alibi": 7.0},
            {"yarn": 12.0, "linear": 34.0, "extrapolate": 38.0, "alibi": 7.2},
        ]
    )
    assert results.seeds == [0, 1]
    assert results.value("rope", "yarn", 768, "perplexity") == 11.0
    assert results.per_seed("rope", "yarn", 768, "perplexity") == {0: 10.0, 1: 12.0}
    assert results.values("rope", "yarn", 768, "perplexity") == [10.0, 12.0]
    # two seeds: the geometric mean and the seeds' range (perplexity is summarised on its log)
    assert results.cell("rope", "yarn", 768, "perplexity") == "11 [10, 12]"
    rows = {row["claim"].split(",")[0]: row for row in verdicts(results)}
    yarn = rows["Without fine-tuning"]
    assert yarn["seeds"] == 2 and yarn["ours"] == "rope / yarn 11 [10, 12] vs rope / linear 31.9 [30, 34]"
    # 2 seed pairs: the paired t test has 1 degree of freedom, too few to decide at 5 % over the family
    assert yarn["verdict"].startswith("cannot tell (could detect a ratio of ")
    assert (
        "This run: 2 seeds (0, 1), width 64, 2 layers, 2000 steps at L = 96."
        in context_page(results).published[0]["why it might not hold here"]
    )


def test_one_seed_is_named_and_the_banner_says_why_nothing_is_tested():
    one = _study([{"yarn": 10.0, "linear": 30.0, "extrapolate": 40.0, "alibi": 7.0}])
    assert {row["verdict"] for row in verdicts(one) if row["ours"] != "not measured"} == {"cannot tell (1 seed)"}
    assert verdicts(one)[0]["ours"] == "rope / yarn 10 vs rope / linear 30"
    assert "it has one seed, so no number has an interval" in context_page(one).warning
    many = _study(
        [
            {"yarn": yarn, "linear": linear, "extrapolate": extrapolate, "alibi": alibi}
            for yarn, linear, extrapolate, alibi in ((10, 30, 40, 7), (30, 10, 12, 40), (12, 31, 20, 9))
        ]
    )
    assert "no primary comparison decides" in context_page(many).warning


def test_an_all_zero_heatmap_is_named_and_explained():
    rows = []
    for seed in (0, 1):
        for model, method, value in (("rope", "extrapolate", 0.0), ("alibi", "none", 0.0), ("rope", "yarn", 0.5)):
            for length in (96, 192):
                rows += [
                    {
                        "model": model,
                        "method": method,
                        "length": length,
                        "metric": "passkey",
                        "depth": d,
                        "value": value,
                        "seed": seed,
                    }
                    for d in (0.0, 1.0)
                ]
                rows.append(
                    {
                        "model": model,
                        "method": method,
                        "length": length,
                        "metric": "passkey_mean",
                        "depth": NO_DEPTH,
                        "value": value,
                        "seed": seed,
                    }
                )
    results = Results(rows, BODY)
    assert empty_heatmaps(results) == ["rope / extrapolate", "alibi"]
    note = context_page(results).empty_note
    assert note.startswith(
        "Passkey accuracy is 0 at every length and depth for rope / extrapolate and alibi: these "
        "models never retrieved the key, at L or beyond (RoPE's retrieval at L: 0 of 2 seeds (0, 0))."
    )
    assert "(this run: 2000 steps, the first 800 on passkeys alone)" in note
    adjacent = Results(rows, {**BODY, "passkey_adjacent_steps": 300})
    assert (
        "(this run: 2000 steps, the first 800 on passkeys alone, in the first 300 of them half the rows with "
        "the key sentence right before the question)"
    ) in context_page(adjacent).empty_note


def test_a_store_with_three_seeds_loads_as_one_study(tmp_path):
    store = ContextStore(tmp_path / "context.sqlite")
    study = ContextConfig(name="context", context=96, seeds=(0, 1, 2))
    for run, value in zip(study.per_seed(), (5.0, 6.0, 7.0)):
        store.put_config(run.config_id, run.name, run.to_dict())
        store.put(run.config_id, "rope", "yarn", 96, [("perplexity", NO_DEPTH, value)])
    other = ContextConfig(name="other", context=128)
    results = Results.load(store.path, [run.config_id for run in study.per_seed()])
    assert results.seeds == [0, 1, 2] and results.value("rope", "yarn", 96, "perplexity") == 6.0
    assert Results.load(store.path).seeds == [0, 1, 2]  # one study in the store: found without ids
    assert Results.load(store.path, study.per_seed()[1].config_id).seeds == [1]
    store.put_config(other.config_id, other.name, other.to_dict())
    with pytest.raises(ValueError, match="holds 2 studies"):
        Results.load(store.path)


def test_an_open_store_reads_as_its_path_does(tmp_path):
    store = ContextStore(tmp_path / "context.sqlite")
    study = ContextConfig(name="context", context=96, seeds=(0, 1))
    for run, value in zip(study.per_seed(), (5.0, 7.0)):
        store.put_config(run.config_id, run.name, run.to_dict())
        store.put(run.config_id, "rope", "yarn", 96, [("perplexity", NO_DEPTH, value)])
    ids = [run.config_id for run in study.per_seed()]
    opened, loaded = Results.of(store, ids), Results.load(store.path, ids)
    assert (opened.seeds, opened.body, opened.values("rope", "yarn", 96, "perplexity")) == (
        loaded.seeds,
        loaded.body,
        [5.0, 7.0],
    )
    with pytest.raises(ValueError, match=f"study nope is not in {tmp_path / 'context.sqlite'}; it holds: {ids[0]}"):
        Results.of(store, "nope")


def test_the_store_lists_the_studies_that_train_under_an_id(tmp_path):
    store = ContextStore(tmp_path / "context.sqlite")
    study = ContextConfig(name="context", context=96, seeds=(0, 1))
    longer = with_overrides(study, ["scales=1,2,4,8,16", "methods=yarn"])  # evaluates more, trains alike
    other = with_overrides(study, ["steps=10"])
    for run in (*study.per_seed(), *longer.per_seed(), *other.per_seed()):
        store.put_config(run.config_id, run.name, run.to_dict())
    seed0 = study.per_seed()[0]
    assert longer.per_seed()[0].config_id != seed0.config_id and longer.per_seed()[0].train_id == seed0.train_id
    assert store.training_under(seed0.train_id) == [seed0.config_id, longer.per_seed()[0].config_id]
    assert store.training_under(other.per_seed()[1].train_id) == [other.per_seed()[1].config_id]
    assert store.training_under("0" * 16) == []
