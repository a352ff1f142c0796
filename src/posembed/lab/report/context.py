"""Report section "Which context extension works?": markdown and HTML from a context study's results.

:func:`context_page` reads a study's :class:`~posembed.lab.report.context_results.Results` once into a
:class:`ContextPage`, every statement of the report (each verdict decided once), from the modules
that own them: the verdicts, then the numbers and their words; ``context.md`` and ``context.html``
only lay that page out (:func:`write_pages`). The page holds:

- verdicts: the primary comparisons, named before the run (the published orderings of
  :data:`~posembed.lab.context.published.CLAIMS`: the method ordering at the longest length and
  what fine-tuning does), decided as one family by :func:`posembed.stats.verdict.decide`
  (:mod:`posembed.lab.report.context_verdicts`);
- passkey retrieval at L counted over seeds (``k of n``), then passkey accuracy tables and heatmaps;
- the references (ALiBi, NoPE, FIRE, KERPLE, Sandwich, CoPE, trained at L and evaluated as they
  are) past L and perplexity against length: exploratory numbers, no winner words
  (:mod:`posembed.lab.report.context_results`);
- where each published figure comes from (the papers and their data, :mod:`posembed.lab.context.published`).

Matplotlib is imported only when the HTML is written (:func:`write_pages`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from posembed.lab.report.context_results import (
    Results,
    empty_heatmaps,
    empty_note,
    intro,
    published_rows,
    reference_note,
    reference_rows,
    retrieval_note,
    too_small,
)
from posembed.lab.report.context_verdicts import PRIMARY, retrieval_counts, verdicts

__all__ = [
    "Results",
    "ContextPage",
    "context_page",
    "write_pages",
    "write_context_report",
    "verdict_table",
    "metric_table",
]

#: how the verdicts are decided, as the report states it
_RULE = (
    f"The {len(PRIMARY)} primary comparisons below were named before the run; each is a seed-paired t test "
    "(perplexity on its logarithm), and Holm's method holds the chance of any false 'better' or false 'alike' "
    "over all of them at 5 %. 'Alike' needs an equivalence test (TOST) within the stated margin; 'cannot tell' "
    "gives the smallest difference the test could have detected with 80 % power. Every other number is "
    "exploratory: no test, no winner."
)
_VERDICT_HEADER = ["claim", "length", "ours", "seeds", "difference", "p (Holm)", "alike p (Holm)", "verdict"]
_PUBLISHED_HEADER = ["claim", "published", "source", "checked", "why it might not hold here"]


@dataclass(frozen=True)
class ContextPage:
    """Everything the report states, in its order: ``warning`` (why the study cannot conclude, ``""``
    when it can), the ``summary`` links ``(text, anchor)``, the verdict and published rows, passkey
    retrieval in words (``retrieval``, ``empty_note`` on the all-zero heatmaps, whose labels are
    ``empty``), the references' rows and words, and ``(header, rows)`` tables of mean passkey
    accuracy and of perplexity per line and length; ``results``: what the figures are drawn from."""

    title: str
    warning: str
    summary: list[tuple[str, str]]
    intro: str
    verdicts: list[dict]
    published: list[dict]
    retrieval: str
    empty: list[str]
    empty_note: str
    references: list[dict]
    reference_note: str
    passkey: tuple[list[str], list[list]]
    perplexity: tuple[list[str], list[list]]
    results: Results

    def markdown(self) -> str:
        """The report as markdown: banner, summary, verdicts, then the evidence (the figures are in the HTML)."""
        parts = [f"## {self.title}"] + ([f"> **Warning:** {self.warning}"] if self.warning else [])
        parts += [
            "### Summary",
            "\n".join(f"- [{text}](#{anchor})" for text, anchor in self.summary),
            self.intro,
            '<a id="verdicts"></a>',
            "### Verdicts against the published orderings",
            _markdown_table(_VERDICT_HEADER, _table_rows(self.verdicts, _VERDICT_HEADER)),
            "### Where the published figures come from",
            _markdown_table(_PUBLISHED_HEADER, _table_rows(self.published, _PUBLISHED_HEADER)),
            '<a id="passkey"></a>',
            "### Passkey accuracy (mean over depths; exploratory)",
            self.retrieval,
            _markdown_table(*self.passkey),
        ] + ([self.empty_note] if self.empty_note else [])
        parts += ['<a id="references"></a>', "### The references past L (exploratory)"]
        if self.references:
            parts.append(_markdown_table(list(self.references[0]), [list(row.values()) for row in self.references]))
        parts += [
            self.reference_note,
            '<a id="perplexity"></a>',
            "### Held-out perplexity (exploratory)",
            _markdown_table(*self.perplexity),
        ]
        return "\n\n".join(parts) + "\n"


def context_page(results: Results) -> ContextPage:
    """The report's statements about ``results``, each computed once: the tested verdicts and the
    retrieval counts (:mod:`~posembed.lab.report.context_verdicts`), then the exploratory numbers and
    the words around them all (:mod:`~posembed.lab.report.context_results`)."""
    decided, counts = verdicts(results), retrieval_counts(results)
    references, empty = reference_rows(results), empty_heatmaps(results)
    reference = reference_note(results, references)
    passkey, perplexity = results.table("passkey_mean"), results.table("perplexity")
    retrieval, rope = retrieval_note(counts), counts.get("rope")
    return ContextPage(
        title=f"posembed lab context: Which context extension works? ({results.body.get('name', 'study')})",
        warning=too_small(results, decided),
        summary=[(f"{row['claim']}: {row['verdict']} ({row['ours']})", "verdicts") for row in decided]
        + [(retrieval, "passkey"), (reference, "references")],
        intro=intro(results, _RULE),
        verdicts=decided,
        published=published_rows(results, rope),
        retrieval=retrieval,
        empty=empty,
        empty_note=empty_note(results, empty, rope),
        references=references,
        reference_note=reference,
        passkey=passkey,
        perplexity=perplexity,
        results=results,
    )


def write_pages(page: ContextPage, out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``context.md`` and ``context.html`` (with its PNGs) of ``page`` into ``out_dir``; returns both paths."""
    from posembed._utils.io import atomic_write_text

    text, html = page.markdown(), _html(page)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out / "context.md", text), html.write(out / "context.html")


