"""Intervals, verdicts, a text table, and the JSON + HTML report of ``posembed extend-eval``.

Pure functions over the ``cells`` that :func:`posembed.interop.extend.retrieval.evaluate_extension`
produces (one per task, system and document length); matplotlib is imported only to draw.

The verdicts are :mod:`posembed.interop.extend.retrieval_verdicts`' (the exact McNemar test on
queries paired within each data seed, Holm over the primary comparisons, "alike" only from an
equivalence test). Each cell's 95 % Wilson interval is shown for reading the table only: it treats
the cell's queries as independent, though each seed's queries share one filler span and pool.

Example:
    >>> cells = [{"task": "passkey", "system": s, "length": L, "hits": k, "queries": 50, "candidates": 50,
    ...           "accuracy": k / 50, "mrr": k / 50, **dict(zip(("low", "high"), wilson(k, 50))), "longembed": "",
    ...           "outcomes": [[i / 49, int(i < k), 0] for i in range(50)]}
    ...          for s, k in (("truncate-512", 10), ("copy", 40)) for L in (512, 1024)]
    >>> summary = summarise(cells, 512)
    >>> summary["long_lengths"], [d["word"] for d in summary["decisions"]]
    ([1024], ['copy better'])
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path

from posembed._utils.html import too_small_banner
from posembed._utils.io import atomic_write_json
from posembed.stats.verdict import CANNOT_TELL

__all__ = [
    "wilson",
    "summarise",
    "chance",
    "format_table",
    "markdown_table",
    "write_report",
    "WILSON",
    "too_small",
    "ENOUGH_QUERIES",
]

logger = logging.getLogger(__name__)

Z95 = 1.959963984540054
#: what a cell's interval is
WILSON = "95% Wilson interval over the cell's queries (as if independent; a seed's queries share its filler)"


def wilson(hits: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``hits`` successes in ``n`` trials (95 % by default).

    >>> [round(x, 4) for x in wilson(25, 50)]
    [0.3664, 0.6336]
    >>> wilson(0, 50)[0], round(wilson(0, 50)[1], 4)
    (0.0, 0.0713)
    """
    if not isinstance(n, int) or n < 1 or not 0 <= hits <= n:
        raise ValueError(f"need 0 <= hits <= n and n >= 1, got hits={hits!r}, n={n!r}")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if hits == 0 else max(0.0, min(p, centre - half))  # exact ends; never past p in rounding
    high = 1.0 if hits == n else min(1.0, max(p, centre + half))
    return low, high


def chance(candidates: int) -> tuple[float, float]:
    """Top-1 accuracy and MRR of a random ranking of ``candidates`` documents.

    >>> tuple(round(value, 10) for value in chance(4))  # Python 3.12's compensated sum differs in the last digit
    (0.25, 0.5208333333)
    """
    return 1.0 / candidates, sum(1.0 / rank for rank in range(1, candidates + 1)) / candidates


def _ordered(values) -> list:
    return list(dict.fromkeys(values))


def summarise(cells: Sequence[dict], original_positions: int) -> dict:
    """The verdicts (:mod:`~posembed.interop.extend.retrieval_verdicts`) and what the report says.

    Returns ``long_lengths``, ``decisions`` (the primary comparisons, each with its word),
    ``exploratory`` (each task and length alone: numbers, no word), ``ranking`` (each system's hits
    pooled over the long lengths and tasks, with a Wilson interval: description only) and
    ``statements`` (sentences, headline first).
    """
    from posembed.interop.extend.retrieval_verdicts import MARGIN, exploratory_decisions, primary_decisions

    long = sorted({c["length"] for c in cells if c["length"] > original_positions})
    decisions = primary_decisions(cells, original_positions)
    return {
        "long_lengths": long,
        "margin": MARGIN,
        "decisions": decisions,
        "exploratory": exploratory_decisions(cells),
        "ranking": _ranking(cells, long),
        "statements": _statements(decisions, cells, original_positions),
    }


