"""Report section "Which context extension works?": markdown and HTML from a context study's results.

:func:`context_page` reads a study's :class:`~posembed.lab.report.context_results.Results` once into a
:class:`ContextPage`, every statement of the report (each verdict decided once); ``context.md`` and
``context.html`` only lay that page out (:func:`write_pages`). The page holds:

- verdicts: the primary comparisons, named before the run (the published orderings of
  :data:`~posembed.lab.context.published.CLAIMS`: the method ordering at the longest length and
  what fine-tuning does), decided as one family by :func:`posembed.stats.decide`
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

from posembed.lab.context.published import CLAIMS
from posembed.lab.report.context_results import (
    INTERVAL_NOTE, RETRIEVES, Results, empty_heatmaps, reference_note, reference_rows,
)
from posembed.lab.report.context_verdicts import PRIMARY, retrieval_counts, verdicts

__all__ = ["Results", "ContextPage", "context_page", "write_pages", "write_context_report",
           "verdict_table", "metric_table", "SMOKE_PRESETS"]

#: presets that test the pipeline: too small and short for any verdict
SMOKE_PRESETS = ("context-smoke",)

#: how the verdicts are decided, as the report states it
_RULE = (f"The {len(PRIMARY)} primary comparisons below were named before the run; each is a seed-paired t test "
         "(perplexity on its logarithm), and Holm's method holds the chance of any false 'better' or false 'alike' "
         "over all of them at 5 %. 'Alike' needs an equivalence test (TOST) within the stated margin; 'cannot tell' "
         "gives the smallest difference the test could have detected with 80 % power. Every other number is "
         "exploratory: no test, no winner.")
_VERDICT_HEADER = ["claim", "length", "ours", "seeds", "difference", "p (Holm)", "alike p (Holm)", "verdict"]
_PUBLISHED_HEADER = ["claim", "published", "source", "checked", "why it might not hold here"]


@dataclass(frozen=True)
class ContextPage:
    """Everything the report states, in its order: ``warning`` (why the study cannot conclude, ``""``
    when it can), the ``summary`` links ``(text, anchor)``, the verdict and published rows, passkey
    retrieval in words (``retrieval``, ``empty_note`` on the all-zero heatmaps, whose labels are
    ``empty``), the references' rows and words, and ``(header, rows)`` tables of mean passkey
    accuracy and of perplexity per line and length."""

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

    def markdown(self) -> str:
        """The report as markdown: banner, summary, verdicts, then the evidence (the figures are in the HTML)."""
        parts = [f"## {self.title}"] + ([f"> **Warning:** {self.warning}"] if self.warning else [])
        parts += ["### Summary", "\n".join(f"- [{text}](#{anchor})" for text, anchor in self.summary), self.intro,
                  '<a id="verdicts"></a>', "### Verdicts against the published orderings",
                  _markdown_table(_VERDICT_HEADER, _table_rows(self.verdicts, _VERDICT_HEADER)),
                  "### Where the published figures come from",
                  _markdown_table(_PUBLISHED_HEADER, _table_rows(self.published, _PUBLISHED_HEADER)),
                  '<a id="passkey"></a>', "### Passkey accuracy (mean over depths; exploratory)", self.retrieval,
                  _markdown_table(*self.passkey)] + ([self.empty_note] if self.empty_note else [])
        parts += ['<a id="references"></a>', "### The references past L (exploratory)"]
        if self.references:
            parts.append(_markdown_table(list(self.references[0]), [list(row.values()) for row in self.references]))
        parts += [self.reference_note, '<a id="perplexity"></a>', "### Held-out perplexity (exploratory)",
                  _markdown_table(*self.perplexity)]
        return "\n\n".join(parts) + "\n"


def context_page(results: Results) -> ContextPage:
    """The report's statements about ``results``, each computed once: the numbers first (the
    exploratory ones, then the tested verdicts), then the words around them."""
    references, empty = reference_rows(results), empty_heatmaps(results)
    reference = reference_note(results, references)
    passkey, perplexity = results.table("passkey_mean"), results.table("perplexity")
    decided, counts = verdicts(results), retrieval_counts(results)
    retrieval, rope = _retrieval_note(counts), counts.get("rope")
    return ContextPage(
        title=f"posembed lab context: Which context extension works? ({results.body.get('name', 'study')})",
        warning=_too_small(results, decided),
        summary=[(f"{row['claim']}: {row['verdict']} ({row['ours']})", "verdicts") for row in decided]
        + [(retrieval, "passkey"), (reference, "references")],
        intro=_intro(results), verdicts=decided, published=_published_rows(results, rope), retrieval=retrieval,
        empty=empty, empty_note=_empty_note(results, empty, rope), references=references, reference_note=reference,
        passkey=passkey, perplexity=perplexity)


def write_pages(results: Results, out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``context.md`` and ``context.html`` (with its PNGs) of ``results`` into ``out_dir``; returns both paths."""
    from posembed._io import atomic_write_text

    page = context_page(results)
    text, html = page.markdown(), _html(page, results)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out / "context.md", text), html.write(out / "context.html")


