"""Intervals, verdicts, a text table, and the JSON + HTML report of ``posembed extend-eval``.

Pure functions over the ``cells`` that :func:`posembed.interop.extend.retrieval.evaluate_extension`
produces (one per task, system and document length); matplotlib is imported only to draw.

A method *beats* truncation at a length when the lower end of its 95 % Wilson interval lies above
the upper end of the best truncation's; it is *worse* when its upper end lies below the other's
lower end; otherwise the run *cannot tell*.

Example:
    >>> cells = [{"task": "passkey", "system": s, "length": L, "hits": k, "queries": 50, "candidates": 50,
    ...           "accuracy": k / 50, "mrr": k / 50, **dict(zip(("low", "high"), wilson(k, 50))), "longembed": ""}
    ...          for s, k in (("truncate-512", 10), ("copy", 40)) for L in (512, 1024)]
    >>> summary = summarise(cells, 512)
    >>> summary["long_lengths"], [v["verdict"] for v in summary["verdicts"]]
    ([1024], ['beats'])
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from posembed._io import atomic_write_json

__all__ = ["wilson", "mcnemar", "summarise", "chance", "format_table", "markdown_table", "write_report"]

Z95 = 1.959963984540054


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


def mcnemar(first: Sequence[int], second: Sequence[int]) -> tuple[int, int, float]:
    """Exact two-sided McNemar test of two systems' paired hits on the same queries.

    Returns ``(b, c, p)``: queries only ``first`` gets, queries only ``second`` gets, and the
    probability of a split at least this uneven if neither system were better (binomial, 1/2).
    Reported beside the verdicts as supporting evidence; the verdicts themselves compare intervals.

    >>> mcnemar([1, 1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0])
    (6, 0, 0.03125)
    """
    if len(first) != len(second):
        raise ValueError(f"paired outcomes need equal lengths, got {len(first)} and {len(second)}")
    b = sum(1 for x, y in zip(first, second) if x and not y)
    c = sum(1 for x, y in zip(first, second) if y and not x)
    n = b + c
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n if n else 1.0
    return b, c, min(1.0, 2 * tail)


def chance(candidates: int) -> tuple[float, float]:
    """Top-1 accuracy and MRR of a random ranking of ``candidates`` documents.

    >>> tuple(round(value, 10) for value in chance(4))  # Python 3.12's compensated sum differs in the last digit
    (0.25, 0.5208333333)
    """
    return 1.0 / candidates, sum(1.0 / rank for rank in range(1, candidates + 1)) / candidates


def _ordered(values) -> list:
    return list(dict.fromkeys(values))


def _compare(method: dict, baseline: dict) -> str:
    if method["low"] > baseline["high"]:
        return "beats"
    if method["high"] < baseline["low"]:
        return "worse"
    return "cannot tell"


def summarise(cells: Sequence[dict], original_positions: int) -> dict:
    """The verdicts: per task and length beyond the table, the best method against the best truncation.

    Returns ``long_lengths``, ``verdicts`` (one per task and long length), ``ranking`` (each system's
    hits pooled over the long lengths and tasks, with an interval), ``winners`` (methods that
    beat truncation at every long length of some task) and ``statements`` (sentences, headline first).
    """
    lengths = sorted({c["length"] for c in cells})
    long = [L for L in lengths if L > original_positions]
    verdicts = []
    for task in _ordered(c["task"] for c in cells):
        for length in long:
            here = [c for c in cells if c["task"] == task and c["length"] == length]
            truncs = [c for c in here if c["system"].startswith("truncate-")]
            others = [c for c in here if not c["system"].startswith("truncate-")]
            if not truncs or not others:
                continue
            base = max(truncs, key=lambda c: (c["accuracy"], c["mrr"]))
            best = max(others, key=lambda c: (c["accuracy"], c["mrr"]))
            paired = {}
            if "outcomes" in best and "outcomes" in base:
                b, c, p = mcnemar([o[1] for o in best["outcomes"]], [o[1] for o in base["outcomes"]])
                paired = {"only_best": b, "only_truncation": c, "mcnemar_p": p}
            verdicts.append({
                "task": task, "length": length, "best": best["system"], "best_accuracy": best["accuracy"],
                "best_interval": [best["low"], best["high"]], "truncation": base["system"],
                "truncation_accuracy": base["accuracy"], "truncation_interval": [base["low"], base["high"]],
                "verdict": _compare(best, base),
                "beating": [c["system"] for c in others if _compare(c, base) == "beats"], **paired,
            })
    ranking = _ranking(cells, long)
    winners = _winners(verdicts, long)
    return {"long_lengths": long, "verdicts": verdicts, "ranking": ranking, "winners": winners,
            "statements": _statements(verdicts, winners, long, cells, original_positions)}


def _ranking(cells: Sequence[dict], long: list[int]) -> list[dict]:
    ranking = []
    for system in _ordered(c["system"] for c in cells):
        pooled = [c for c in cells if c["system"] == system and c["length"] in long]
        if not pooled:
            continue
        hits, n = sum(c["hits"] for c in pooled), sum(c["queries"] for c in pooled)
        low, high = wilson(hits, n)
        ranking.append({"system": system, "LongEmbed name": pooled[0].get("longembed", ""), "accuracy": hits / n,
                        "low": low, "high": high, "queries": n})
    return sorted(ranking, key=lambda r: -r["accuracy"])


def _winners(verdicts: list[dict], long: list[int]) -> dict[str, list[str]]:
    """Per task, the systems that beat truncation at every long length of the run."""
    winners = {}
    for task in _ordered(v["task"] for v in verdicts):
        mine = [v for v in verdicts if v["task"] == task]
        if len(mine) != len(long):
            continue
        common = set(mine[0]["beating"]).intersection(*(v["beating"] for v in mine[1:]))
        winners[task] = sorted(common)
    return winners


def _interval(accuracy: float, interval: Sequence[float]) -> str:
    return f"{accuracy:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def _statements(verdicts, winners, long, cells, original_positions) -> list[str]:
    if not long:
        return [f"No document is longer than the model's {original_positions} positions: nothing to compare."]
    where = " and ".join(str(L) for L in long)
    lines = []
    found = {task: names for task, names in winners.items() if names}
    if found:
        for task, names in found.items():
            lines.append(f"{task}: {', '.join(names)} beat{'s' if len(names) == 1 else ''} truncation at {where} "
                         f"tokens with non-overlapping 95% Wilson intervals.")
    else:
        lines.append(f"No method beats truncation at every length of {where} tokens on any task with "
                     f"non-overlapping 95% Wilson intervals: that is the finding of this run.")
    for v in verdicts:
        paired = (f" (paired on the same queries: {v['only_best']} only {v['best']}, {v['only_truncation']} only "
                  f"{v['truncation']}, exact McNemar p = {v['mcnemar_p']:.2g})") if "mcnemar_p" in v else ""
        lines.append(
            f"{v['task']} @ {v['length']}: best {v['best']} {_interval(v['best_accuracy'], v['best_interval'])} vs "
            f"{v['truncation']} {_interval(v['truncation_accuracy'], v['truncation_interval'])}: {v['verdict']}{paired}."
        )
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
            lines.append(system.ljust(width) + "".join(
                f"{_interval(c['accuracy'], (c['low'], c['high'])):>20}" if c else f"{'-':>20}" for c in row))
        lines.append("")
    lines += result["summary"]["statements"]
    return "\n".join(lines)


def markdown_table(result: dict, task: str) -> str:
    """One task's accuracy table in Markdown (README form)."""
    mine = [c for c in result["cells"] if c["task"] == task]
    lengths = sorted({c["length"] for c in mine})
    at = {(c["system"], c["length"]): c for c in mine}
    lines = ["| system | LongEmbed | " + " | ".join(str(L) for L in lengths) + " |",
             "|---|---|" + "---|" * len(lengths)]
    for system in _ordered(c["system"] for c in mine):
        row = [at.get((system, L)) for L in lengths]
        name = next(c for c in row if c).get("longembed", "")
        lines.append(f"| {system} | {name} | " + " | ".join(
            f"{c['accuracy']:.2f} [{c['low']:.2f}, {c['high']:.2f}]" if c else "-" for c in row) + " |")
    return "\n".join(lines)