def _ranking(cells: Sequence[dict], long: list[int]) -> list[dict]:
    ranking = []
    for system in _ordered(c["system"] for c in cells):
        pooled = [c for c in cells if c["system"] == system and c["length"] in long]
        if not pooled:
            continue
        hits, n = sum(c["hits"] for c in pooled), sum(c["queries"] for c in pooled)
        low, high = wilson(hits, n)
        ranking.append(
            {
                "system": system,
                "LongEmbed name": pooled[0].get("longembed", ""),
                "accuracy": hits / n,
                "low": low,
                "high": high,
                "queries": n,
            }
        )
    return sorted(ranking, key=lambda r: -r["accuracy"])


def _interval(accuracy: float, interval: Sequence[float]) -> str:
    return f"{accuracy:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def headline(decisions: Sequence[dict], region: str) -> str:
    """One sentence: what the primary comparisons of ``region`` decided, grouped by word."""
    mine = [d for d in decisions if d["region"] == region]
    if not mine:
        return ""
    base, lengths, pairs = mine[0]["baseline"], mine[0]["lengths"], mine[0]["pairs"]
    groups: dict[str, list[str]] = {}
    for d in mine:
        word = d["word"]
        key = (
            "better than"
            if word == f"{d['system']} better"
            else "worse than"
            if word.endswith(" better")
            else "alike (within 0.10) with"
            if word == "alike"
            else "cannot tell against"
        )
        groups.setdefault(key, []).append(d["system"] + (f" ({d['note']})" if d["note"].endswith(" disagree") else ""))
    parts = [f"{', '.join(names)}: {key} {base}" for key, names in groups.items()]
    return (
        f"{region.capitalize()} ({', '.join(map(str, lengths))} tokens, {pairs} paired queries per system, exact "
        f"McNemar, Holm over the {len(decisions)} primary comparisons at 5 %): " + "; ".join(parts) + "."
    )


def _statements(decisions: Sequence[dict], cells: Sequence[dict], original_positions: int) -> list[str]:
    if not any(c["length"] > original_positions for c in cells):
        return [f"No document is longer than the model's {original_positions} positions: nothing to compare."]
    lines = [
        line for line in (headline(decisions, "beyond the table"), headline(decisions, "within the table")) if line
    ]
    if not decisions:
        lines.append("No truncation was measured: nothing to compare against.")
    lines += [f"{d['name']}: {d['text']}" for d in decisions]
    candidates = min((c["candidates"] for c in cells), default=0)
    if candidates:
        lines.append(f"Chance is {chance(candidates)[0]:.2f} top-1 ({candidates} candidates per query).")
    return lines


def format_table(result: dict) -> str:
    """Per task: accuracy [95% interval] per system (rows) and document length (columns), then the verdicts."""
    cells = result["cells"]
    lines = []
    for task in _ordered(c["task"] for c in cells):
        mine = [c for c in cells if c["task"] == task]
        lengths = sorted({c["length"] for c in mine})
        systems = _ordered(c["system"] for c in mine)
        at = {(c["system"], c["length"]): c for c in mine}
        title = f"{task} (top-1 [95% Wilson])"
        width = max(len(s) for s in [*systems, title])
        lines.append(title.ljust(width) + "".join(f"{L:>20}" for L in lengths))
        for system in systems:
            row = [at.get((system, L)) for L in lengths]
            lines.append(
                system.ljust(width)
                + "".join(f"{_interval(c['accuracy'], (c['low'], c['high'])):>20}" if c else f"{'-':>20}" for c in row)
            )
        lines.append("")
    lines += result["summary"]["statements"]
    return "\n".join(lines)