def write_context_report(store_path: str | os.PathLike, out_dir: str | os.PathLike,
                         config_id: str | Sequence[str] | None = None) -> tuple[Path, Path]:
    """:func:`write_pages` of the study in the store (``config_id``: one run, the runs of a study, one
    id per seed, or ``None`` for the store's only study: :meth:`Results.load`)."""
    return write_pages(Results.load(store_path, config_id), out_dir)


def _html(page: ContextPage, results: Results):
    """The page as an :class:`~posembed.report.HtmlReport`, with the figures of ``results``."""
    from posembed.lab.report.context_plots import passkey_figure, perplexity_figure
    from posembed.report import HtmlReport

    passkey, perplexity = passkey_figure(results, skip=set(page.empty)), perplexity_figure(results)
    report = HtmlReport(page.title)
    if page.warning:
        report.banner(page.warning)
    report.heading("Summary", anchor="summary")
    report.links(page.summary)
    report.paragraph(page.intro)
    report.heading("Verdicts against the published orderings", anchor="verdicts")
    report.table(page.verdicts)
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
    report.figure(perplexity, "context_perplexity", "held-out perplexity against the measured lengths (means over seeds)")
    report.table(page.perplexity[1], page.perplexity[0])
    return report


def verdict_table(results: Results) -> str:
    """The primary comparisons' verdicts as a markdown table (the report's and docs/results.md's)."""
    return _markdown_table(_VERDICT_HEADER, _table_rows(verdicts(results), _VERDICT_HEADER))


def metric_table(results: Results, metric: str) -> str:
    """``perplexity`` or ``passkey_mean`` per line and length as a markdown table (exploratory numbers)."""
    return _markdown_table(*results.table(metric))


