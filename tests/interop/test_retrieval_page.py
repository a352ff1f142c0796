"""docs/checkpoints.md's extend-eval numbers and verdict words are regenerated from results/extend/."""

import json
import re
from pathlib import Path

import pytest

from posembed.interop.extend.retrieval_report import PAGE_BLOCKS, page_blocks, read_stored, wilson

ROOT = Path(__file__).resolve().parents[2]
STORED = ROOT / "results" / "extend"
PAGE = ROOT / "docs" / "checkpoints.md"

pytest.importorskip("scipy")


def test_the_page_holds_what_the_stored_run_gives():
    from tools.pages import check_block

    blocks = page_blocks(*read_stored(STORED))
    page = PAGE.read_text(encoding="utf-8")
    problems = [message for name in PAGE_BLOCKS for message in check_block(page, name, blocks[name])]
    assert not problems, "\n".join(problems) + "\nrun: python results/extend/regenerate.py"


def test_every_stored_cell_is_its_outcomes():
    protocol, cells, meta, _ = read_stored(STORED)
    assert len({tuple(c["data_seeds"]) for c in cells}) == 1 and len(cells[0]["data_seeds"]) >= 2
    for cell in cells:
        hits = [o[1] for o in cell["outcomes"]]
        assert cell["queries"] == len(hits) == protocol["queries"] * len(cell["data_seeds"])
        assert cell["hits"] == sum(hits) and cell["accuracy"] == sum(hits) / len(hits)
        assert (cell["low"], cell["high"]) == wilson(sum(hits), len(hits))
        assert [o[2] for o in cell["outcomes"]] == [s for s in cell["data_seeds"] for _ in range(protocol["queries"])]
    for key in ("command", "commit", "threads", "device", "load", "date", "wall_seconds", "cpu_seconds"):
        assert meta[key], key


def test_the_extend_eval_prose_types_no_number_of_its_own():
    page = PAGE.read_text(encoding="utf-8")
    section = page[page.index("## `posembed extend-eval`") : page.index("## `posembed rope check`")]
    for name in PAGE_BLOCKS:
        start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
        section = section[: section.index(start)] + section[section.index(end) + len(end) :]
    assert not re.findall(r"\b0\.\d+", section), "an accuracy or p typed by hand outside the generated blocks"


def test_the_chunk_weighting_record_matches_the_stored_documents():
    protocol, cells, _, chunk = read_stored(STORED)
    if chunk is None:
        pytest.skip("no chunk_weights.json stored")
    at = {(c["task"], c["length"]): c for c in cells if c["system"] == f"chunk-{protocol['chunk']}"}
    for row in chunk["rows"]:
        stored = [o[1] for o in at[row["task"], row["length"]]["outcomes"] if o[2] == row["seed"]]
        assert row["hits_tokens"] == stored  # the token-weighted hits are the run's own
        assert row["changed"] == sum(a != b for a, b in zip(row["hits_tokens"], row["hits_equal"]))
    assert json.loads(json.dumps(chunk))["protocol"]["chunk"] == protocol["chunk"]
