"""``posembed lab report DIR`` written: :func:`write_report` lays the sections out (summary, answers,
results per task, the run) as markdown and self-contained HTML at once; :func:`build_sections`
orders the questions, :func:`too_small` says when a run cannot conclude (see
:mod:`posembed.lab.report` for what the report holds).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posembed._io import atomic_write_text
from posembed.lab.report.calibration import calibration_section
from posembed.lab.report.decisions import lab_decisions
from posembed.lab.report.plots import length_figure, loss_figure
from posembed.lab.report.questions import (
    Section, exploratory, extrapolation, frozen_vs_trained, learned_vs_sinusoidal, variant_question,
)
from posembed.lab.report.tables import LabData, drift_table, load_lab_data, primary_metric, results_table
from posembed.report import HtmlReport, format_cell

__all__ = ["write_report", "build_sections", "too_small", "SMOKE_PRESETS", "REPORT_MD", "REPORT_HTML"]

logger = logging.getLogger(__name__)

REPORT_MD = "report.md"
REPORT_HTML = "report.html"


class _Document:
    """Writes the same content as markdown lines and into an :class:`HtmlReport`."""

    def __init__(self, title: str) -> None:
        self.html = HtmlReport(title)
        self.lines: list[str] = [f"# {title}", ""]

    def heading(self, text: str, level: int = 2, anchor: str = "") -> None:
        self.html.heading(text, level, anchor)
        self.lines += ([f'<a id="{anchor}"></a>', ""] if anchor else []) + [f"{'#' * level} {text}", ""]

    def banner(self, text: str) -> None:
        self.html.banner(text)
        self.lines += [f"> **Warning:** {text}", ""]

    def links(self, items: Sequence[tuple[str, str]]) -> None:
        """A list of ``(text, anchor)`` items, each linking to its section."""
        self.html.links(items)
        self.lines += [f"- [{text}](#{anchor})" if anchor else f"- {text}" for text, anchor in items] + [""]

    def paragraph(self, text: str, lead: str = "") -> None:
        """A paragraph, optionally opened by a bold ``lead`` (plain in the HTML)."""
        self.html.paragraph(f"{lead} {text}" if lead else text)
        self.lines += [f"**{lead}** {text}" if lead else text, ""]

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.html.table(rows, header=header)
        cell = lambda value: format_cell(value).replace("|", "\\|")  # noqa: E731
        self.lines.append("| " + " | ".join(cell(h) for h in header) + " |")
        self.lines.append("|" + "---|" * len(header))
        self.lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
        self.lines.append("")

    def figure(self, figure, name: str, caption: str) -> None:
        if figure is None:
            return
        self.html.figure(figure, name, caption)
        self.lines += [f"![{caption}]({name}.png)", ""]

    def section(self, section: Section) -> None:
        self.heading(section.title, 3, section.anchor)
        self.paragraph(section.answer, lead="Answer.")
        for text in section.paragraphs:
            self.paragraph(text)
        for header, rows in section.tables:
            self.table(header, rows)


def build_sections(data: LabData) -> list[Section]:
    """The six question sections, in order, from one family of decisions."""
    decisions = lab_decisions(data, exploratory(data))
    return [
        learned_vs_sinusoidal(data, decisions),
        variant_question(data, decisions, "Q2", "Q2. Add or concatenate positions, at equal width?", "concat",
                         "the concat and base variants of an absolute scheme (learned, sinusoidal)", anchor="q2"),
        variant_question(data, decisions, "Q3", "Q3. Inject positions once or at every layer?", "every_layer",
                         "the every_layer and base variants of an absolute scheme", anchor="q3"),
        extrapolation(data, decisions),
        frozen_vs_trained(data, decisions, drift_table(data)),
        calibration_section(data, decisions),
    ]


def _overview(doc: _Document, data: LabData) -> None:
    exp = data.experiment
    doc.heading("The run", anchor="run")
    seeds = sorted({t.config.seed for t in data.trials})
    doc.table(["item", "value"], [
        ["experiment", data.name],
        ["store", str(data.out_dir / "results.sqlite")],
        ["trials reported", len(data.trials)],
        ["corrupt rows skipped", len(data.skipped)],
        ["tasks", ", ".join(data.tasks())],
        ["schemes", ", ".join(dict.fromkeys(t.config.scheme for t in data.trials))],
        ["variants", ", ".join(dict.fromkeys(t.config.variant for t in data.trials))],
        ["seeds", ", ".join(map(str, seeds))],
        ["planned by the experiment", _planned(exp)],
        ["training time (all trials)", f"{sum(t.seconds for t in data.trials):.1f} s"],
    ])
    if data.skipped:
        doc.paragraph(f"{len(data.skipped)} corrupt row(s) in the store were skipped (not in any table or plot):")
        doc.table(["trial", "reason"], [list(item) for item in data.skipped])


#: presets whose models are too small and short for any verdict (they test the pipeline)
SMOKE_PRESETS = ("smoke",)


def too_small(data: LabData, sections: Sequence[Section]) -> str:
    """Why this run cannot conclude (``""`` when it can): a smoke preset, one seed per group, or
    no primary comparison decided (every verdict ``cannot tell``)."""
    reasons = []
    if data.name in SMOKE_PRESETS:
        reasons.append(f"the {data.name!r} preset trains tiny models for a few steps to test the pipeline")
    if max(len(trials) for trials in data.groups().values()) < 2:
        reasons.append("every group has one seed, so nothing can be tested")
    elif not any(s.decided for s in sections):
        reasons.append("no primary comparison decided (every verdict 'cannot tell': see what each could detect)")
    if not reasons:
        return ""
    return ("This run is too small to conclude: " + "; ".join(reasons) + ". No verdict below is a finding; "
            "run `posembed lab run --preset quick` (7 seeds) for answers.")


def _planned(exp: dict[str, Any]) -> str:
    keys = ("tasks", "schemes", "variants", "seeds")
    if not all(isinstance(exp.get(k), list) for k in keys):
        return "unknown (experiment metadata unreadable)"
    return " x ".join(f"{len(exp[k])} {k}" for k in keys)


def _task_results(doc: _Document, data: LabData, task: str) -> None:
    metric = primary_metric(task)
    doc.heading(f"Results: {task}", 3)
    header, rows = results_table(data, task)
    doc.table(header, rows)
    log_y = metric == "perplexity"
    what = "perplexity against context (1x, 2x, 4x, 8x L)" if log_y else f"{metric} against test length"
    doc.figure(length_figure(data, task, metric, log_y=log_y), f"lab-{task}-{metric}", f"{task}: {what} per scheme")
    doc.figure(loss_figure(data, task), f"lab-{task}-loss", f"{task}: training loss curves")


def write_report(out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into ``out_dir`` from its results store.

    Returns:
        ``(markdown_path, html_path)``.

    Raises:
        ValueError: no folder, no store, or no readable trial in it.
    """
    data = load_lab_data(out_dir)
    doc = _Document(f"posembed lab report: {data.name}")
    sections = build_sections(data)
    warning = too_small(data, sections)
    if warning:
        doc.banner(warning)
    seeds = sorted({len(trials) for trials in data.groups().values()})
    doc.heading("Summary", anchor="summary")
    doc.paragraph(f"{data.name}: {len(data.trials)} trials, {'-'.join(map(str, (seeds[0], seeds[-1]))) if len(seeds) > 1 else seeds[0]} "
                  "seed(s) per group; a verdict word is a test with the seed as the unit, Holm over the preset's primary "
                  "comparisons and the paper checks at a family-wise 5 %; 'alike' only within a stated margin; every "
                  "other comparison is exploratory." + (" Not findings: see the warning above." if warning else ""))
    doc.links([(f"{s.title.split('.')[0]}: {s.verdict or 'no verdict (the store lacks its trials)'}", s.anchor)
               for s in sections])
    doc.heading("Answers to the questions", anchor="answers")
    for section in sections:
        doc.section(section)
    doc.heading("Results (mean ± std over seeds)", anchor="results")
    for task in data.tasks():
        _task_results(doc, data, task)
    _overview(doc, data)
    html_path = doc.html.write(data.out_dir / REPORT_HTML)
    for stale in data.out_dir.glob("lab-*.png"):  # figures of an earlier report that this one no longer has
        if stale.stem not in doc.html.image_names:
            stale.unlink()
    md_path = atomic_write_text(data.out_dir / REPORT_MD, "\n".join(doc.lines).rstrip() + "\n")
    logger.info("lab report written: %s, %s", md_path, html_path)
    return md_path, html_path
