"""Report section "Which context extension works?": markdown and HTML from a context study's store.

- verdicts: the primary comparisons, named before the run (the published orderings of
  :data:`~posembed.lab.context.published.CLAIMS`: the method ordering at the longest length and
  what fine-tuning does), decided as one family by :func:`posembed.stats.decide`
  (:mod:`posembed.lab.report.context_verdicts`);
- passkey retrieval at L counted over seeds (``k of n``), then passkey accuracy tables and heatmaps;
- the references (ALiBi, NoPE, FIRE, KERPLE, Sandwich, CoPE, trained at L and evaluated as they
  are) past L (:func:`reference_rows`, :func:`reference_note`) and perplexity against length:
  exploratory numbers, no winner words;
- where each published figure comes from (the papers and their data, :mod:`posembed.lab.context.published`).

Matplotlib is imported only when the HTML is written (:func:`write_context_report`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from posembed.lab.context.published import CLAIMS
from posembed.lab.report.context_results import INTERVAL_NOTE, Results, display_name, paper_of
from posembed.lab.report.context_verdicts import PRIMARY, RETRIEVES, retrieval_counts, verdicts

__all__ = [
    "Results", "verdicts", "context_markdown", "retrieval_note", "reference_rows", "reference_note",
    "write_context_report", "too_small", "empty_heatmaps", "RETRIEVES", "FLAT", "SMOKE_PRESETS", "published_rows",
    "verdict_table", "metric_table",
]

#: relative perplexity change (longest length against L, means) within which a reference is described as flat
FLAT = 0.05


def _why_not(results: Results, claim) -> str:
    """The claim's general caveat, then what this run is: its seeds, its size, and, for passkey
    claims, on how many seeds the RoPE model learned retrieval at L."""
    body = results.body
    run = (f"This run: {_seeds_text(results)}, width {body['dim']}, {body['depth']} layers, {body['steps']} steps at "
           f"L = {results.context}")
    if claim.better[0].startswith("rope+"):
        run += f", fine-tuned {body['finetune_steps']} steps at {body['finetune_scale']}x"
    if claim.metric == "passkey_mean":
        counts = retrieval_counts(results).get("rope")
        run += "; RoPE's passkey retrieval at L: " + (_count_text(counts) if counts else "not measured")
    return f"{claim.why_not} {run}."


def published_rows(results: Results) -> list[dict]:
    """Each claim's published figure, its paper and data, how the figure was checked, and why it may
    not hold at this study's scale."""
    return [{"claim": claim.text, "published": claim.published, "source": claim.source, "checked": claim.checked,
             "why it might not hold here": _why_not(results, claim)} for claim in CLAIMS]


def _seeds_text(results: Results) -> str:
    n = len(results.seeds)
    return f"{n} seed{'s' if n != 1 else ''} ({', '.join(map(str, results.seeds))})"


def _count_text(count: tuple[int, int, list[float]]) -> str:
    """``2 of 3 seeds (1, 0.01, 1)``."""
    k, n, values = count
    return f"{k} of {n} seed{'s' if n != 1 else ''} ({', '.join(f'{v:.2g}' for v in values)})"


def retrieval_note(results: Results) -> str:
    """On how many seeds each model trained at L learned to retrieve the key at L (its own accuracy
    at L, mean over depths, at least :data:`RETRIEVES`): a passkey number past L means something
    only for those (a model that never learned retrieval scores 0 everywhere, whatever its scheme)."""
    counts = retrieval_counts(results)
    if not counts:
        return "Passkey retrieval at L: not measured."
    found = "; ".join(f"{display_name(model)} {_count_text(count)}" for model, count in counts.items())
    learned = [display_name(model) for model, (k, _, _) in counts.items() if k]
    return (f"Passkey retrieval learned at L (a seed counts when its accuracy at L, mean over depths, is >= "
            f"{RETRIEVES:.0%}): {found}. The passkey columns past L say something only for seeds that learned it "
            f"({_listed(learned) if learned else 'no model'}).")


