"""``posembed lab report``: a real (tiny) sweep trained by the lab's runner, reported, and checked
against the store's own numbers (mean/std recomputed here from raw SQL)."""

from __future__ import annotations

import re
import shutil
import sqlite3
import statistics
from pathlib import Path

import pytest

from posembed.cli import main
from posembed.lab.config import apply_overrides
from posembed.lab.presets import get_preset
from posembed.lab.report import write_report
from posembed.lab.sweep.runner import run_experiment
from posembed.lab.sweep.store import ResultsStore
from tests.browser import render_images

#: the smoke preset cut down to seconds: 2 tasks x (learned: base/concat/frozen, sinusoidal: base/concat) x 2 seeds
TINY = [
    "tasks=copy,charlm",
    "schemes=learned,sinusoidal",
    "variants=base,concat,frozen",
    "seeds=0,1",
    "steps=3",
    "log_every=1",
    "dim=16",
    "heads=2",
    "batch=8",
    "copy.context=4",
    "charlm.context=8",
]


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lab") / "tiny"
    run_experiment(apply_overrides(get_preset("smoke"), TINY), out, checkpoints=False, progress=False)
    return out


@pytest.fixture(scope="module")
def report(lab_dir) -> tuple[Path, Path]:
    return write_report(lab_dir)


