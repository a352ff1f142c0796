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
BLOCKS = ("context-run", "context-passkey-rate", "context-verdicts", "context-perplexity", "context-passkey")


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
    for kernels in (rate, rate["avx2"]):  # each kernel set names its command, commit, machine and capability
        assert all(kernels[key] for key in context_page.ABOUT) and len(kernels["commit"]) == 40
        assert len(kernels["runs"]) == len(kernels["accuracy_at_L"]) == len(kernels["final_loss"])
    seeds = {row["seed"] for row in study["rows"]}
    # the study's seeds are among the rate's, with the same RoPE accuracy at L
    assert {str(s) for s in seeds} <= set(rate["accuracy_at_L"])
    results = context_page.load_study()
    for seed in seeds:
        assert results.per_seed("rope", "extrapolate", results.context, "passkey_mean")[seed] == \
            rate["accuracy_at_L"][str(seed)]


def _store(tmp_path: Path, accuracies: dict[int, float]) -> tuple[Path, list[str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = ContextStore(tmp_path / "context.sqlite")
    ids = []
    for run in ContextConfig(name="context", seeds=tuple(accuracies)).per_seed():
        store.put_config(run.config_id, run.name, run.to_dict())
        store.put(run.config_id, "rope", "extrapolate", 96, [("passkey_mean", NO_DEPTH, accuracies[run.seed]),
                                                            ("perplexity", NO_DEPTH, 6.0 + run.seed)])
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


ABOUT = {"command": "posembed lab context --preset context --out DIR --set seeds=0,1,2", "commit": "a" * 40,
         "machine": "cpu: 2 cores", "capability": "AVX512"}
AVX2_ABOUT = {**ABOUT, "command": "ATEN_CPU_CAPABILITY=avx2 " + ABOUT["command"], "capability": "AVX2"}


def test_the_rate_counts_seeds_at_the_criterion_with_an_exact_interval(tmp_path):
    path, ids = _store(tmp_path, {0: 1.0, 1: 0.79, 2: 0.8})
    context_page.export_rate([f"{path}:{cid}" for cid in ids], tmp_path, about=ABOUT)
    rate = json.loads((tmp_path / "passkey-rate.json").read_text())
    assert rate["accuracy_at_L"] == {"0": 1.0, "1": 0.79, "2": 0.8} and rate["criterion"] == 0.8
    assert {key: rate[key] for key in ABOUT} == ABOUT and "avx2" not in rate
    text = context_page.rate_text(rate)
    # 0.8 counts, 0.79 does not: 2 of 3; Clopper-Pearson for 2 of 3 is [0.094, 0.992]
    assert text.startswith("**RoPE learns passkey retrieval at L** on 2 of 3 seeds with torch's AVX-512 kernels "
                           "(capability AVX512; exact 95 % Clopper-Pearson interval of the rate: 0.09 to 0.99; "
                           "`posembed lab context --preset context --out DIR --set seeds=0,1,2` at commit aaaaaaa, "
                           "cpu: 2 cores).")
    assert text.endswith("Per seed: seed 0: 1, seed 1: 0.79, seed 2: 0.8.")
    every = context_page.rate_text({**rate, "accuracy_at_L": {"0": 1.0, "1": 0.9}})
    assert "on 2 of 2 seeds" in every and "interval of the rate: 0.16 to 1.00" in every


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
        context_page.export_rate([f"{store.path}:{run.config_id}"], tmp_path, about=ABOUT)


def test_a_rate_without_its_command_commit_machine_or_capability_is_refused(tmp_path):
    path, ids = _store(tmp_path, {0: 1.0})
    runs = [f"{path}:{ids[0]}"]
    with pytest.raises(ValueError, match="the AVX-512 runs need machine, capability"):
        context_page.export_rate(runs, tmp_path, about={"command": "c", "commit": "a" * 40})
    with pytest.raises(ValueError, match="the AVX2 runs need command, commit, machine, capability"):
        context_page.export_rate(runs, tmp_path, about=ABOUT, avx2=runs)
    context_page.export_rate(runs, tmp_path, about=ABOUT, avx2=runs, avx2_about=AVX2_ABOUT)
    rate = json.loads((tmp_path / "passkey-rate.json").read_text())
    del rate["avx2"]["capability"]
    with pytest.raises(ValueError, match=r"passkey rate \(avx2\): missing capability"):
        context_page.rate_text(rate)
    with pytest.raises(ValueError, match="the AVX-512 runs repeat a seed"):
        context_page.export_rate(runs * 2, tmp_path, about=ABOUT)


def _two_kernel_rate(tmp_path, wide: dict[int, float], narrow: dict[int, float]) -> dict:
    path, ids = _store(tmp_path / "avx512", wide)
    other, other_ids = _store(tmp_path / "avx2", narrow)
    for store_path, accuracies in ((path, wide), (other, narrow)):
        for run in ContextConfig(name="context", seeds=tuple(accuracies)).per_seed():
            ContextStore(store_path).put_model(run.train_id, "rope", {"final_loss": 1.0 + accuracies[run.seed] / 10})
    context_page.export_rate([f"{path}:{cid}" for cid in ids], tmp_path, about=ABOUT,
                             avx2=[f"{other}:{cid}" for cid in other_ids], avx2_about=AVX2_ABOUT)
    return json.loads((tmp_path / "passkey-rate.json").read_text())


def test_the_rate_states_both_kernel_sets_with_their_commands_and_the_seeds_whose_verdict_differs(tmp_path):
    rate = _two_kernel_rate(tmp_path, {0: 1.0, 1: 0.95, 2: 0.1}, {0: 1.0, 1: 0.0125, 2: 0.1})
    assert rate["avx2"]["accuracy_at_L"] == {"0": 1.0, "1": 0.0125, "2": 0.1} and rate["avx2"]["capability"] == "AVX2"
    assert context_page.retrieves(rate) == {"avx512": {"0": True, "1": True, "2": False},
                                            "avx2": {"0": True, "1": False, "2": False}}
    text = context_page.rate_text(rate)
    # 2 of 3: [0.09, 0.99]; 1 of 3: [0.008, 0.906]
    assert ("on 2 of 3 seeds with torch's AVX-512 kernels (capability AVX512; exact 95 % Clopper-Pearson interval "
            "of the rate: 0.09 to 0.99; `posembed lab context --preset context --out DIR --set seeds=0,1,2`") in text
    assert ("on 1 of 3 seeds with torch's AVX2 kernels (capability AVX2; exact 95 % Clopper-Pearson interval of the "
            "rate: 0.01 to 0.91; `ATEN_CPU_CAPABILITY=avx2 posembed lab context") in text
    assert ("**The verdict is not the same on both kernel sets**: on 1 of the 3 seeds run on both it differs (seed 1 "
            "retrieves on AVX-512 (accuracy 0.95, final loss 1.09500) and does not on AVX2 (accuracy 0.0125, final "
            "loss 1.00125))") in text
    assert text.endswith("Per seed (accuracy at L, AVX-512 / AVX2): seed 0: 1 / 1, seed 1: 0.95 / 0.0125, "
                         "seed 2: 0.1 / 0.1.")


def test_the_rate_says_when_the_verdict_is_the_same_on_both_kernel_sets(tmp_path):
    rate = _two_kernel_rate(tmp_path, {0: 1.0, 3: 0.5}, {0: 0.85, 3: 0.0})
    text = context_page.rate_text(rate)
    assert "The verdict is the same on both kernel sets on each of the 2 seeds run on both." in text
    assert "not the same" not in text


def test_the_rate_compares_on_the_seeds_run_on_both_and_names_an_earlier_run_that_differs(tmp_path):
    rate = _two_kernel_rate(tmp_path, {0: 1.0, 1: 0.95, 2: 0.1}, {1: 0.05})
    rate["avx2"]["earlier"] = [{"seed": 1, "accuracy_at_L": 0.0125, "final_loss": 1.1039555, "date": "2026-11-27"}]
    text = context_page.rate_text(rate)
    assert "on 0 of 1 seeds with torch's AVX2 kernels" in text
    assert "On the 1 seeds run on both kernel sets the AVX-512 rate is 1 of 1." in text
    assert "on 1 of the 1 seeds run on both it differs (seed 1 retrieves on AVX-512" in text
    assert text.endswith("Per seed (accuracy at L, AVX-512 / AVX2): seed 1: 0.95 / 0.05. An earlier AVX2 run of seed 1 "
                         "(2026-11-27, same command and commit) gave accuracy 0.0125 and final loss 1.10396: the same "
                         "verdict, not the same numbers.")