def _listed(names: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _references(results: Results) -> list[str]:
    return [model for model, method in results.lines if method == "none"]


def _perplexity_word(at_l: float | None, longest: float | None) -> str:
    """A description of one reference's mean ratio (no test): within :data:`FLAT`, falls or rises."""
    from posembed.lab.verdicts import FAIL_RATIO

    if at_l is None or longest is None:
        return "not measured"
    ratio = longest / at_l
    if abs(ratio - 1.0) <= FLAT:
        return f"flat (within {FLAT:.0%})"
    if ratio < 1.0:
        return "falls"
    return f"fails (>= {FAIL_RATIO:g}x)" if ratio >= FAIL_RATIO else "rises"


def reference_rows(results: Results) -> list[dict]:
    """One row per reference (exploratory, means over the seeds): perplexity at L and at the longest
    length, their ratio and its description, passkey accuracy at L and the best past L."""
    context, longest = results.context, max(results.lengths, default=0)
    rows = []
    for model in _references(results):
        at_l = results.value(model, "none", context, "perplexity")
        at_max = results.value(model, "none", longest, "perplexity")
        past = [(n, results.value(model, "none", n, "passkey_mean")) for n in results.lengths if n > context]
        past = [(n, v) for n, v in past if v is not None]
        best = max(past, key=lambda item: item[1], default=None)
        rows.append({
            "reference": display_name(model), "paper": paper_of(model), "perplexity at L": at_l,
            f"at {longest // context}x": at_max,
            "ratio": None if at_l is None or at_max is None else at_max / at_l,
            "perplexity past L": _perplexity_word(at_l, at_max),
            "passkey at L": results.value(model, "none", context, "passkey_mean"),
            "max passkey past L": "not measured" if best is None else (
                "0" if best[1] == 0 else f"{best[1]:.2f} at {best[0] // context}x"),
        })
    return rows


def reference_note(results: Results) -> str:
    """The references in words, exploratory (means, no test): which stay within :data:`FLAT` of their
    perplexity at L, the range of the references and of RoPE's methods at the longest length, and
    which reach :data:`RETRIEVES` passkey accuracy past L."""
    models = _references(results)
    if not models:
        return "No reference was trained in this study."
    context, longest = results.context, max(results.lengths)
    scale = f"{longest // context}x"
    rows = reference_rows(results)
    flat = [row["reference"] for row in rows if row["perplexity past L"].startswith("flat")]
    parts = [f"Exploratory (means over the seeds, no test): references whose mean perplexity at {scale} is within "
             f"{FLAT:.0%} of their mean at L: {', '.join(flat) or 'none'}."]
    at_max = [v for m in models if (v := results.value(m, "none", longest, "perplexity")) is not None]
    rope = [v for model, method in results.lines if model == "rope"
            if (v := results.value("rope", method, longest, "perplexity")) is not None]
    if at_max:
        text = f"Mean perplexity at {scale}: references {min(at_max):.3g} to {max(at_max):.3g}"
        if rope:
            text += f"; RoPE's methods without fine-tuning {min(rope):.3g} to {max(rope):.3g}"
        parts.append(text + " (which of them differ is not tested here).")
    past = {model: max((results.value(model, "none", n, "passkey_mean") or 0.0) for n in results.lengths if n > context)
            for model in models if any(n > context for n in results.lengths)}
    retrieving = [f"{display_name(m)} {v:.2f}" for m, v in past.items() if v >= RETRIEVES]
    above = [f"{display_name(m)} {v:.2f}" for m, v in past.items() if 0 < v < RETRIEVES]
    parts.append(f"Passkey past L (each reference's highest mean accuracy over the longer lengths): >= {RETRIEVES:.0%} for "
                 f"{', '.join(retrieving) or 'no reference'}" + (f"; above 0 for {', '.join(above)}" if above else "") + ".")
    return " ".join(parts)


def _markdown_table(header: list[str], rows: list[list]) -> str:
    from posembed.report import format_cell

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(format_cell(c).replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _metric_rows(results: Results, metric: str) -> tuple[list[str], list[list]]:
    header = ["model / method", *[f"{n // results.context}x ({n})" for n in results.lengths]]
    rows = [[results.label(line), *[results.cell(*line, n, metric) for n in results.lengths]] for line in results.lines]
    return header, rows


#: presets that test the pipeline: too small and short for any verdict
SMOKE_PRESETS = ("context-smoke",)


def too_small(results: Results) -> str:
    """Why this study cannot conclude (``""`` when it can): a smoke preset, one seed, or no primary
    comparison that decides (every verdict 'cannot tell', 'not measured' or 'not testable')."""
    reasons = []
    if results.body.get("name") in SMOKE_PRESETS:
        reasons.append(f"the {results.body['name']!r} preset trains tiny models for {results.body['steps']} steps to "
                       "test the pipeline")
    if len(results.seeds) < 2:
        reasons.append("it has one seed, so no number has an interval")
    elif not any(row["verdict"].startswith(("reproduces", "does not")) for row in verdicts(results)):
        reasons.append("no primary comparison decides (every verdict 'cannot tell', 'not measured' or 'not testable')")
    if not reasons:
        return ""
    return ("This study is too small to conclude: " + "; ".join(reasons) + ". No verdict below is a finding; run "
            "`posembed lab context --preset context` (3 seeds) for answers.")


def empty_heatmaps(results: Results) -> list[str]:
    """Labels of the lines whose passkey accuracy is 0 at every length and depth."""
    return [results.label(line) for line in results.lines
            if (values := [results.value(*line, n, "passkey", d) for n in results.lengths for d in results.depths])
            and all(v is not None for v in values) and max(values) == 0.0]


def empty_heatmap_note(results: Results) -> str:
    """Why all-zero passkey panels are all zero ("" when none is)."""
    empty = empty_heatmaps(results)
    if not empty:
        return ""
    counts = retrieval_counts(results).get("rope")
    why = ("no model learned to retrieve the key even at the training length L" if len(empty) == len(results.lines)
           else "these models never retrieved the key, at L or beyond")
    rope = "" if not counts else f" (RoPE's retrieval at L: {_count_text(counts)})"
    return (f"Passkey accuracy is 0 at every length and depth for {_listed(empty)}: {why}{rope}. A model that has "
            f"not learned retrieval at L scores 0 everywhere, whatever its positions, so these panels compare "
            f"nothing; it takes a longer passkey curriculum or more steps (this run: {results.body['steps']} steps, "
            f"the first {results.body.get('passkey_only_steps', 0)} on passkeys alone{_adjacent_text(results.body)}).")


def _summary(results: Results) -> list[tuple[str, str]]:
    """The summary's ``(line, anchor)`` s: each primary comparison's verdict, then retrieval and the references."""
    items = [(f"{row['claim']}: {row['verdict']} ({row['ours']})", "verdicts") for row in verdicts(results)]
    items.append((retrieval_note(results), "passkey"))
    items.append((reference_note(results), "references"))
    return items


def _title(results: Results) -> str:
    return f"posembed lab context: Which context extension works? ({results.body.get('name', 'study')})"


def _adjacent_text(body: dict) -> str:
    adjacent = body.get("passkey_adjacent_steps", 0)
    return (f", in the first {adjacent} of them half the rows with the key sentence right before the question"
            if adjacent else "")


def _intro(results: Results) -> str:
    body = results.body
    trained = _listed([display_name(m) for m in ("rope", *body.get("references", ()))])
    return (f"{trained} decoders ({body['depth']} layers, width {body['dim']}) trained on tinyshakespeare characters "
            f"at L = {results.context} ({body['steps']} steps: the first {body.get('passkey_only_steps', 0)} on passkey "
            f"documents alone{_adjacent_text(body)}, then {body['passkey_fraction']:.0%} passkey documents), "
            f"{_seeds_text(results)}; the RoPE model evaluated with each method swapped in, no retraining; "
            f"`rope+<method>@{body['finetune_scale']}x` fine-tuned {body['finetune_steps']} steps at "
            f"{body['finetune_scale']} L; the other schemes are the references, evaluated as they are. {_RULE} "
            f"In the tables {INTERVAL_NOTE}.")


#: how the verdicts are decided, as the report states it
_RULE = (f"The {len(PRIMARY)} primary comparisons below were named before the run; each is a seed-paired t test "
         "(perplexity on its logarithm), and Holm's method holds the chance of any false 'better' or false 'alike' "
         "over all of them at 5 %. 'Alike' needs an equivalence test (TOST) within the stated margin; 'cannot tell' "
         "gives the smallest difference the test could have detected with 80 % power. Every other number is "
         "exploratory: no test, no winner.")

_VERDICT_HEADER = ["claim", "length", "ours", "seeds", "difference", "p (Holm)", "alike p (Holm)", "verdict"]
_PUBLISHED_HEADER = ["claim", "published", "source", "checked", "why it might not hold here"]


def _table_rows(rows: list[dict], header: list[str]) -> list[list]:
    return [[row[h] for h in header] for row in rows]


def verdict_table(results: Results) -> str:
    """The primary comparisons' verdicts as a markdown table (the report's and docs/results.md's)."""
    return _markdown_table(_VERDICT_HEADER, _table_rows(verdicts(results), _VERDICT_HEADER))


def metric_table(results: Results, metric: str) -> str:
    """``perplexity`` or ``passkey_mean`` per line and length as a markdown table (exploratory numbers)."""
    return _markdown_table(*_metric_rows(results, metric))


def context_markdown(results: Results) -> str:
    """The report as markdown: banner, summary, verdicts, then the evidence (the figures are in the HTML)."""
    parts = [f"## {_title(results)}"]
    warning = too_small(results)
    if warning:
        parts.append(f"> **Warning:** {warning}")
    parts += ["### Summary", "\n".join(f"- [{text}](#{anchor})" for text, anchor in _summary(results)),
              _intro(results), '<a id="verdicts"></a>', "### Verdicts against the published orderings",
              verdict_table(results),
              "### Where the published figures come from",
              _markdown_table(_PUBLISHED_HEADER, _table_rows(published_rows(results), _PUBLISHED_HEADER)),
              '<a id="passkey"></a>', "### Passkey accuracy (mean over depths; exploratory)", retrieval_note(results),
              metric_table(results, "passkey_mean")]
    if empty_heatmap_note(results):
        parts.append(empty_heatmap_note(results))
    parts += ['<a id="references"></a>', "### The references past L (exploratory)"]
    references = reference_rows(results)
    if references:
        parts.append(_markdown_table(list(references[0]), [list(row.values()) for row in references]))
    parts += [reference_note(results), '<a id="perplexity"></a>', "### Held-out perplexity (exploratory)",
              metric_table(results, "perplexity")]
    return "\n\n".join(parts) + "\n"


def write_context_report(store_path: str | os.PathLike, out_dir: str | os.PathLike,
                         config_id: str | Sequence[str] | None = None) -> tuple[Path, Path]:
    """Write ``context.md`` and ``context.html`` (with its PNGs) into ``out_dir``; returns both paths.

    ``config_id``: one run, the runs of a study (one id per seed), or ``None`` for the store's only study.
    """
    from posembed._io import atomic_write_text
    from posembed.lab.report.context_plots import passkey_figure, perplexity_figure
    from posembed.report import HtmlReport

    results = Results.load(store_path, config_id)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    markdown = atomic_write_text(out / "context.md", context_markdown(results))
    report = HtmlReport(_title(results))
    warning = too_small(results)
    if warning:
        report.banner(warning)
    report.heading("Summary", anchor="summary")
    report.links(_summary(results))
    report.paragraph(_intro(results))
    report.heading("Verdicts against the published orderings", anchor="verdicts")
    report.table(verdicts(results))
    report.heading("Where the published figures come from", anchor="published")
    report.table(published_rows(results))
    report.heading("Passkey retrieval (exploratory)", anchor="passkey")
    report.paragraph(retrieval_note(results))
    if empty_heatmap_note(results):
        report.paragraph(empty_heatmap_note(results))
    passkey = passkey_figure(results, skip=set(empty_heatmaps(results)))
    if passkey is not None:
        report.figure(passkey, "context_passkey", "passkey accuracy per length (x) and depth (y), means over seeds")
    report.table(*reversed(_metric_rows(results, "passkey_mean")))
    report.heading("The references past L (exploratory)", anchor="references")
    report.paragraph(reference_note(results))
    if reference_rows(results):
        report.table(reference_rows(results))
    report.heading("Perplexity against length (exploratory)", anchor="perplexity")
    report.figure(perplexity_figure(results), "context_perplexity",
                  "held-out perplexity against the measured lengths (means over seeds)")
    report.table(*reversed(_metric_rows(results, "perplexity")))
    return markdown, report.write(out / "context.html")