def markdown_table(result: dict, task: str) -> str:
    """One task's accuracy table in Markdown (README form)."""
    mine = [c for c in result["cells"] if c["task"] == task]
    lengths = sorted({c["length"] for c in mine})
    at = {(c["system"], c["length"]): c for c in mine}
    lines = [
        "| system | LongEmbed | " + " | ".join(str(L) for L in lengths) + " |",
        "|---|---|" + "---|" * len(lengths),
    ]
    for system in _ordered(c["system"] for c in mine):
        row = [at.get((system, L)) for L in lengths]
        name = next(c for c in row if c).get("longembed", "")
        lines.append(
            f"| {system} | {name} | "
            + " | ".join(f"{c['accuracy']:.2f} [{c['low']:.2f}, {c['high']:.2f}]" if c else "-" for c in row)
            + " |"
        )
    return "\n".join(lines)


_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ("-", "v"), ("--", "P"), (":", "X"), ("-.", "*"))


#: queries per task, length and data seed of the full benchmark (``BenchmarkConfig.queries``); ``--quick`` asks 10
ENOUGH_QUERIES = 50


def too_small(result: dict) -> str:
    """The report's banner: why this run cannot conclude (``""`` when it can), in the lab's words.

    Fewer queries than the full benchmark's (``--quick``), one data seed (a winner must lead in
    every seed, so one seed tests nothing of that rule), or no primary comparison decided.
    """
    protocol, reasons = result["protocol"], []
    if protocol["queries"] < ENOUGH_QUERIES:
        reasons.append(
            f"{protocol['queries']} queries per task and length (the full benchmark: {ENOUGH_QUERIES}), "
            "a quick look at the pipeline"
        )
    if len(protocol.get("seeds", [protocol.get("seed")])) < 2:
        reasons.append("it draws one data seed, so no winner is shown to lead in every seed")
    if not any(d["word"] != CANNOT_TELL for d in result["summary"]["decisions"]):
        reasons.append(f"no primary comparison decided (every verdict '{CANNOT_TELL}': see what each could detect)")
    return too_small_banner(
        "run", reasons, "`posembed extend-eval --out DIR` (the full benchmark, two data seeds: hours on a CPU)"
    )


def _plot(result: dict):
    from posembed._utils.html import new_figure

    cells = result["cells"]
    tasks = _ordered(c["task"] for c in cells)
    figure = new_figure(5.5 * len(tasks), 4.2)
    axes = figure.subplots(1, len(tasks), squeeze=False)[0]
    table = result["protocol"].get("original_positions")
    for ax, task in zip(axes, tasks):
        mine = [c for c in cells if c["task"] == task]
        lengths = sorted({c["length"] for c in mine})
        for i, system in enumerate(_ordered(c["system"] for c in mine)):
            line, marker = _STYLES[i % len(_STYLES)]
            points = sorted((c for c in mine if c["system"] == system), key=lambda c: c["length"])
            xs = [c["length"] * (1 + 0.03 * (i - 4)) for c in points]  # a small offset keeps intervals apart
            ax.errorbar(
                xs,
                [c["accuracy"] for c in points],
                yerr=[
                    [max(0.0, c["accuracy"] - c["low"]) for c in points],
                    [max(0.0, c["high"] - c["accuracy"]) for c in points],
                ],
                linestyle=line,
                marker=marker,
                label=system,
                alpha=0.85,
                capsize=2,
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(L) for L in lengths])
        ax.minorticks_off()
        if table:
            ax.axvline(table, color="grey", linewidth=0.8, linestyle=":")
        ax.set(
            xlabel="document length (tokens)",
            ylabel="top-1 accuracy (95% Wilson)",
            ylim=(-0.03, 1.03),
            title=f"{task} (table: {table} positions)",
        )
    axes[0].legend(fontsize=8)
    return figure