def _markdown_table(header: list[str], rows: list[list]) -> str:
    from posembed.report import format_cell

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(format_cell(c).replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _table_rows(rows: list[dict], header: list[str]) -> list[list]:
    return [[row[h] for h in header] for row in rows]


def _seeds_text(results: Results) -> str:
    n = len(results.seeds)
    return f"{n} seed{'s' if n != 1 else ''} ({', '.join(map(str, results.seeds))})"


def _count_text(count: tuple[int, int, list[float]]) -> str:
    """``2 of 3 seeds (1, 0.01, 1)``."""
    k, n, values = count
    return f"{k} of {n} seed{'s' if n != 1 else ''} ({', '.join(f'{v:.2g}' for v in values)})"


def _listed(names: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _adjacent_text(body: dict) -> str:
    adjacent = body.get("passkey_adjacent_steps", 0)
    return (f", in the first {adjacent} of them half the rows with the key sentence right before the question"
            if adjacent else "")


def _too_small(results: Results, decided: list[dict]) -> str:
    """Why this study cannot conclude (``""`` when it can): a smoke preset, one seed, or no primary
    comparison that decides (every verdict 'cannot tell', 'not measured' or 'not testable')."""
    reasons = []
    if results.body.get("name") in SMOKE_PRESETS:
        reasons.append(f"the {results.body['name']!r} preset trains tiny models for {results.body['steps']} steps to "
                       "test the pipeline")
    if len(results.seeds) < 2:
        reasons.append("it has one seed, so no number has an interval")
    elif not any(row["verdict"].startswith(("reproduces", "does not")) for row in decided):
        reasons.append("no primary comparison decides (every verdict 'cannot tell', 'not measured' or 'not testable')")
    if not reasons:
        return ""
    return ("This study is too small to conclude: " + "; ".join(reasons) + ". No verdict below is a finding; run "
            "`posembed lab context --preset context` (3 seeds) for answers.")


def _intro(results: Results) -> str:
    body = results.body
    trained = _listed(["rope", *body.get("references", ())])
    return (f"{trained} decoders ({body['depth']} layers, width {body['dim']}) trained on tinyshakespeare characters "
            f"at L = {results.context} ({body['steps']} steps: the first {body.get('passkey_only_steps', 0)} on passkey "
            f"documents alone{_adjacent_text(body)}, then {body['passkey_fraction']:.0%} passkey documents), "
            f"{_seeds_text(results)}; the RoPE model evaluated with each method swapped in, no retraining; "
            f"`rope+<method>@{body['finetune_scale']}x` fine-tuned {body['finetune_steps']} steps at "
            f"{body['finetune_scale']} L; the other schemes are the references, evaluated as they are. {_RULE} "
            f"In the tables {INTERVAL_NOTE}.")


def _published_rows(results: Results, rope: tuple | None) -> list[dict]:
    """Each claim's published figure, its paper and data, how the figure was checked, and why it may
    not hold at this study's scale: the claim's general caveat, then what this run is (its seeds, its
    size, and, for passkey claims, on how many seeds the RoPE model learned retrieval at L: ``rope``)."""
    body = results.body
    rows = []
    for claim in CLAIMS:
        run = (f"This run: {_seeds_text(results)}, width {body['dim']}, {body['depth']} layers, {body['steps']} steps "
               f"at L = {results.context}")
        if claim.better[0].startswith("rope+"):
            run += f", fine-tuned {body['finetune_steps']} steps at {body['finetune_scale']}x"
        if claim.metric == "passkey_mean":
            run += "; RoPE's passkey retrieval at L: " + (_count_text(rope) if rope else "not measured")
        rows.append({"claim": claim.text, "published": claim.published, "source": claim.source,
                     "checked": claim.checked, "why it might not hold here": f"{claim.why_not} {run}."})
    return rows


def _retrieval_note(counts: dict[str, tuple[int, int, list[float]]]) -> str:
    """On how many seeds each model trained at L learned to retrieve the key at L (its own accuracy
    at L, mean over depths, at least :data:`RETRIEVES`): a passkey number past L means something
    only for those (a model that never learned retrieval scores 0 everywhere, whatever its scheme)."""
    if not counts:
        return "Passkey retrieval at L: not measured."
    found = "; ".join(f"{model} {_count_text(count)}" for model, count in counts.items())
    learned = [model for model, (k, _, _) in counts.items() if k]
    return (f"Passkey retrieval learned at L (a seed counts when its accuracy at L, mean over depths, is >= "
            f"{RETRIEVES:.0%}): {found}. The passkey columns past L say something only for seeds that learned it "
            f"({_listed(learned) if learned else 'no model'}).")


def _empty_note(results: Results, empty: list[str], rope: tuple | None) -> str:
    """Why all-zero passkey panels (``empty``) are all zero (``""`` when none is); ``rope``: RoPE's retrieval count."""
    if not empty:
        return ""
    why = ("no model learned to retrieve the key even at the training length L" if len(empty) == len(results.lines)
           else "these models never retrieved the key, at L or beyond")
    rope = "" if not rope else f" (RoPE's retrieval at L: {_count_text(rope)})"
    return (f"Passkey accuracy is 0 at every length and depth for {_listed(empty)}: {why}{rope}. A model that has "
            f"not learned retrieval at L scores 0 everywhere, whatever its positions, so these panels compare "
            f"nothing; it takes a longer passkey curriculum or more steps (this run: {results.body['steps']} steps, "
            f"the first {results.body.get('passkey_only_steps', 0)} on passkeys alone{_adjacent_text(results.body)}).")
