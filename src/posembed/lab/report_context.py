"""Report section "Which context extension works?": markdown and HTML from a context study's store.

- perplexity against length, one line per (model, method) (plot + table);
- passkey accuracy heatmaps (length x depth), one per (model, method), and a mean table;
- the references (ALiBi, NoPE, FIRE, KERPLE, Sandwich, CoPE, trained at L and evaluated as they
  are): whether each keeps its perplexity flat to the longest length, whether any retrieves the
  passkey past L, and how the best of them compares with RoPE's best extension
  (:func:`reference_rows`, :func:`reference_note`);
- verdicts: each published ordering of :data:`~posembed.lab.context_published.CLAIMS` checked
  on this study's numbers ("reproduces", "does not reproduce", "not measured"), with the
  published figure beside it and why it might not hold at this scale.

Matplotlib is imported only when the HTML is written (:func:`write_context_report`).
"""

from __future__ import annotations

import os
from pathlib import Path

from posembed.lab.context_published import CLAIMS, Claim
from posembed.lab.context_store import NO_DEPTH, ContextStore

__all__ = [
    "Results", "verdicts", "context_markdown", "retrieval_note", "reference_rows", "reference_note",
    "write_context_report", "TIE", "RETRIEVES", "FLAT", "NAMES",
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
    """A study's rows, indexed: ``value(model, method, length, metric, depth=-1)``."""

    def __init__(self, rows: list[dict], body: dict) -> None:
        self.body = body
        self._values = {(r["model"], r["method"], r["length"], r["metric"], r["depth"]): r["value"] for r in rows}
        self.context = int(body["context"])
        self.lengths = sorted({r["length"] for r in rows})
        self.lines = sorted({(r["model"], r["method"]) for r in rows}, key=_line_order)
        self.depths = sorted({r["depth"] for r in rows if r["metric"] == "passkey"})

    @classmethod
    def load(cls, store_path: str | os.PathLike, config_id: str | None = None) -> "Results":
        """The study ``config_id`` of the store (the only one when omitted)."""
        store = ContextStore(store_path)
        configs = store.configs()
        if config_id is None:
            if len(configs) != 1:
                raise ValueError(f"{store_path} holds {len(configs)} studies; name one of: {', '.join(configs) or 'none'}")
            config_id = next(iter(configs))
        if config_id not in configs:
            raise ValueError(f"study {config_id!r} is not in {store_path}; it holds: {', '.join(configs) or 'none'}")
        return cls(store.rows(config_id), configs[config_id][1])

    def value(self, model: str, method: str, length: int, metric: str, depth: float = NO_DEPTH) -> float | None:
        return self._values.get((model, method, length, metric, depth))

    def label(self, line: tuple[str, str]) -> str:
        model, method = line
        return model if method in ("none",) or model.startswith("rope+") else f"{model} / {method}"


def _line_order(line: tuple[str, str]) -> tuple:
    from posembed.lab.context import METHODS
    from posembed.lab.context_presets import REFERENCES

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
    """One row per published claim: our two numbers, the verdict, the published figure, why it may differ."""
    out = []
    for claim in CLAIMS:
        length = _claim_length(results, claim)
        metric = "perplexity" if claim.metric == "perplexity_tie" else claim.metric
        better = worse = None
        if length is not None:
            better = results.value(_model(claim.better[0], results.body), claim.better[1], length, metric)
            worse = results.value(_model(claim.worse[0], results.body), claim.worse[1], length, metric)
        out.append({
            "claim": claim.text, "length": length, "ours": _ours(claim, better, worse),
            "verdict": _verdict(claim, better, worse), "published": claim.published, "source": claim.source,
            "checked": claim.checked, "why it might not hold here": claim.why_not,
        })
    return out


def _ours(claim: Claim, better: float | None, worse: float | None) -> str:
    if better is None or worse is None:
        return "not measured"
    return f"{claim.better[1]} {better:.4g} vs {claim.worse[1]} {worse:.4g}"


def _verdict(claim: Claim, better: float | None, worse: float | None) -> str:
    if better is None or worse is None:
        return "not measured"
    if claim.metric == "perplexity_tie":
        return "reproduces" if abs(better - worse) <= TIE * min(better, worse) else "does not reproduce"
    if claim.metric == "perplexity":
        if abs(better - worse) <= TIE * min(better, worse):
            return "does not reproduce (tie within 2 %)"
        return "reproduces" if better < worse else "does not reproduce (reversed)"
    if max(better, worse) == 0.0:
        return "not testable (both retrieve nothing)"
    if abs(better - worse) < PASSKEY_MARGIN:
        return "does not reproduce (tie)"
    return "reproduces" if better > worse else "does not reproduce (reversed)"


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
    rows = [[results.label(line), *[results.value(*line, n, metric) for n in results.lengths]] for line in results.lines]
    return header, rows


def context_markdown(results: Results) -> str:
    """The section as markdown (tables; the figures are in the HTML)."""
    body = results.body
    trained = _listed([NAMES.get(m, m) for m in ("rope", *body.get("references", ()))])
    parts = [
        "## Which context extension works?",
        f"{trained} decoders ({body['depth']} layers, width {body['dim']}) trained on tinyshakespeare "
        f"characters at L = {results.context} ({body['steps']} steps: the first {body.get('passkey_only_steps', 0)} "
        f"on passkey documents alone, then {body['passkey_fraction']:.0%} passkey documents), the RoPE model evaluated with each method swapped in, no retraining; `rope+<method>@"
        f"{body['finetune_scale']}x` fine-tuned {body['finetune_steps']} steps at {body['finetune_scale']} L; the "
        f"other schemes are the references, evaluated as they are.",
        "### Held-out perplexity", _markdown_table(*_metric_rows(results, "perplexity")),
        "### Passkey accuracy (mean over depths)", _markdown_table(*_metric_rows(results, "passkey_mean")),
        retrieval_note(results),
        "### The references past L",
    ]
    references = reference_rows(results)
    if references:
        parts.append(_markdown_table(list(references[0]), [list(row.values()) for row in references]))
    parts += [reference_note(results), "### Verdicts against the published orderings"]
    rows = verdicts(results)
    header = ["claim", "length", "ours", "verdict", "published", "checked", "why it might not hold here"]
    parts.append(_markdown_table(header, [[row[h] for h in header] for row in rows]))
    return "\n\n".join(parts) + "\n"


def _perplexity_figure(results: Results):
    from posembed.report import new_figure

    figure = new_figure(7.0, 4.2)
    axes = figure.add_subplot()
    for line in results.lines:
        points = [(n, results.value(*line, n, "perplexity")) for n in results.lengths]
        points = [(n, v) for n, v in points if v is not None]
        if points:
            style = "-" if line[0] == "rope" else (":" if line[0].startswith("rope+") else "--")
            marker = "o" if line[0].startswith("rope") else "s"
            axes.plot(*zip(*points), style, marker=marker, label=results.label(line))
    axes.axvline(results.context, color="grey", linestyle=":", label=f"L = {results.context}")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("evaluated length (characters)")
    axes.set_ylabel("held-out perplexity")
    axes.set_title("Perplexity against length per method")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    return figure


def _passkey_figure(results: Results):
    from posembed.report import new_figure

    lines = [line for line in results.lines if results.value(*line, results.lengths[0], "passkey_mean") is not None]
    if not lines or not results.depths:
        return None
    cols = min(4, len(lines))
    rows = -(-len(lines) // cols)
    figure = new_figure(3.0 * cols, 2.6 * rows)
    for index, line in enumerate(lines):
        axes = figure.add_subplot(rows, cols, index + 1)
        grid = [[results.value(*line, n, "passkey", d) or 0.0 for n in results.lengths] for d in results.depths]
        image = axes.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto", origin="lower")
        axes.set_xticks(range(len(results.lengths)), [str(n) for n in results.lengths], fontsize=7)
        axes.set_yticks(range(len(results.depths)), [f"{d:.2g}" for d in results.depths], fontsize=7)
        axes.set_title(results.label(line), fontsize=8)
        axes.set_xlabel("length", fontsize=7)
        axes.set_ylabel("depth", fontsize=7)
    figure.colorbar(image, ax=figure.axes, shrink=0.8, label="passkey accuracy")
    return figure


def write_context_report(store_path: str | os.PathLike, out_dir: str | os.PathLike, config_id: str | None = None) -> tuple[Path, Path]:
    """Write ``context.md`` and ``context.html`` (with its PNGs) into ``out_dir``; returns both paths."""
    from posembed._io import atomic_write_text
    from posembed.report import HtmlReport

    results = Results.load(store_path, config_id)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    markdown = atomic_write_text(out / "context.md", context_markdown(results))
    report = HtmlReport("Which context extension works?")
    report.paragraph(context_markdown(results).split("\n\n")[1])
    report.heading("Perplexity against length")
    report.figure(_perplexity_figure(results), "context_perplexity", "held-out perplexity, log-log")
    report.table(*reversed(_metric_rows(results, "perplexity")))
    report.heading("Passkey retrieval")
    passkey = _passkey_figure(results)
    if passkey is not None:
        report.figure(passkey, "context_passkey", "passkey accuracy per length (x) and depth (y)")
    report.table(*reversed(_metric_rows(results, "passkey_mean")))
    report.heading("The references past L")
    report.paragraph(reference_note(results))
    if reference_rows(results):
        report.table(reference_rows(results))
    report.heading("Verdicts against the published orderings")
    report.table(verdicts(results))
    return markdown, report.write(out / "context.html")