def write_report(result: dict, folder: str | Path) -> tuple[Path, Path]:
    """Write ``extend_eval.json`` and ``extend_eval.html`` (+ its PNG) into ``folder``."""
    from posembed._utils.html import HtmlReport

    folder = Path(folder)
    json_path = atomic_write_json(folder / "extend_eval.json", result)
    protocol, summary = result["protocol"], result["summary"]
    report = HtmlReport("posembed extend-eval: passkey and needle retrieval beyond the position table")
    warning = too_small(result)
    if warning:
        report.banner(warning)
        logger.warning("%s", warning)
    report.heading("Summary")
    report.bullets(summary["statements"])
    report.figure(
        _plot(result), "extend_eval", "Top-1 retrieval accuracy with 95% Wilson intervals, one line per system"
    )
    report.heading("Primary comparisons (the decision)")
    report.table(
        [
            {
                "comparison": d["name"],
                "verdict": d["word"],
                "pairs": d["pairs"],
                "only the system": d["only_system"],
                "only the baseline": d["only_baseline"],
                "system - baseline": round(d["difference"], 4),
                "95% interval": f"[{d['interval'][0]:+.3f}, {d['interval'][1]:+.3f}]",
                "McNemar p": d["p"],
                "Holm p": d["p_adjusted"],
                "equivalence Holm p": d["p_equivalence_adjusted"],
                "per seed": ", ".join(f"{k}: {v:+.2f}" for k, v in d["per_seed"].items()),
                "per task": ", ".join(f"{k}: {v:+.2f}" for k, v in d["per_task"].items()),
                "note": d["note"],
            }
            for d in summary["decisions"]
        ]
    )
    report.heading("Each task and length alone (exploratory: numbers, no verdict)")
    report.table(
        [
            {
                "task": d["task"],
                "length": d["length"],
                "system": d["system"],
                "baseline": d["baseline"],
                "system - baseline": round(d["difference"], 4),
                "McNemar p (unadjusted)": d["p"],
            }
            for d in summary["exploratory"]
        ]
    )
    report.heading("Ranking beyond the table (pooled over tasks and long lengths)")
    report.table(
        [
            {
                "system": r["system"],
                "LongEmbed name": r["LongEmbed name"],
                "accuracy": r["accuracy"],
                "95% interval": f"[{r['low']:.2f}, {r['high']:.2f}]",
                "queries": r["queries"],
            }
            for r in summary["ranking"]
        ]
    )
    for task in _ordered(c["task"] for c in result["cells"]):
        report.heading(f"{task}: every cell")
        report.table(
            [
                {
                    "system": c["system"],
                    "LongEmbed name": c["longembed"],
                    "length": c["length"],
                    "positions used": c["positions_used"],
                    "accuracy": c["accuracy"],
                    "95% interval": f"[{c['low']:.2f}, {c['high']:.2f}]",
                    "MRR": c["mrr"],
                    "queries": c["queries"],
                    "seconds": c["seconds"],
                }
                for c in result["cells"]
                if c["task"] == task
            ]
        )
    report.heading("Protocol")
    report.paragraph(
        f"Model {protocol['model']}; text {protocol['text']} (filler from its last tenth); {protocol['queries']} "
        f"queries per task and length, each ranking {protocol['queries']} candidates that share one filler span "
        f"and differ in the planted fact and its depth, over data seeds "
        f"{protocol['seeds'] if 'seeds' in protocol else [protocol['seed']]}; "
        f"pooling {protocol['pooling']}; intervals: "
        f"{protocol['interval']}. Extension methods use the smallest of {protocol['targets']} positions that "
        f"holds the document; copy, hierarchical and tuned use one model at the largest."
    )
    report.preformatted(json.dumps({k: v for k, v in protocol.items() if k != "facts"}, indent=2))
    report.heading("Seconds per system")
    report.table([{"system": k, "seconds": v} for k, v in result["seconds"].items()])
    return json_path, report.write(folder / "extend_eval.html")


# ---------------------------------------------------------------------- the published page

#: docs/checkpoints.md's generated blocks, in page order
PAGE_BLOCKS = (
    "extend-eval-run",
    "extend-eval-passkey",
    "extend-eval-needle",
    "extend-eval-verdicts",
    "extend-eval-chunk",
)


