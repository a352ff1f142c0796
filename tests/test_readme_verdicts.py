"""docs/results.md's lab sections say what the stored results and ``posembed lab report`` say.

Every ``<!-- generated:lab-* -->`` block is regenerated from ``results/lab/`` by
``tools/lab_page.py`` (the report's own decisions on the stored per-seed results) and must equal
the page; every stored run has its block; and the prose of the sections holds no number typed by
hand (no decimal outside a generated block).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools import lab_page, pages

PAGE = Path(__file__).resolve().parents[1] / "docs" / "results.md"
SECTIONS = ("## What the lab measured here", "## Length generalisation")
#: what a meta.json must say about the run that made the results beside it
META = {"command", "commit", "threads", "workers", "device", "load", "date", "wall", "experiment", "trials"}


def section_text(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:] if end < 0 else text[start:end]


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return lab_page.blocks()


def test_every_lab_block_is_what_the_stored_results_give(generated):
    page = PAGE.read_text(encoding="utf-8")
    problems = [p for name, text in generated.items() for p in pages.check_block(page, name, text)]
    assert not problems, "\n".join(problems) + "\n(rewrite with: python tools/lab_page.py write)"


def test_every_lab_block_on_the_page_has_stored_results(generated):
    on_page = {n for n in pages.block_names(PAGE.read_text(encoding="utf-8")) if n.startswith("lab-")}
    assert on_page == set(generated)


@pytest.mark.parametrize(
    "folder",
    sorted(p for p in lab_page.RESULTS.iterdir() if p.is_dir() and (p / "trials.json").is_file()),
    ids=lambda p: p.name,
)
def test_each_stored_run_names_what_made_it(folder):
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert META <= set(meta), META - set(meta)
    trials = json.loads((folder / "trials.json").read_text(encoding="utf-8"))
    assert len(trials) == meta["trials"] and re.fullmatch(r"[0-9a-f]{7,40}", meta["commit"])
    assert (
        folder / "trials.json"
    ).stat().st_size < 400_000  # per-seed values at each training point, never checkpoints


@pytest.mark.parametrize("title", SECTIONS)
def test_no_number_is_typed_by_hand(title):
    text = section_text(title)
    for name in pages.block_names(text):
        text = pages.replace_block(text, name, "")
    assert not re.findall(r"\d+\.\d+", text), re.findall(r".{30}\d+\.\d+.{10}", text)


def test_the_page_quotes_the_report_verdict_of_a_stored_run():
    """The quoted verdict is the report's: recompute one family member straight from the store."""
    from posembed.lab.report.decisions import lab_decisions

    data, _ = lab_page.load_run("quick-4d3ea1e")
    (q1,) = lab_decisions(data).primaries("Q1")
    block = pages.read_block(PAGE.read_text(encoding="utf-8"), "lab-quick-4d3ea1e")
    assert f"| {q1.word} |" in next(line for line in block.splitlines() if line.startswith("| charlm: sinusoidal vs"))


def test_a_folder_without_results_is_a_study_named_before_its_run():
    """results/lab/full holds only its preregistration until the study has run."""
    for folder in (p for p in lab_page.RESULTS.iterdir() if p.is_dir() and not (p / "trials.json").is_file()):
        assert (folder / "PREREGISTRATION.md").is_file(), folder


def test_the_page_states_the_simulated_rate_of_the_whole_procedure():
    sim = json.loads(lab_page.SIMULATION.read_text(encoding="utf-8"))
    block = pages.read_block(PAGE.read_text(encoding="utf-8"), "lab-simulation")
    assert f"named a false winner in {sim['rate']:.2%}" in block and sim["rate"] <= 0.05 + 2 * sim["standard_error"]