_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ("-", "v"), ("--", "P"), (":", "X"), ("-.", "*"))


def _plot(result: dict):
    from posembed.report import new_figure

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
            ax.errorbar(xs, [c["accuracy"] for c in points],
                        yerr=[[max(0.0, c["accuracy"] - c["low"]) for c in points],
                              [max(0.0, c["high"] - c["accuracy"]) for c in points]],
                        linestyle=line, marker=marker, label=system, alpha=0.85, capsize=2)
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(L) for L in lengths])
        ax.minorticks_off()
        if table:
            ax.axvline(table, color="grey", linewidth=0.8, linestyle=":")
        ax.set(xlabel="document length (tokens)", ylabel="top-1 accuracy (95% Wilson)", ylim=(-0.03, 1.03),
               title=f"{task} (table: {table} positions)")
    axes[0].legend(fontsize=8)
    return figure


def write_report(result: dict, folder: str | Path) -> tuple[Path, Path]:
    """Write ``extend_eval.json`` and ``extend_eval.html`` (+ its PNG) into ``folder``."""
    from posembed.report import HtmlReport

    folder = Path(folder)
    json_path = atomic_write_json(folder / "extend_eval.json", result)
    protocol, summary = result["protocol"], result["summary"]
    report = HtmlReport("posembed extend-eval: passkey and needle retrieval beyond the position table")
    report.heading("Summary")
    report.bullets(summary["statements"])
    report.figure(_plot(result), "extend_eval", "Top-1 retrieval accuracy with 95% Wilson intervals, one line per system")
    report.heading("Verdicts per task and length")
    report.table([{
        "task": v["task"], "length": v["length"], "best method": v["best"],
        "best (95% interval)": _interval(v["best_accuracy"], v["best_interval"]), "truncation": v["truncation"],
        "truncation (95% interval)": _interval(v["truncation_accuracy"], v["truncation_interval"]),
        "verdict": v["verdict"], "methods that beat truncation": ", ".join(v["beating"]) or "none",
        "McNemar p (best vs truncation, paired)": v.get("mcnemar_p", "n/a"),
    } for v in summary["verdicts"]])
    report.heading("Ranking beyond the table (pooled over tasks and long lengths)")
    report.table([{"system": r["system"], "LongEmbed name": r["LongEmbed name"], "accuracy": r["accuracy"],
                   "95% interval": f"[{r['low']:.2f}, {r['high']:.2f}]", "queries": r["queries"]}
                  for r in summary["ranking"]])
    for task in _ordered(c["task"] for c in result["cells"]):
        report.heading(f"{task}: every cell")
        report.table([{
            "system": c["system"], "LongEmbed name": c["longembed"], "length": c["length"],
            "positions used": c["positions_used"], "accuracy": c["accuracy"],
            "95% interval": f"[{c['low']:.2f}, {c['high']:.2f}]", "MRR": c["mrr"], "queries": c["queries"],
            "seconds": c["seconds"],
        } for c in result["cells"] if c["task"] == task])
    report.heading("Protocol")
    report.paragraph(
        f"Model {protocol['model']}; text {protocol['text']} (filler from its last tenth); {protocol['queries']} "
        f"queries per task and length, each ranking {protocol['queries']} candidates that share one filler span "
        f"and differ in the planted fact and its depth; pooling {protocol['pooling']}; intervals: "
        f"{protocol['interval']}. Extension methods use the smallest of {protocol['targets']} positions that "
        f"holds the document; copy, hierarchical and tuned use one model at the largest."
    )
    report.preformatted(json.dumps({k: v for k, v in protocol.items() if k != "facts"}, indent=2))
    report.heading("Seconds per system")
    report.table([{"system": k, "seconds": v} for k, v in result["seconds"].items()])
    return json_path, report.write(folder / "extend_eval.html")