def read_stored(folder: str | Path) -> tuple[dict, list[dict], dict, dict | None]:
    """A stored run (``results/extend/``): the cells file's protocol and cells, ``meta.json``, and
    ``chunk_weights.json`` when there is one."""
    folder = Path(folder)
    lines = (folder / "extend_eval_cells.jsonl").read_text(encoding="utf-8").splitlines()
    protocol, cells = json.loads(lines[0])["protocol"], [json.loads(line) for line in lines[1:]]
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    chunk = folder / "chunk_weights.json"
    return protocol, cells, meta, json.loads(chunk.read_text(encoding="utf-8")) if chunk.is_file() else None


def page_blocks(protocol: dict, cells: list[dict], meta: dict, chunk: dict | None) -> dict[str, str]:
    """The text of each of :data:`PAGE_BLOCKS`, from a stored run alone."""
    positions = meta["original_positions"]
    summary = summarise(cells, positions)
    result = {"cells": cells, "summary": summary}
    seeds = sorted({c for cell in cells for c in cell.get("data_seeds", [0])})
    run = (
        f"{meta['model']}, mean pooling; data seeds {', '.join(map(str, seeds))}; {protocol['queries']} queries per "
        f"seed, task and length ({protocol['queries'] * len(seeds)} per cell), each ranking its seed's "
        f"{protocol['queries']} candidates (chance {chance(protocol['queries'])[0]:.2f}); lengths "
        f"{', '.join(map(str, protocol['lengths']))} tokens, extension to {', '.join(map(str, protocol['targets']))}. "
        f"Measured {meta['date']} at commit {meta['commit'][:7]} on {meta['device']} "
        f"({meta['threads']} torch threads): "
        f"{meta['wall_seconds'] / 60:.0f} min wall, {meta['cpu_seconds'] / 60:.0f} min CPU, load average "
        f"{meta['load']['start']:.1f} at the start and {meta['load']['median']:.1f} (median; {meta['load']['min']:.1f}"
        f" to {meta['load']['max']:.1f}) while it ran. Command: {_command(meta['command'])}."
    )
    if meta.get("not_measured"):
        run += (
            f" Not measured within the shared machine's budget, so neither in the tables nor in the verdicts: "
            f"{', '.join(meta['not_measured'])}."
        )
    verdicts = [f"- {line}" for line in summary["statements"]]
    return {
        "extend-eval-run": f"\n{run}\n",
        "extend-eval-passkey": "\n" + markdown_table(result, "passkey") + "\n",
        "extend-eval-needle": "\n" + markdown_table(result, "needle") + "\n",
        "extend-eval-verdicts": "\n" + "\n".join(verdicts) + "\n",
        "extend-eval-chunk": f"\n{_chunk_sentence(chunk)}\n",
    }


def _command(stored: str) -> str:
    """A stored command as code, the note the record keeps after it (``  (...)``) as text.

    >>> _command("posembed extend-eval --out OUT  (OUT/cells.jsonl copied here)")
    '`posembed extend-eval --out OUT` (OUT/cells.jsonl copied here)'
    """
    command, _, note = stored.partition("  (")
    return f"`{command.strip()}`" + (f" ({note}" if note else "")


def _chunk_sentence(chunk: dict | None) -> str:
    if chunk is None:
        return "Not measured."
    rows = chunk["rows"]
    changed, queries = sum(r["changed"] for r in rows), sum(len(r["hits_tokens"]) for r in rows)
    lengths = sorted({r["length"] for r in rows})
    per_task = "; ".join(
        f"{task} {sum(sum(r['hits_tokens']) for r in mine)} hits weighted by tokens against "
        f"{sum(sum(r['hits_equal']) for r in mine)} weighted equally, of {sum(len(r['hits_tokens']) for r in mine)}"
        for task in _ordered(r["task"] for r in rows)
        for mine in [[r for r in rows if r["task"] == task]]
    )
    return (
        f"Weighting chunk-{chunk['protocol']['chunk']}'s chunks by their tokens instead of equally (as before) "
        f"changed the outcome of {changed} of the {queries} queries at {', '.join(map(str, lengths))} tokens, where "
        f"a document ends in a short chunk (shorter documents are one chunk): {per_task}."
    )
