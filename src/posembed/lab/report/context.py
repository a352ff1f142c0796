"""Report section "Which context extension works?": markdown and HTML from a context study's store.

- perplexity against length, one line per (model, method) (plot + table);
- passkey accuracy heatmaps (length x depth), one per (model, method), and a mean table;
- the references (ALiBi, NoPE, FIRE, KERPLE, Sandwich, CoPE, trained at L and evaluated as they
  are): whether each keeps its perplexity flat to the longest length, whether any retrieves the
  passkey past L, and how the best of them compares with RoPE's best extension
  (:func:`reference_rows`, :func:`reference_note`);
- verdicts: each published ordering of :data:`~posembed.lab.context.published.CLAIMS` checked
  on this study's numbers ("reproduces", "does not reproduce", "not measured"), with the
  published figure beside it and why it might not hold at this scale.

Matplotlib is imported only when the HTML is written (:func:`write_context_report`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from posembed.lab.context.published import CLAIMS, Claim
from posembed.lab.context.store import NO_DEPTH, ContextStore
from posembed.lab.verdicts import CONFIDENCE, ONE_SEED, Interval

__all__ = [
    "Results", "verdicts", "context_markdown", "retrieval_note", "reference_rows", "reference_note",
    "write_context_report", "too_small", "empty_heatmaps", "TIE", "RETRIEVES", "FLAT", "NAMES", "SMOKE_PRESETS",
]

#: relative perplexity difference under which two methods count as tied
TIE = 0.02
#: passkey accuracy difference under which two methods count as tied
PASSKEY_MARGIN = 0.05
#: passkey accuracy at L from which a model counts as having learned retrieval
RETRIEVES = 0.8
#: relative perplexity change (longest length against L) within which a reference counts as flat
FLAT = 0.05
#: how the text names the study's models
NAMES = {"rope": "RoPE", "alibi": "ALiBi", "nope": "NoPE", "fire": "FIRE", "kerple": "KERPLE (log)",
         "sandwich": "Sandwich", "cope": "CoPE"}


class Results:
    """A study's rows over its seeds, indexed: ``value(model, method, length, metric, depth=-1)`` is
    the mean over the seeds that have it, :meth:`interval` its 95 % bootstrap interval over them.

    ``rows`` may carry a ``seed`` (rows without one are seed ``body["seed"]``, 0 by default).
    """

    def __init__(self, rows: list[dict], body: dict) -> None:
        self.body = body
        self._values: dict[tuple, list[float]] = {}
        for r in rows:
            if r["value"] is not None:
                self._values.setdefault((r["model"], r["method"], r["length"], r["metric"], r["depth"]), []).append(
                    r["value"])
        self.seeds = sorted({r.get("seed", body.get("seed", 0)) for r in rows})
        self.context = int(body["context"])
        self.lengths = sorted({r["length"] for r in rows})
        self.lines = sorted({(r["model"], r["method"]) for r in rows}, key=_line_order)
        self.depths = sorted({r["depth"] for r in rows if r["metric"] == "passkey"})

    @classmethod
    def load(cls, store_path: str | os.PathLike, config_id: str | Sequence[str] | None = None) -> "Results":
        """The study of the store: one run's ``config_id``, the runs (one per seed) of a list of ids,
        or, when omitted, every run of the only study the store holds (runs that differ only in
        their seed make one study)."""
        store = ContextStore(store_path)
        configs = store.configs()
        if config_id is None:
            studies: dict[str, list[str]] = {}
            for cid, (_, body) in configs.items():
                studies.setdefault(_study_key(body), []).append(cid)
            if len(studies) != 1:
                raise ValueError(f"{store_path} holds {len(studies)} studies; name one of: {', '.join(configs) or 'none'}")
            ids = next(iter(studies.values()))
        else:
            ids = [config_id] if isinstance(config_id, str) else list(config_id)
        missing = [cid for cid in ids if cid not in configs]
        if missing:
            raise ValueError(f"study {', '.join(missing)} is not in {store_path}; it holds: {', '.join(configs) or 'none'}")
        bodies = sorted((configs[cid][1] for cid in ids), key=lambda body: body.get("seed", 0))
        rows = [dict(row, seed=configs[cid][1].get("seed", 0)) for cid in ids for row in store.rows(cid)]
        return cls(rows, {**bodies[0], "name": configs[ids[0]][0]})

    def value(self, model: str, method: str, length: int, metric: str, depth: float = NO_DEPTH) -> float | None:
        values = self._values.get((model, method, length, metric, depth))
        return sum(values) / len(values) if values else None

    def interval(self, model: str, method: str, length: int, metric: str, depth: float = NO_DEPTH) -> Interval:
        """The mean over the seeds and its 95 % bootstrap interval (``n`` 0 when not measured)."""
        return Interval.of(self._values.get((model, method, length, metric, depth), []))

    def cell(self, model: str, method: str, length: int, metric: str) -> str | float | None:
        """A table cell: the bare value for one seed, ``mean [low, high]`` for several."""
        found = self.interval(model, method, length, metric)
        if found.n <= 1:
            return self.value(model, method, length, metric)
        return found.text()

    def label(self, line: tuple[str, str]) -> str:
        model, method = line
        return model if method in ("none",) or model.startswith("rope+") else f"{model} / {method}"


def _study_key(body: dict) -> str:
    """What the runs of one study share: the config less its seed (and the study's seed list)."""
    return json.dumps({k: v for k, v in body.items() if k not in ("seed", "seeds", "name")}, sort_keys=True)


def _line_order(line: tuple[str, str]) -> tuple:
    from posembed.lab.context import METHODS
    from posembed.lab.context.presets import REFERENCES

    model, method = line
    group = 0 if model == "rope" else (2 if model.startswith("rope+") else 1)
    known = REFERENCES.index(model) if model in REFERENCES else len(REFERENCES)
    return (group, METHODS.index(method) if method in METHODS else 99, known, model)


def _claim_length(results: Results, claim: Claim) -> int | None:
    body = results.body
    wanted = {"max": max(results.lengths, default=0), "ft": results.context * body["finetune_scale"],
              "2ft": results.context * body["finetune_scale"] * 2}[claim.scale]
    return wanted if wanted in results.lengths else None


def _model(name: str, body: dict) -> str:
    return f"{name}@{body['finetune_scale']}x" if name.startswith("rope+") else name


def verdicts(results: Results) -> list[dict]:
    """One row per published claim: our two numbers (means and 95 % intervals over the seeds), the
    verdict, the published figure, and why it may differ in this run."""
    out = []
    for claim in CLAIMS:
        length = _claim_length(results, claim)
        metric = "perplexity" if claim.metric == "perplexity_tie" else claim.metric
        better = worse = Interval.of(())
        if length is not None:
            better = results.interval(_model(claim.better[0], results.body), claim.better[1], length, metric)
            worse = results.interval(_model(claim.worse[0], results.body), claim.worse[1], length, metric)
        out.append({
            "claim": claim.text, "length": length, "ours": _ours(claim, better, worse),
            "seeds": min(better.n, worse.n), "verdict": _verdict(claim, better, worse), "published": claim.published,
            "source": claim.source, "checked": claim.checked, "why it might not hold here": _why_not(results, claim),
        })
    return out


def _ours(claim: Claim, better: Interval, worse: Interval) -> str:
    """``"yarn 11 [10, 12] vs linear 32 [30, 34]"`` (a reference by its name; one seed: the bare values)."""
    if not better.n or not worse.n:
        return "not measured"

    def side(key: tuple[str, str], found: Interval) -> str:
        name = NAMES.get(key[0], key[0]) if key[1] == "none" else key[1]
        return f"{name} {found.text() if found.n > 1 else f'{found.mean:.4g}'}"

    return f"{side(claim.better, better)} vs {side(claim.worse, worse)}"


def _verdict(claim: Claim, better: Interval, worse: Interval) -> str:
    """The claim's verdict on the two intervals: ``cannot tell`` wherever they overlap (or one seed)."""
    if not better.n or not worse.n:
        return "not measured"
    if claim.metric == "passkey_mean" and max(better.high, worse.high) == 0.0:
        return "not testable (both retrieve nothing)"
    if better.n < 2 or worse.n < 2:
        return ONE_SEED
    tie = TIE * min(better.low, worse.low) if claim.metric != "passkey_mean" else PASSKEY_MARGIN
    widest = max(abs(better.high - worse.low), abs(worse.high - better.low))
    if claim.metric == "perplexity_tie":
        if widest <= tie:
            return "reproduces"
        return "cannot tell" if better.overlaps(worse) else "does not reproduce"
    if widest <= tie:
        return "does not reproduce (tie)"
    if better.overlaps(worse):
        return "cannot tell"
    lower_wins = claim.metric == "perplexity"
    return "reproduces" if (better.mean < worse.mean) == lower_wins else "does not reproduce (reversed)"


def _why_not(results: Results, claim: Claim) -> str:
    """The claim's general caveat, then what this run is: its seeds, its size, and, for passkey
    claims, whether the RoPE model learned retrieval at L."""
    body = results.body
    run = (f"This run: {_seeds_text(results)}, width {body['dim']}, {body['depth']} layers, {body['steps']} steps at "
           f"L = {results.context}")
    if claim.better[0].startswith("rope+"):
        run += f", fine-tuned {body['finetune_steps']} steps at {body['finetune_scale']}x"
    if claim.metric == "passkey_mean":
        at_l = results.interval("rope", "extrapolate", results.context, "passkey_mean")
        learned = "not measured" if not at_l.n else (
            f"{at_l.text(2)}, {'learned' if at_l.mean >= RETRIEVES else 'not learned'} (>= {RETRIEVES:.0%})")
        run += f"; RoPE's passkey accuracy at L: {learned}"
    return f"{claim.why_not} {run}."


def _seeds_text(results: Results) -> str:
    n = len(results.seeds)
    return f"{n} seed{'s' if n != 1 else ''} ({', '.join(map(str, results.seeds))})"


def retrieval_note(results: Results) -> str:
    """Which models trained at L retrieve the key at L: a passkey comparison past L means something
    only for those (a model that never learned retrieval scores 0 everywhere, whatever its scheme)."""
    at_l = {model: results.value(model, method, results.context, "passkey_mean")
            for model, method in results.lines if not model.startswith("rope+") and method in ("extrapolate", "none")}
    found = ", ".join(f"{model} {value:.2f}" for model, value in at_l.items() if value is not None)
    learned = [model for model, value in at_l.items() if value is not None and value >= RETRIEVES]
    return (f"Passkey accuracy at L (mean over depths): {found or 'not measured'}. Retrieval learned "
            f"(>= {RETRIEVES:.0%}) by: {', '.join(learned) or 'no model'}; the passkey columns past L "
            f"compare methods only for {'it' if len(learned) == 1 else 'those'}.")


def _listed(names: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _references(results: Results) -> list[str]:
    return [model for model, method in results.lines if method == "none"]


def _perplexity_word(at_l: float | None, longest: float | None) -> str:
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
    """One row per reference: perplexity at L and at the longest length, their ratio and what it
    says, passkey accuracy at L and the best past L."""
    context, longest = results.context, max(results.lengths, default=0)
    rows = []
    for model in _references(results):
        at_l = results.value(model, "none", context, "perplexity")
        at_max = results.value(model, "none", longest, "perplexity")
        past = [(n, results.value(model, "none", n, "passkey_mean")) for n in results.lengths if n > context]
        past = [(n, v) for n, v in past if v is not None]
        best = max(past, key=lambda item: item[1], default=None)
        rows.append({
            "reference": NAMES.get(model, model), "perplexity at L": at_l,
            f"at {longest // context}x": at_max,
            "ratio": None if at_l is None or at_max is None else at_max / at_l,
            "perplexity past L": _perplexity_word(at_l, at_max),
            "passkey at L": results.value(model, "none", context, "passkey_mean"),
            "best passkey past L": "not measured" if best is None else (
                "0" if best[1] == 0 else f"{best[1]:.2f} at {best[0] // context}x"),
        })
    return rows


def reference_note(results: Results) -> str:
    """The references in words: which stay flat, the best of them against RoPE's best extension
    without fine-tuning at the longest length, and whether any retrieves the passkey past L."""
    models = _references(results)
    if not models:
        return "No reference was trained in this study."
    context, longest = results.context, max(results.lengths)
    scale = f"{longest // context}x"
    rows = reference_rows(results)
    flat = [row["reference"] for row in rows if row["perplexity past L"].startswith("flat")]
    at_max = {model: results.value(model, "none", longest, "perplexity") for model in models}
    measured = {m: v for m, v in at_max.items() if v is not None}
    rope = {method: results.value("rope", method, longest, "perplexity") for model, method in results.lines
            if model == "rope"}
    rope = {m: v for m, v in rope.items() if v is not None}
    parts = [f"References flat to {scale} (perplexity within {FLAT:.0%} of L): {', '.join(flat) or 'none'}."]
    if measured:
        best = min(measured, key=measured.get)
        text = f"Lowest reference perplexity at {scale}: {NAMES.get(best, best)} {measured[best]:.3g}"
        if rope:
            method = min(rope, key=rope.get)
            text += f"; RoPE's best extension without fine-tuning there: {method} {rope[method]:.3g}"
        parts.append(text + ".")
    past = {model: max((results.value(model, "none", n, "passkey_mean") or 0.0) for n in results.lengths if n > context)
            for model in models if any(n > context for n in results.lengths)}
    retrieving = [f"{NAMES.get(m, m)} {v:.2f}" for m, v in past.items() if v >= RETRIEVES]
    above = [f"{NAMES.get(m, m)} {v:.2f}" for m, v in past.items() if 0 < v < RETRIEVES]
    parts.append(f"Passkey past L (best mean accuracy over the longer lengths): retrieved (>= {RETRIEVES:.0%}) by "
                 f"{', '.join(retrieving) or 'no reference'}" + (f"; above 0 by {', '.join(above)}" if above else "") + ".")
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
    """Why this study cannot conclude (``""`` when it can): a smoke preset, one seed, or no claim
    whose intervals separate."""
    reasons = []
    if results.body.get("name") in SMOKE_PRESETS:
        reasons.append(f"the {results.body['name']!r} preset trains tiny models for {results.body['steps']} steps to "
                       "test the pipeline")
    if len(results.seeds) < 2:
        reasons.append("it has one seed, so no number has an interval")
    elif not any(row["verdict"].startswith(("reproduces", "does not")) for row in verdicts(results)):
        reasons.append("no claim's intervals separate (every verdict 'cannot tell', 'not measured' or 'not testable')")
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
    at_l = results.interval("rope", "extrapolate", results.context, "passkey_mean")
    why = ("no model learned to retrieve the key even at the training length L" if len(empty) == len(results.lines)
           else "these models never retrieved the key, at L or beyond")
    rope = "" if not at_l.n else f" (RoPE at L: {at_l.text(2)})"
    return (f"Passkey accuracy is 0 at every length and depth for {_listed(empty)}: {why}{rope}. A model that has "
            f"not learned retrieval at L scores 0 everywhere, whatever its positions, so these panels compare "
            f"nothing; it takes a longer passkey curriculum or more steps (this run: {results.body['steps']} steps, "
            f"the first {results.body.get('passkey_only_steps', 0)} on passkeys alone{_adjacent_text(results.body)}).")


def _summary(results: Results) -> list[tuple[str, str]]:
    """The summary's ``(line, anchor)`` s: each claim's verdict, then the references and retrieval."""
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
    trained = _listed([NAMES.get(m, m) for m in ("rope", *body.get("references", ()))])
    return (f"{trained} decoders ({body['depth']} layers, width {body['dim']}) trained on tinyshakespeare characters "
            f"at L = {results.context} ({body['steps']} steps: the first {body.get('passkey_only_steps', 0)} on passkey "
            f"documents alone{_adjacent_text(body)}, then {body['passkey_fraction']:.0%} passkey documents), "
            f"{_seeds_text(results)}; the "
            f"RoPE model evaluated with each method swapped in, no retraining; `rope+<method>@{body['finetune_scale']}x` "
            f"fine-tuned {body['finetune_steps']} steps at {body['finetune_scale']} L; the other schemes are the "
            f"references, evaluated as they are. With several seeds a number is the mean over the seeds and its "
            f"{CONFIDENCE:.0%} percentile bootstrap interval over them, [low, high] (with 2 or 3 seeds: their range); "
            f"a verdict is 'cannot tell' where the two intervals overlap.")


_VERDICT_HEADER = ["claim", "length", "ours", "seeds", "verdict", "published", "checked", "why it might not hold here"]


def context_markdown(results: Results) -> str:
    """The report as markdown: banner, summary, verdicts, then the evidence (the figures are in the HTML)."""
    parts = [f"## {_title(results)}"]
    warning = too_small(results)
    if warning:
        parts.append(f"> **Warning:** {warning}")
    parts += ["### Summary", "\n".join(f"- [{text}](#{anchor})" for text, anchor in _summary(results)),
              _intro(results), '<a id="verdicts"></a>', "### Verdicts against the published orderings"]
    rows = verdicts(results)
    parts.append(_markdown_table(_VERDICT_HEADER, [[row[h] for h in _VERDICT_HEADER] for row in rows]))
    parts += ['<a id="references"></a>', "### The references past L"]
    references = reference_rows(results)
    if references:
        parts.append(_markdown_table(list(references[0]), [list(row.values()) for row in references]))
    parts += [reference_note(results), '<a id="perplexity"></a>', "### Held-out perplexity",
              _markdown_table(*_metric_rows(results, "perplexity")), '<a id="passkey"></a>',
              "### Passkey accuracy (mean over depths)", _markdown_table(*_metric_rows(results, "passkey_mean")),
              retrieval_note(results)]
    if empty_heatmap_note(results):
        parts.append(empty_heatmap_note(results))
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
    report.heading("The references past L", anchor="references")
    report.paragraph(reference_note(results))
    if reference_rows(results):
        report.table(reference_rows(results))
    report.heading("Perplexity against length", anchor="perplexity")
    report.figure(perplexity_figure(results), "context_perplexity", "held-out perplexity, log-log (means over seeds)")
    report.table(*reversed(_metric_rows(results, "perplexity")))
    report.heading("Passkey retrieval", anchor="passkey")
    report.paragraph(retrieval_note(results))
    if empty_heatmap_note(results):
        report.paragraph(empty_heatmap_note(results))
    passkey = passkey_figure(results, skip=set(empty_heatmaps(results)))
    if passkey is not None:
        report.figure(passkey, "context_passkey", "passkey accuracy per length (x) and depth (y), means over seeds")
    report.table(*reversed(_metric_rows(results, "passkey_mean")))
    return markdown, report.write(out / "context.html")
