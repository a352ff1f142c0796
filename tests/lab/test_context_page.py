"""docs/results.md's context-study section is generated from results/context/ (tools/context_page.py):
every block regenerates to what the page holds, the stored files carry their provenance, and the
export and the passkey rate count what the stores hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posembed.lab.context.presets import ContextConfig
from posembed.lab.context.store import NO_DEPTH, ContextStore
from posembed.lab.report.context import Results
from tools import context_page
from tools.pages import block_names, check_block

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = (
    "context-run",
    "context-passkey-rate",
    "context-core-share",
    "context-verdicts",
    "context-perplexity",
    "context-passkey",
)


def test_every_context_block_on_the_page_is_what_the_stored_results_generate():
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert [name for name in block_names(page) if name.startswith("context-")] == list(BLOCKS)
    generated = context_page.blocks()
    assert set(generated) == set(BLOCKS)
    problems = [p for name, body in generated.items() for p in check_block(page, name, body)]
    assert not problems, "\n".join(problems)


def test_the_stored_results_name_what_made_them():
    meta = json.loads((ROOT / "results" / "context" / "meta.json").read_text(encoding="utf-8"))
    assert meta["runs"]
    for run in meta["runs"]:
        assert "posembed lab context --preset context" in run["command"]
        assert len(run["commit"]) == 40 and run["threads"] == 1 and run["device"] and run["load"] and run["date"]
    study = json.loads((ROOT / "results" / "context" / "study.json").read_text(encoding="utf-8"))
    rate = json.loads((ROOT / "results" / "context" / "passkey-rate.json").read_text(encoding="utf-8"))
    for kernels in rate["sets"].values():  # each set of runs names its command, commit, machine, date, capability
        assert all(kernels[key] for key in context_page.ABOUT) and len(kernels["commit"]) == 40
        assert len(kernels["runs"]) == len(kernels["accuracy_at_L"]) == len(kernels["final_loss"])
    rate = rate["sets"]["AVX-512 on 2026-11-27"]
    seeds = {row["seed"] for row in study["rows"]}
    # the study's seeds are among the rate's, with the same RoPE accuracy at L
    assert {str(s) for s in seeds} <= set(rate["accuracy_at_L"])
    results = context_page.load_study()
    for seed in seeds:
        assert (
            results.per_seed("rope", "extrapolate", results.context, "passkey_mean")[seed]
            == rate["accuracy_at_L"][str(seed)]
        )


def _store(tmp_path: Path, accuracies: dict[int, float]) -> tuple[Path, list[str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = ContextStore(tmp_path / "context.sqlite")
    ids = []
    for run in ContextConfig(name="context", seeds=tuple(accuracies)).per_seed():
        store.put_config(run.config_id, run.name, run.to_dict())
        store.put(
            run.config_id,
            "rope",
            "extrapolate",
            96,
            [("passkey_mean", NO_DEPTH, accuracies[run.seed]), ("perplexity", NO_DEPTH, 6.0 + run.seed)],
        )
        ids.append(run.config_id)
    return store.path, ids


def test_export_keeps_every_row_with_its_seed_and_loads_as_the_store_does(tmp_path):
    path, ids = _store(tmp_path, {0: 1.0, 1: 0.0125, 4: 0.95})
    context_page.export([f"{path}:{cid}" for cid in ids], tmp_path / "out")
    stored = context_page.load_study(tmp_path / "out")
    direct = Results.load(path, ids)
    assert stored.seeds == direct.seeds == [0, 1, 4]
    for metric in ("passkey_mean", "perplexity"):
        assert stored.per_seed("rope", "extrapolate", 96, metric) == direct.per_seed("rope", "extrapolate", 96, metric)
    assert "seed" not in json.loads((tmp_path / "out" / "study.json").read_text())["config"]


ABOUT = {
    "kernels": "AVX-512",
    "capability": "AVX512",
    "commit": "a" * 40,
    "machine": "cpu: 2 cores",
    "date": "2026-11-28",
    "command": "posembed lab context --preset context --out DIR --set seeds=0,1,2",
}
AVX2_ABOUT = {
    **ABOUT,
    "kernels": "AVX2",
    "capability": "AVX2",
    "command": "ATEN_CPU_CAPABILITY=avx2 " + ABOUT["command"],
}


def test_the_rate_counts_seeds_at_the_criterion_with_an_exact_interval(tmp_path):
    path, ids = _store(tmp_path, {0: 1.0, 1: 0.79, 2: 0.8})
    context_page.export_rate([f"{path}:{cid}" for cid in ids], "AVX-512 run", ABOUT, tmp_path)
    rate = json.loads((tmp_path / "passkey-rate.json").read_text())
    assert rate["sets"]["AVX-512 run"]["accuracy_at_L"] == {"0": 1.0, "1": 0.79, "2": 0.8} and rate["criterion"] == 0.8
    assert {key: rate["sets"]["AVX-512 run"][key] for key in ABOUT} == ABOUT
    text = context_page.rate_text(rate)
    # 0.8 counts, 0.79 does not: 2 of 3; Clopper-Pearson for 2 of 3 is [0.094, 0.992]
    assert text.splitlines() == [
        "**RoPE learns passkey retrieval at L**, counted over seeds: a seed counts when its accuracy at L, the mean "
        "over 5 depths x 16 documents, is >= 0.8.",
        "",
        "| set of runs | torch's kernels (capability) | commit | date | seeds that retrieve | "
        "exact 95 % interval of the rate | accuracy at L, by seed |",
        "|---|---|---|---|---|---|---|",
        "| AVX-512 run | AVX-512 (AVX512) | aaaaaaa | 2026-11-28 | 2 of 3 | 0.09 to 0.99 | 0: 1, 1: 0.79, 2: 0.8 |",
        "",
        "Each set's command and machine:",
        "",
        "- AVX-512 run: `posembed lab context --preset context --out DIR --set seeds=0,1,2` (cpu: 2 cores)",
    ]
    rate["sets"]["AVX-512 run"]["accuracy_at_L"] = {"0": 1.0, "1": 0.9}
    every = context_page.rate_text(rate)
    assert "| 2 of 2 | 0.16 to 1.00 |" in every


def test_clopper_pearson_is_exact_at_the_edges_and_refuses_impossible_counts():
    from scipy.stats import binomtest

    assert context_page.clopper_pearson(0, 10) == (0.0, pytest.approx(0.3085, abs=1e-4))
    assert context_page.clopper_pearson(10, 10) == (pytest.approx(0.6915, abs=1e-4), 1.0)
    for k in range(11):  # scipy's exact binomial interval is the same interval
        ci = binomtest(k, 10).proportion_ci(0.95, method="exact")
        assert context_page.clopper_pearson(k, 10) == (pytest.approx(ci.low), pytest.approx(ci.high))
    for k, n in ((3, 2), (-1, 5), (0, 0)):
        with pytest.raises(ValueError, match=f"k={k}, n={n}"):
            context_page.clopper_pearson(k, n)


def test_a_run_without_the_rope_passkey_row_is_refused(tmp_path):
    store = ContextStore(tmp_path / "context.sqlite")
    run = ContextConfig(name="context", seeds=(0,)).per_seed()[0]
    store.put_config(run.config_id, run.name, run.to_dict())
    with pytest.raises(ValueError, match="no passkey accuracy of rope at L = 96"):
        context_page.export_rate([f"{store.path}:{run.config_id}"], "AVX-512 run", ABOUT, tmp_path)


def test_a_rate_without_what_made_it_is_refused(tmp_path):
    path, ids = _store(tmp_path, {0: 1.0})
    runs = [f"{path}:{ids[0]}"]
    with pytest.raises(ValueError, match="the runs of 'AVX-512 run' need machine, date"):
        context_page.export_rate(
            runs, "AVX-512 run", {k: v for k, v in ABOUT.items() if k not in ("machine", "date")}, tmp_path
        )
    with pytest.raises(ValueError, match="the runs of 'AVX-512 run' repeat a seed"):
        context_page.export_rate(runs * 2, "AVX-512 run", ABOUT, tmp_path)
    context_page.export_rate(runs, "AVX-512 run", ABOUT, tmp_path)
    rate = json.loads((tmp_path / "passkey-rate.json").read_text())
    del rate["sets"]["AVX-512 run"]["capability"]
    with pytest.raises(ValueError, match=r"passkey rate \(AVX-512 run\): missing capability"):
        context_page.rate_text(rate)
    with pytest.raises(ValueError, match="no sets of runs"):
        context_page.rate_text({**rate, "sets": {}})


def _two_kernel_rate(tmp_path, wide: dict[int, float], narrow: dict[int, float], narrow_about=AVX2_ABOUT) -> dict:
    path, ids = _store(tmp_path / "avx512", wide)
    other, other_ids = _store(tmp_path / "avx2", narrow)
    for store_path, accuracies in ((path, wide), (other, narrow)):
        for run in ContextConfig(name="context", seeds=tuple(accuracies)).per_seed():
            ContextStore(store_path).put_model(run.train_id, "rope", {"final_loss": 1.0 + accuracies[run.seed] / 10})
    context_page.export_rate([f"{path}:{cid}" for cid in ids], "AVX-512 run", ABOUT, tmp_path)
    context_page.export_rate([f"{other}:{cid}" for cid in other_ids], "AVX2 run", narrow_about, tmp_path)
    return json.loads((tmp_path / "passkey-rate.json").read_text())


def test_the_rate_states_each_set_with_its_command_and_the_seeds_whose_verdict_differs(tmp_path):
    rate = _two_kernel_rate(tmp_path, {0: 1.0, 1: 0.95, 2: 0.1}, {0: 1.0, 1: 0.0125, 2: 0.1})
    narrow = rate["sets"]["AVX2 run"]
    assert narrow["accuracy_at_L"] == {"0": 1.0, "1": 0.0125, "2": 0.1} and narrow["final_loss"]["1"] == 1.00125
    assert rate["sets"]["AVX-512 run"]["accuracy_at_L"] == {
        "0": 1.0,
        "1": 0.95,
        "2": 0.1,
    }  # the second set kept the first
    assert context_page.retrieves(rate) == {
        "AVX-512 run": {"0": True, "1": True, "2": False},
        "AVX2 run": {"0": True, "1": False, "2": False},
    }
    text = context_page.rate_text(rate)
    # 2 of 3: [0.09, 0.99]; 1 of 3: [0.008, 0.906]
    assert (
        "| AVX-512 run | AVX-512 (AVX512) | aaaaaaa | 2026-11-28 | 2 of 3 | 0.09 to 0.99 | 0: 1, 1: 0.95, 2: 0.1 |"
        in text
    )
    assert "| AVX2 run | AVX2 (AVX2) | aaaaaaa | 2026-11-28 | 1 of 3 | 0.01 to 0.91 | 0: 1, 1: 0.0125, 2: 0.1 |" in text
    assert "- AVX2 run: `ATEN_CPU_CAPABILITY=avx2 posembed lab context --preset context" in text
    assert text.endswith(
        "| AVX-512 run against AVX2 run | kernels | 0, 1, 2 | **not the same** on 1 of 3 (seed 1: 0.95 / 0.0125) |"
    )


def test_the_rate_says_when_the_verdict_is_the_same_and_compares_only_sets_that_differ_in_one_thing(tmp_path):
    rate = _two_kernel_rate(tmp_path, {0: 1.0, 3: 0.5}, {0: 0.85, 3: 0.0})
    assert rate["sets"]["AVX2 run"]["final_loss"] == {"0": 1.085, "3": 1.0}
    assert context_page.rate_text(rate).endswith(
        "| AVX-512 run against AVX2 run | kernels | 0, 3 | the same on each of 2 |"
    )
    later = _two_kernel_rate(tmp_path / "later", {0: 1.0}, {0: 0.0}, {**AVX2_ABOUT, "date": "2026-11-29"})
    assert "against" not in context_page.rate_text(later)  # kernels and day both differ: no comparison
    same_kernels = _two_kernel_rate(tmp_path / "day", {0: 1.0}, {0: 0.0}, {**ABOUT, "date": "2026-11-29"})
    assert context_page.rate_text(same_kernels).endswith(
        "| AVX-512 run against AVX2 run | day | 0 | **not the same** on 1 of 1 (seed 0: 1 / 0) |"
    )
