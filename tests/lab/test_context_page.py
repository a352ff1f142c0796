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
BLOCKS = ("context-run", "context-passkey-rate", "context-core-share", "context-verdicts", "context-perplexity", "context-passkey")


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


def test_the_rate_counts_seeds_at_the_criterion_with_an_exact_interval(tmp_path):
    path, ids = _store(tmp_path, {0: 1.0, 1: 0.79, 2: 0.8})
    context_page.export_rate([f"{path}:{cid}" for cid in ids], tmp_path)
    rate = json.loads((tmp_path / "passkey-rate.json").read_text())
    assert rate["accuracy_at_L"] == {"0": 1.0, "1": 0.79, "2": 0.8} and rate["criterion"] == 0.8
    text = context_page.rate_text(rate)
    # 0.8 counts, 0.79 does not: 2 of 3; Clopper-Pearson for 2 of 3 is [0.094, 0.992]
    assert text.startswith("**RoPE learns passkey retrieval at L on 2 of 3 seeds**")
    assert "interval: 0.09 to 0.99" in text and text.endswith("Per seed: seed 0: 1, seed 1: 0.79, seed 2: 0.8.")
    every = context_page.rate_text({**rate, "accuracy_at_L": {"0": 1.0, "1": 0.9}})
    assert "on 2 of 2 seeds" in every and "interval: 0.16 to 1.00" in every


def test_a_run_without_the_rope_passkey_row_is_refused(tmp_path):
    store = ContextStore(tmp_path / "context.sqlite")
    run = ContextConfig(name="context", seeds=(0,)).per_seed()[0]
    store.put_config(run.config_id, run.name, run.to_dict())
    with pytest.raises(ValueError, match="no passkey accuracy of rope at L = 96"):
        context_page.export_rate([f"{store.path}:{run.config_id}"], tmp_path)


def test_the_rate_names_a_run_on_other_kernels_with_its_loss_and_accuracy(tmp_path):
    path, ids = _store(tmp_path / "avx512", {1: 0.95})
    other, other_ids = _store(tmp_path / "avx2", {1: 0.0125})
    for store_path, loss in ((path, 1.0814178), (other, 1.1039555)):
        run = ContextConfig(name="context", seeds=(1,)).per_seed()[0]
        ContextStore(store_path).put_model(run.train_id, "rope", {"final_loss": loss})
    context_page.export_rate([f"{path}:{ids[0]}"], tmp_path, avx2=f"{other}:{other_ids[0]}")
    rate = json.loads((tmp_path / "passkey-rate.json").read_text())
    assert rate["final_loss"] == {"1": 1.0814178} and rate["avx2"]["accuracy_at_L"] == 0.0125
    assert context_page.rate_text(rate).endswith(
        "The same command for seed 1 on torch's AVX2 kernels instead of AVX-512 (same code, seed and thread) trains a "
        "different model: final loss 1.10396 against 1.08142, passkey accuracy at L 0.0125 against 0.95.")
