"""Summaries, a text table, and the JSON + HTML report of the extension benchmark.

Pure functions over the ``rows`` that :func:`posembed.interop.retrieval.evaluate_extension`
produces (one per system, document length and depth); matplotlib is imported only to draw.

Example:
    >>> rows = [{"system": s, "length": L, "depth": 0.5, "accuracy": a, "mrr": a, "queries": 4}
    ...         for s, a in (("truncate-512", 0.25), ("copy", 0.75)) for L in (512, 1024)]
    >>> summary = summarise(rows, 512)["summary"]
    >>> summary["winner"], summary["long_lengths"]
    ('copy', [1024])
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from posembed._io import atomic_write_json

__all__ = ["summarise", "chance", "format_table", "write_report"]


def _mean(rows: list[dict], key: str) -> float:
    weight = sum(r["queries"] for r in rows)
    return sum(r[key] * r["queries"] for r in rows) / weight


def _systems(rows: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(r["system"] for r in rows))


def summarise(rows: Sequence[dict], original_positions: int) -> dict:
    """``by_length`` (pooled over depths), ``by_depth`` (pooled over long lengths) and ``summary``.

    Long lengths are those over ``original_positions``, the checkpoint's table size; with none
    (a tiny run), all lengths count. The winner has the best long-document accuracy, then MRR.
    """
    lengths = sorted({r["length"] for r in rows})
    long = [L for L in lengths if L > original_positions] or lengths
    by_length, by_depth, ranking = [], [], []
    for system in _systems(rows):
        mine = [r for r in rows if r["system"] == system]
        for length in lengths:
            cell = [r for r in mine if r["length"] == length]
            by_length.append({
                "system": system, "length": length, "positions_used": cell[0].get("positions_used"),
                "accuracy": _mean(cell, "accuracy"), "mrr": _mean(cell, "mrr"), "queries": sum(r["queries"] for r in cell),
            })
        pooled = [r for r in mine if r["length"] in long]
        for depth in sorted({r["depth"] for r in pooled}):
            cell = [r for r in pooled if r["depth"] == depth]
            by_depth.append({"system": system, "depth": depth, "accuracy": _mean(cell, "accuracy"), "mrr": _mean(cell, "mrr")})
        short = [r for r in mine if r["length"] not in long]
        ranking.append({
            "system": system, "accuracy": _mean(pooled, "accuracy"), "mrr": _mean(pooled, "mrr"),
            "queries": sum(r["queries"] for r in pooled),
            "short_accuracy": _mean(short, "accuracy") if short else None,
            "short_mrr": _mean(short, "mrr") if short else None,
        })
    ranking.sort(key=lambda r: (-r["accuracy"], -r["mrr"]))
    candidates = min((r["candidates"] for r in rows if "candidates" in r), default=None)
    summary = _verdict(ranking, long, original_positions, candidates)
    return {"by_length": by_length, "by_depth": by_depth, "summary": summary}


def chance(candidates: int) -> tuple[float, float]:
    """Top-1 accuracy and MRR of a random ranking of ``candidates`` documents.

    >>> chance(4)
    (0.25, 0.5208333333333333)
    """
    return 1.0 / candidates, sum(1.0 / rank for rank in range(1, candidates + 1)) / candidates


def _verdict(ranking: list[dict], long: list[int], original_positions: int, candidates: int | None) -> dict:
    best, runner = ranking[0], ranking[1] if len(ranking) > 1 else None
    n = best["queries"]
    p = best["accuracy"]
    error = math.sqrt(max(p * (1 - p), 1.0 / n) / n)  # binomial standard error (floored at 1/n)
    lengths = ", ".join(str(L) for L in long)
    statement = (
        f"On documents of {lengths} tokens (table size {original_positions}), {best['system']} ranks the right "
        f"document first for {p:.0%} of {n} queries (MRR {best['mrr']:.3f})"
    )
    if runner is not None:
        gap = p - runner["accuracy"]
        statement += f"; next is {runner['system']} at {runner['accuracy']:.0%}"
        if gap < 2 * error:
            statement += f" - a gap within about two standard errors ({2 * error:.0%}), so not a clear win"
    statement += "."
    verdict = {"long_lengths": long, "ranking": ranking, "winner": best["system"]}
    if candidates:
        accuracy, mrr = chance(candidates)
        verdict.update(candidates=candidates, chance_accuracy=accuracy, chance_mrr=mrr)
        statement += f" Chance with {candidates} candidates is {accuracy:.0%} (MRR {mrr:.3f})"
        if p - accuracy < 2 * math.sqrt(accuracy * (1 - accuracy) / n):
            statement += ": no system is clearly above chance on these documents"
        statement += "."
    return {**verdict, "statement": statement}


def format_table(result: dict) -> str:
    """Accuracy per system (rows) and document length (columns), then the verdict."""
    lengths = sorted({r["length"] for r in result["by_length"]})
    systems = _systems(result["by_length"])
    cells = {(r["system"], r["length"]): r["accuracy"] for r in result["by_length"]}
    width = max(len(s) for s in systems + ["system"])
    lines = ["accuracy (top-1)".ljust(width) + "".join(f"{L:>8}" for L in lengths)]
    for system in systems:
        lines.append(system.ljust(width) + "".join(f"{cells[system, L]:8.2f}" for L in lengths))
    lines.append("")
    lines.append(result["summary"]["statement"])
    return "\n".join(lines)


_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ("-", "v"), ("--", "P"), (":", "X"))


def _plot(result: dict):
    from posembed.report import new_figure

    figure = new_figure(11.0, 4.2)
    by_length, by_depth = figure.subplots(1, 2)
    for i, system in enumerate(_systems(result["by_length"])):
        line, marker = _STYLES[i % len(_STYLES)]
        style = {"linestyle": line, "marker": marker, "label": system, "alpha": 0.85}
        points = [r for r in result["by_length"] if r["system"] == system]
        by_length.plot([r["length"] for r in points], [r["accuracy"] for r in points], **style)
        points = [r for r in result["by_depth"] if r["system"] == system]
        by_depth.plot([r["depth"] for r in points], [r["accuracy"] for r in points], **style)
    lengths = sorted({r["length"] for r in result["by_length"]})
    by_length.set_xscale("log", base=2)
    by_length.set_xticks(lengths, [str(L) for L in lengths])
    by_length.minorticks_off()
    table = result["protocol"].get("original_positions")
    if table:
        by_length.axvline(table, color="grey", linewidth=0.8, linestyle=":")
    level = result["summary"].get("chance_accuracy")
    if level is not None:
        for axes in (by_length, by_depth):
            axes.axhline(level, color="black", linewidth=0.8, linestyle=(0, (1, 3)), label="chance")
    by_length.set(xlabel="document length (tokens)", ylabel="retrieval accuracy (top-1)", ylim=(-0.03, 1.03),
                  title=f"accuracy vs document length (table: {table} positions)")
    long = ", ".join(str(L) for L in result["summary"]["long_lengths"])
    by_depth.set(xlabel="depth of the planted fact (0 = start)", ylim=(-0.03, 1.03),
                 title=f"accuracy vs depth ({long} tokens)")
    by_length.legend(fontsize=8)
    return figure


def write_report(result: dict, folder: str | Path) -> tuple[Path, Path]:
    """Write ``extend_eval.json`` and ``extend_eval.html`` (+ its PNG) into ``folder``."""
    from posembed.report import HtmlReport

    folder = Path(folder)
    json_path = atomic_write_json(folder / "extend_eval.json", result)
    protocol = result["protocol"]
    report = HtmlReport("posembed extend: what a longer position table buys")
    report.paragraph(result["summary"]["statement"])
    report.figure(_plot(result), "extend_eval", "Top-1 retrieval accuracy, one line per system")
    report.heading("Accuracy by document length")
    report.table(result["by_length"])
    report.heading("Ranking on long documents")
    report.table(result["summary"]["ranking"])
    report.heading("Accuracy by depth (long documents)")
    report.table(result["by_depth"])
    report.heading("Protocol")
    report.paragraph(
        f"Model {protocol['model']}; filler {protocol['text']}; {len(protocol['depths']) * protocol['queries_per_depth']} "
        f"queries per length, each ranking all documents of that length; pooling {protocol['pooling']}. "
        f"Extension methods use the smallest of {protocol['targets']} positions that holds the document."
    )
    report.preformatted(json.dumps({k: v for k, v in protocol.items() if k != "facts"}, indent=2))
    report.table(protocol["facts"])
    report.heading("Seconds per system")
    report.table([{"system": k, "seconds": v} for k, v in result["seconds"].items()])
    return json_path, report.write(folder / "extend_eval.html")