def write_context_report(
    store_path: str | os.PathLike, out_dir: str | os.PathLike, config_id: str | Sequence[str] | None = None
) -> tuple[Path, Path]:
    """:func:`write_pages` of the study in the store (``config_id``: one run, the runs of a study, one
    id per seed, or ``None`` for the store's only study: :meth:`Results.load`)."""
    return write_pages(context_page(Results.load(store_path, config_id)), out_dir)


def _html(page: ContextPage):
    """The page as an :class:`~posembed._utils.html.HtmlReport`, with the figures of its results."""
    from posembed._utils.html import HtmlReport
    from posembed.lab.report.context_plots import passkey_figure, perplexity_figure

    passkey, perplexity = passkey_figure(page.results, skip=set(page.empty)), perplexity_figure(page.results)
    report = HtmlReport(page.title)
    if page.warning:
        report.banner(page.warning)
    report.heading("Summary", anchor="summary")
    report.links(page.summary)
    report.paragraph(page.intro)
    report.heading("Verdicts against the published orderings", anchor="verdicts")
    report.table([{k: v for k, v in row.items() if k != "decided"} for row in page.verdicts])
    report.heading("Where the published figures come from", anchor="published")
    report.table(page.published)
    report.heading("Passkey retrieval (exploratory)", anchor="passkey")
    report.paragraph(page.retrieval)
    if page.empty_note:
        report.paragraph(page.empty_note)
    if passkey is not None:
        report.figure(passkey, "context_passkey", "passkey accuracy per length (x) and depth (y), means over seeds")
    report.table(page.passkey[1], page.passkey[0])
    report.heading("The references past L (exploratory)", anchor="references")
    report.paragraph(page.reference_note)
    if page.references:
        report.table(page.references)
    report.heading("Perplexity against length (exploratory)", anchor="perplexity")
    report.figure(
        perplexity, "context_perplexity", "held-out perplexity against the measured lengths (means over seeds)"
    )
    report.table(page.perplexity[1], page.perplexity[0])
    return report


def verdict_table(results: Results) -> str:
    """The primary comparisons' verdicts as a markdown table (the report's and docs/results.md's)."""
    return _markdown_table(_VERDICT_HEADER, _table_rows(verdicts(results), _VERDICT_HEADER))


def metric_table(results: Results, metric: str) -> str:
    """``perplexity`` or ``passkey_mean`` per line and length as a markdown table (exploratory numbers)."""
    return _markdown_table(*results.table(metric))


def _markdown_table(header: list[str], rows: list[list]) -> str:
    from posembed._utils.html import format_cell

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(format_cell(c).replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _table_rows(rows: list[dict], header: list[str]) -> list[list]:
    return [[row[h] for h in header] for row in rows]