def md_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Markdown pipe tables keyed by the nearest heading above them; rows as {column: cell}."""
    tables: dict[str, list[dict[str, str]]] = {}
    heading, header = "", None
    for line in text.splitlines():
        if line.startswith("#"):
            heading, header = line.lstrip("# ").strip(), None
        elif line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            if header is None:
                header = cells
                tables.setdefault(heading, [])
            else:
                tables[heading].append(dict(zip(header, cells, strict=True)))
        elif not line.startswith("|"):
            header = None
    return tables


def raw_values(lab_dir: Path, sql: str, *args) -> list:
    with sqlite3.connect(lab_dir / "results.sqlite") as conn:
        return [row[0] for row in conn.execute(sql, args)]


def expected_cell(values: list[float]) -> str:
    mean, std = statistics.fmean(values), statistics.stdev(values)
    return f"{mean:.4g} ± {std:.2g}"


def expected_interval(values: list[float]) -> str:
    """Mean of two seeds and their range, labelled as such (not a 95 % interval)."""
    assert len(values) == 2
    return f"{statistics.fmean(values):.4g} [{min(values):.4g}, {max(values):.4g}] (2 seeds: their range)"


def section(text: str, title_start: str) -> str:
    start = text.index(f"### {title_start}")
    end = text.find("\n### ", start + 1)
    return text[start:] if end < 0 else text[start:end]


@pytest.mark.slow
def test_report_has_every_section_table_and_plot(report, lab_dir):
    md_path, html_path = report
    assert (md_path, html_path) == (lab_dir / "report.md", lab_dir / "report.html")
    text = md_path.read_text()
    for title in (
        "Q1. Learned or sinusoidal",
        "Q2. Add or concatenate",
        "Q3. Inject positions once",
        "Q4. Which scheme extrapolates",
        "Q5. Frozen or trained",
        "Q6. Do the published numbers hold here",
    ):
        assert f"### {title}" in text
    pngs = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", text)
    assert set(pngs) == {
        "lab-copy-exact_match.png",
        "lab-copy-loss.png",
        "lab-charlm-perplexity.png",
        "lab-charlm-loss.png",
    }
    for name in pngs:
        assert (lab_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = html_path.read_text()
    assert (
        page.count('<img src="data:image/png;base64,') == len(pngs) and "Q6. Do the published numbers hold here" in page
    )


def test_report_opens_with_a_banner_and_a_linked_summary_then_the_evidence(report):
    md, page = report[0].read_text(), report[1].read_text()
    # the smoke preset is a pipeline test: a banner says so before anything else, and no verdict is a finding
    assert md.index("> **Warning:** This run is too small to conclude: the 'smoke' preset") < md.index("## Summary")
    assert '<p class="banner">' in page and page.index('class="banner"') < page.index('id="summary"')
    order = [
        md.index(heading)
        for heading in (
            "## Summary",
            "## Answers to the questions",
            "### Q1.",
            "### Q6.",
            "## Results (mean ± std over seeds)",
            "## The run",
        )
    ]
    assert order == sorted(order)
    for q in range(1, 7):  # each summary line carries its question (issue 41), not "Q1: learned better"
        assert f'<a href="#q{q}">Q{q}. ' in page and f'<h3 id="q{q}">Q{q}.' in page
        assert f"- [Q{q}. " in md and f'<a id="q{q}"></a>' in md
    assert "- [Q3. Inject positions once or at every layer?: no verdict (the store lacks its trials)](#q3)" in md
    assert "Not findings: see the warning above." in md


def test_results_tables_equal_the_stores_mean_and_std(report, lab_dir):
    tables = md_tables(report[0].read_text())
    checked = 0
    for task, metric in (("copy", "exact match"), ("charlm", "perplexity")):
        rows = {(r["scheme"], r["variant"]): r for r in tables[f"Results: {task}"]}
        assert set(rows) == {
            ("learned", "base"),
            ("learned", "concat"),
            ("learned", "frozen"),
            ("sinusoidal", "base"),
            ("sinusoidal", "concat"),
        }
        for (scheme, variant), row in rows.items():
            assert row["seeds"] == "2"
            lengths = raw_values(
                lab_dir,
                "SELECT DISTINCT e.length FROM evals e JOIN trials t USING (trial_id) "
                "WHERE t.task = ? AND e.metric = ? ORDER BY 1",
                task,
                metric.replace(" ", "_"),
            )
            for length in lengths:
                values = raw_values(
                    lab_dir,
                    "SELECT e.value FROM evals e JOIN trials t USING (trial_id) WHERE t.task=? "
                    "AND t.scheme=? AND t.variant=? AND e.metric=? AND e.length=? ORDER BY t.seed",
                    task,
                    scheme,
                    variant,
                    metric.replace(" ", "_"),
                    length,
                )
                assert len(values) == 2
                column = next(c for c in row if c.startswith(f"{metric} at {length} ("))
                assert row[column] == expected_cell(values)
                assert float(row[column].split(" ± ")[0]) == pytest.approx(statistics.fmean(values), rel=1e-3, abs=1e-9)
                checked += 1
    assert checked >= 2 * 5 * 4


def test_question_answers_use_the_stored_numbers(report, lab_dir):
    text = report[0].read_text()
    tables = md_tables(text)
    # Q2: add vs concat for learned at the training length: the seeds' values, their mean and range
    q2 = {r["comparison"]: r for r in tables[next(k for k in tables if k.startswith("Q2."))]}
    for task, metric, length in (("copy", "exact_match", 4), ("charlm", "val_loss", 8)):
        for scheme in ("learned", "sinusoidal"):
            add, concat = (
                [
                    v
                    for v in raw_values(
                        lab_dir,
                        "SELECT e.value FROM evals e JOIN trials t USING (trial_id) WHERE t.task=? AND t.scheme=? "
                        "AND t.variant=? AND e.metric=? AND e.length=? ORDER BY t.seed",
                        task,
                        scheme,
                        variant,
                        metric,
                        length,
                    )
                ]
                for variant in ("base", "concat")
            )
            row = q2[f"{task}: {scheme} concat vs {scheme} add, {metric} at L"]
            assert row["A"] == f"{scheme} add: {expected_interval(add)}"
            assert row["B"] == f"{scheme} concat: {expected_interval(concat)}"
            delta = statistics.fmean(concat) - statistics.fmean(add)
            assert float(row["Δ = B − A [95 % interval]"].split(" ")[0]) == pytest.approx(delta, abs=1e-3)
            assert row["test"] == "seed-paired t"
            # smoke names no primary comparison of its own: quick's (charlm) are asked of it, and 2 seeds decide nothing
            primary = task == "charlm"  # Q2 asks learned AND sinusoidal (issue 40)
            assert row["verdict"] == ("cannot tell" if primary else "exploratory")
    # Q3 has no every_layer trial here: it says so and names the presets that have them
    assert "lacks the trials" in section(text, "Q3.") and "NAME" not in text
    assert "`posembed lab run --preset full` or `posembed lab run --preset quick`" in section(text, "Q3.")
    # Q5: the trained table's drift is the store's; the frozen table did not move
    drift = {
        (r["task"], r["variant"]): r
        for r in tables[next(k for k in tables if k.startswith("Q5."))]
        if "drift ||W − W0|| / ||W0||" in r
    }
    for task in ("copy", "charlm"):
        moved = raw_values(
            lab_dir, "SELECT drift_rel_frobenius FROM trials WHERE task=? AND scheme='learned' AND variant='base'", task
        )
        assert drift[(task, "base")]["drift ||W − W0|| / ||W0||"] == expected_cell(moved) and min(moved) > 0
        assert drift[(task, "frozen")]["drift ||W − W0|| / ||W0||"] == "0 ± 0"
    assert "no stored trial trains nanoGPT's CPU recipe" in section(text, "Q6.")


def test_extrapolation_ranking_follows_the_means_beyond_training_length(report, lab_dir):
    tables = md_tables(report[0].read_text())
    ranking = tables[next(k for k in tables if k.startswith("Q4."))]
    charlm = [r for r in ranking if "charlm: order of the means" in r]
    means = {}
    for scheme in ("learned", "sinusoidal"):
        per_length = [
            statistics.fmean(
                raw_values(
                    lab_dir,
                    "SELECT e.value FROM evals e JOIN trials t USING (trial_id) WHERE t.task='charlm' AND "
                    "t.scheme=? AND t.variant='base' AND e.metric='val_loss' AND e.length=?",
                    scheme,
                    n,
                )
            )
            for n in (16, 32, 64)
        ]  # 2x, 4x, 8x of context 8
        means[scheme] = statistics.fmean(per_length)
    assert [r["scheme"] for r in charlm] == sorted(means, key=means.get)
    for row in charlm:
        assert float(row["mean beyond L [interval]"].split(" [")[0]) == pytest.approx(means[row["scheme"]], rel=1e-3)
        assert row["mean beyond L [interval]"].endswith("(2 seeds: their range)")


def test_corrupt_rows_are_reported_and_skipped(lab_dir, tmp_path):
    out = tmp_path / "corrupt"
    out.mkdir()
    shutil.copy(lab_dir / "results.sqlite", out / "results.sqlite")
    with sqlite3.connect(out / "results.sqlite") as conn:
        ids = [r[0] for r in conn.execute("SELECT trial_id FROM trials ORDER BY rowid")]
        conn.execute("UPDATE trials SET config_json = '{not json' WHERE trial_id = ?", (ids[0],))
        conn.execute("UPDATE evals SET value = 'garbage' WHERE trial_id = ? AND length = 4", (ids[1],))
        conn.execute("UPDATE curves SET loss = 'x' WHERE trial_id = ? AND step = 2", (ids[2],))
    md_path, _ = write_report(out)
    text = md_path.read_text()
    overview = {r["item"]: r["value"] for r in md_tables(text)["The run"] if "item" in r}
    assert overview["trials reported"] == str(len(ids) - 3) and overview["corrupt rows skipped"] == "3"
    skipped = {r["trial"]: r["reason"] for r in md_tables(text)["The run"] if "trial" in r}
    assert set(skipped) == set(ids[:3])
    assert "garbage" in skipped[ids[1]] and "loss curve" in skipped[ids[2]]


def test_empty_store_missing_store_and_garbage_file_are_clear_errors(tmp_path):
    ResultsStore(tmp_path / "empty", apply_overrides(get_preset("smoke"), TINY)).close()
    with pytest.raises(ValueError, match="holds no finished trials"):
        write_report(tmp_path / "empty")
    (tmp_path / "nostore").mkdir()
    with pytest.raises(ValueError, match="holds no results.sqlite"):
        write_report(tmp_path / "nostore")
    with pytest.raises(ValueError, match="is not a folder"):
        write_report(tmp_path / "absent")
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "results.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ValueError, match="not a posembed results store"):
        write_report(tmp_path / "garbage")


def test_cli_reports_and_fails_in_one_line(report, lab_dir, tmp_path, capsys):
    assert main(["lab", "report", str(lab_dir)]) == 0
    assert "report.html" in capsys.readouterr().out
    ResultsStore(tmp_path, apply_overrides(get_preset("smoke"), TINY)).close()
    assert main(["lab", "report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no finished trials" in err


@pytest.mark.browser
def test_every_image_of_the_report_loads_in_chromium(report):
    rendered = render_images(report[1])
    assert rendered.count == 4 and rendered.all_loaded


def test_too_small_names_one_seed_and_undecided_primaries_and_is_silent_when_a_verdict_stands():
    from posembed.lab.report import build_sections, too_small
    from tests.lab.test_report_questions import charlm, lab

    def pair(values_a, values_b, name="quick"):
        trials = [charlm("learned", v, 2 * v, seed=s) for s, v in enumerate(values_a)]
        trials += [charlm("sinusoidal", v, 2 * v, seed=s) for s, v in enumerate(values_b)]
        data = lab(*trials)
        data.experiment["name"] = name
        return too_small(data, build_sections(data))

    apart = ((10.0, 10.1, 9.9, 10.05), (12.0, 12.1, 11.95, 12.02))
    assert pair(*apart) == ""  # Q1 decides: learned better
    assert "every group has one seed" in pair((10.0,), (12.0,))
    assert "no primary comparison decided" in pair((10.0, 12.0, 9.0), (11.0, 9.5, 12.5))
    assert "the 'smoke' preset" in pair(*apart, name="smoke")
