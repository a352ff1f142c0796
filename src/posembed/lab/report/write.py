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

from posembed._utils.html import HtmlReport, format_cell
from posembed._utils.io import atomic_write_text
from posembed.lab.presets import PRIMARY, get_preset
from posembed.lab.registration import DECIDES, EXPLORED, describe, registration
from posembed.lab.report.calibration import calibration_section
from posembed.lab.report.decisions import lab_decisions
from posembed.lab.report.plots import length_figure, loss_figure
from posembed.lab.report.questions import (
    Section,
    exploratory,
    extrapolation,
    frozen_vs_trained,
    learned_vs_sinusoidal,
    untested_elsewhere,
    variant_question,
)
from posembed.lab.report.tables import LabData, drift_table, load_lab_data, primary_metric, results_table

__all__ = ["write_report", "build_sections", "too_small", "confirmation", "SMOKE_PRESETS", "REPORT_MD", "REPORT_HTML"]

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
        variant_question(
            data,
            decisions,
            "Q2",
            "Q2. Add or concatenate positions, at equal width?",
            "concat",
            "the concat and base variants of an absolute scheme (learned, sinusoidal)",
            anchor="q2",
        ),
        variant_question(
            data,
            decisions,
            "Q3",
            "Q3. Inject positions once or at every layer?",
            "every_layer",
            "the every_layer and base variants of an absolute scheme",
            anchor="q3",
        ),
        extrapolation(data, decisions),
        frozen_vs_trained(data, decisions, drift_table(data)),
        calibration_section(data, decisions),
    ]


def _overview(doc: _Document, data: LabData) -> None:
    exp = data.experiment
    doc.heading("The run", anchor="run")
    seeds = sorted({t.config.seed for t in data.trials})
    doc.table(
        ["item", "value"],
        [
            ["experiment", data.name],
            ["store", str(data.out_dir / "results.sqlite")],
            ["trials reported", len(data.trials)],
            ["corrupt rows skipped", len(data.skipped)],
            ["tasks", ", ".join(data.tasks())],
            ["schemes", ", ".join(dict.fromkeys(t.config.scheme for t in data.trials))],
            ["variants", ", ".join(dict.fromkeys(t.config.variant for t in data.trials))],
            ["seeds", ", ".join(map(str, seeds))],
            ["planned by the experiment", _planned(exp)],
            [
                "training time, summed over the trials",
                f"{sum(t.seconds for t in data.trials):.1f} s (each trial's own "
                "training time added up; the wall time is shorter where workers trained trials side by side, longer by "
                "start-up and evaluation)",
            ],
        ],
    )
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
    planned = get_preset(data.name).seeds if data.name == DECIDES else ()
    have = {t.config.seed for t in data.trials}
    if planned and not set(planned) <= have:
        reasons.append(f"the study is interim: {len(have & set(planned))} of its {len(planned)} seeds have reported")
    if max(len(trials) for trials in data.groups().values()) < 2:
        reasons.append("every group has one seed, so nothing can be tested")
    elif not any(s.decided for s in sections):
        reasons.append("no primary comparison decided (every verdict 'cannot tell': see what each could detect)")
    if not reasons:
        return ""
    return (
        "This run is too small to conclude: " + "; ".join(reasons) + ". No verdict below is a finding; "
        f"run `posembed lab run --preset quick` (a preview on {len(get_preset('quick').seeds)} seeds) or "
        f"`posembed lab run --preset {DECIDES}` (the study) for answers."
    )


def _seeds_text(seeds: Sequence[int]) -> str:
    """``0-6`` for a run of consecutive seeds, else the list.

    >>> _seeds_text([0, 1, 2, 3]), _seeds_text([1000, 1002])
    ('0-3', '1000, 1002')
    """
    seeds = sorted(seeds)
    return (
        f"{seeds[0]}-{seeds[-1]}"
        if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2
        else ", ".join(map(str, seeds))
    )


def confirmation(data: LabData) -> list[str]:
    """Which seeds explored and which confirmed, the record made before the run, and for a preview
    (its seeds explored, or a preset other than the study) the study that decides."""
    seeds = sorted({t.config.seed for t in data.trials})
    entry = registration(data.name)
    record = data.registration
    explored = tuple(record["explored_seeds"]) if record and "explored_seeds" in record else EXPLORED
    reused = sorted(set(seeds) & set(explored))
    lines = [
        f"Seeds {_seeds_text(explored)} explored: the questions were named after their results. This run's seeds "
        f"are {_seeds_text(seeds)}: "
        + (
            f"{'all' if len(reused) == len(seeds) else 'some'} of them explored "
            f"({_seeds_text(reused)}), so its verdicts preview, they do not confirm."
            if reused
            else "none explored, so its verdicts confirm on fresh seeds."
        )
    ]
    if record is None:
        lines.append(
            "This store holds no record of its questions made before the run (it predates the record, or "
            "the preset declares none): its questions are the package's today."
        )
    elif "source" in record:  # a run whose code predates the store's record: the committed file is the record
        lines.append(
            f"The questions were declared in `{record['source']}`, committed at "
            f"{record.get('declared_at', '?')} before the run's first trial trained (the run, at commit "
            f"{str(record.get('run_commit', '?'))[:7]}, predates the store's own record, so that file is it)."
        )
    else:
        lines.append(
            f"The questions were declared at commit {record.get('declared_at', '?')} and recorded in this "
            f"store when the run (commit {str(record.get('run_commit', '?'))[:7]}) claimed it, before its "
            "first trial trained."
        )
    if (
        record is not None
        and entry is not None
        and record.get("questions") != [describe(a) for a in PRIMARY.get(data.name, ())]
    ):
        lines.append(
            "The package's questions have changed since this run recorded its own: the report tests "
            "today's, so its verdicts are not the run's pre-declared ones."
        )
    if data.name != DECIDES:
        full = get_preset(DECIDES)
        base = full.base("charlm")
        lines.append(
            f"This {data.name!r} run is a preview at its scale; the study that decides these questions is "
            f"`posembed lab run --preset {DECIDES} --out lab-{DECIDES}` ({base.depth} layers, width {base.dim}, "
            f"context {base.context}, {base.steps} steps, seeds {_seeds_text(full.seeds)})."
        )
    return lines


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
    per_group = f"{seeds[0]} to {seeds[-1]}" if len(seeds) > 1 else f"{seeds[0]}"
    doc.paragraph(
        f"{data.name}: {len(data.trials)} trials, {per_group} seed{'s' if seeds[-1] > 1 else ''} per group; "
        "a verdict word is a test with the seed as the unit, Holm over the preset's primary comparisons at "
        "every training point and the paper checks at a family-wise 5 %; 'alike' only within a stated "
        "margin; every other comparison is exploratory." + (" Not findings: see the warning above." if warning else "")
    )
    doc.links([(f"{s.title}: {s.verdict or 'no verdict (the store lacks its trials)'}", s.anchor) for s in sections])
    for line in confirmation(data):
        doc.paragraph(line)
    doc.heading("Answers to the questions", anchor="answers")
    for section in sections:
        doc.section(section)
    doc.heading("Questions this run does not test", 3, "elsewhere")
    doc.links([(line, "") for line in untested_elsewhere()])
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
