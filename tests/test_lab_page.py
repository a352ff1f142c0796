"""``tools/lab_page.py`` on a synthetic store with evaluations during training and the matched loss:
what it stores (``during`` with its steps, the runner's record of the questions) reads back as the
report reads the store, and the page block it writes holds every question at every training point."""

from __future__ import annotations

import json

import numpy as np
import pytest

from posembed.lab.report.decisions import lab_decisions
from posembed.lab.report.simulate import null_data
from posembed.lab.report.tables import load_lab_data
from tests.lab.test_report_design import LATE, write_store
from tools import lab_page

META = {
    "command": "posembed lab run --preset quick --out lab-quick",
    "commit": "abc1234",
    "device": "CPU",
    "wall": "1 s",
    "cpu": "1 s",
    "threads": 1,
    "workers": 2,
    "load": "1.0",
    "date": "2026-11-28T00:00:00+00:00",
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    out = write_store(tmp_path_factory.mktemp("store"), null_data(np.random.default_rng(5), shift=LATE))
    root = tmp_path_factory.mktemp("results")
    lab_page.store(out, "quick-synthetic", META, root=root)
    return out, root


def test_store_exports_during_and_the_record_and_load_run_reads_them_back(stored):
    out, root = stored
    rows = json.loads((root / "quick-synthetic" / "trials.json").read_text(encoding="utf-8"))
    assert all(len(r["during"]) == 2 * 6 for r in rows)  # 2 points x (val_loss, matched_loss, perplexity) x 2 lengths
    assert {e[4] for r in rows for e in r["during"]} == {30, 90}
    meta = json.loads((root / "quick-synthetic" / "meta.json").read_text(encoding="utf-8"))
    assert meta["registration"]["preset"] == "quick" and meta["registration"]["deciding_seeds"] == list(range(7))
    data, _ = lab_page.load_run("quick-synthetic", root)
    direct = load_lab_data(out)
    assert data.points() == direct.points() == (0.1, 0.3, 1.0)
    ours, theirs = lab_decisions(data), lab_decisions(direct)
    assert {n: d.word for n, d in ours.by_name.items()} == {n: d.word for n, d in theirs.by_name.items()}


def test_the_run_block_holds_every_question_at_every_point_and_the_confirmation(stored):
    _, root = stored
    block = lab_page.blocks(root)["lab-quick-synthetic"]
    assert "| Q3 | sinusoidal | 10 % (step 30) |" in block and "| Q3 | sinusoidal | 100 % (end) |" in block
    assert "| Q1. Learned or sinusoidal positions, at the training length? |" in block
    assert "Seeds 0-6 explored" in block and "`posembed lab run --preset full --out lab-full`" in block
    assert "NAME" not in block


def test_the_simulation_block_says_what_was_simulated(tmp_path):
    path = tmp_path / "simulation.json"
    found = lab_page.simulate(3, path=path)
    assert found["reports"] == 3 and found["looks"] > 30 and json.loads(path.read_text()) == found
    text = lab_page._simulation_block(path)
    assert (
        text.startswith("3 simulated `quick` reports in which no group differs")
        and "results/lab/simulation.json" in text
    )


def test_the_full_study_is_simulated_on_its_own_seeds_and_questions(tmp_path):
    found = lab_page.simulate(2, path=tmp_path / "simulation-full.json", preset="full")
    assert found["preset"] == "full" and found["command"].endswith("--preset full")
    assert lab_page.simulation_path("full").name == "simulation-full.json"
    assert lab_page.simulation_path("quick").name == "simulation.json"
    text = lab_page._simulation_block(tmp_path / "simulation-full.json")
    assert text.startswith("2 simulated `full` reports") and "results/lab/simulation-full.json" in text
    # the study's family: its seeds (8) and every arm it trains
    from posembed.lab.report.simulate import null_data

    data = null_data(np.random.default_rng(0), "full")
    assert {len(t) for t in data.groups().values()} == {8}


def test_the_study_block_names_its_committed_preregistration():
    # the study ran on code that predates the store's record: the committed file is its record
    block = lab_page.blocks()["lab-full"]
    assert "none explored, so its verdicts confirm on fresh seeds" in block
    assert "declared in `results/lab/full/PREREGISTRATION.md`, committed at 2c031c6" in block
    assert "holds no record" not in block and "changed since" not in block
    assert "96 trials, 8 seeds per group" in block
