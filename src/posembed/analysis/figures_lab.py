"""Figures of the lab's stored results for the documentation: a forest plot of its tested verdicts and
each arm's validation loss over training.

Both read what a store holds and draw whatever rows it has: a new comparison is a new row of the
forest, an arm evaluated during training (``EvalPoint.step``) a line instead of a column of dots.

Example:
    >>> from posembed.stats.verdict import Outcome
    >>> rows = [ForestRow("a vs b", "val_loss (nats)", 0.03, (0.01, 0.05), 0.02, "a better", Outcome.A_BETTER)]
    >>> len(forest_figure(rows).axes)
    1
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from posembed._utils.html import new_figure
from posembed.stats.verdict import Outcome

__all__ = ["ForestRow", "arm_series", "arms_figure", "forest_figure", "forest_rows"]


@dataclass(frozen=True)
class ForestRow:
    """One tested difference: ``difference`` (B - A on the tested scale) with its 95 % interval, the
    equivalence margin, the verdict as worded and its outcome, the unit the panel groups it by."""

    label: str
    unit: str
    difference: float
    interval: tuple[float, float]
    margin: float
    word: str
    outcome: Outcome


def _unit(decision) -> str:
    c = decision.comparison
    if c.log_scale:
        return "log of the ratio B / A"
    metric = c.name.split(", ", 1)[1].split(" at ", 1)[0] if ", " in c.name else "difference"
    return f"{metric} (nats)" if metric == "val_loss" else metric


def forest_rows(decisions: Iterable, shown: Callable[[object], str] | None = None) -> list[ForestRow]:
    """:class:`ForestRow` of every decision (:class:`posembed.stats.verdict.Decision`) with a finite interval;
    exploratory ones (no word) included as ``exploratory``. ``shown(decision)``: the verdict as the
    report words it (the lab passes :func:`posembed.lab.report.rows.verdict_text`, so a threshold test
    reads "learned fails ..." as on every page); default the rule's word."""
    rows = []
    for d in decisions:
        low, high = d.interval
        if not (math.isfinite(d.difference) and math.isfinite(low) and math.isfinite(high)):
            continue
        c = d.comparison
        word = shown(d) if shown is not None and d.claims else d.word or Outcome.EXPLORATORY.value
        rows.append(ForestRow(f"{c.name}\n{c.b} − {c.a}", _unit(d), float(d.difference), (float(low), float(high)),
                              float(c.margin), word, d.outcome))  # fmt: skip
    return rows


#: marker and fill of each outcome (open: no claim)
_LOOKS = {
    Outcome.A_BETTER: ("o", True),
    Outcome.B_BETTER: ("o", True),
    Outcome.ALIKE: ("D", True),
    Outcome.CANNOT_TELL: ("o", False),
    Outcome.EXPLORATORY: ("s", False),
}


def _tick(row: ForestRow, width: int = 64) -> str:
    """A row's tick label: its comparison and contrast, then its verdict in brackets, each wrapped at
    ``width`` characters so a long verdict does not squeeze the plot."""
    lines = [part for line in row.label.split("\n") for part in textwrap.wrap(line, width)]
    return "\n".join(lines + textwrap.wrap(f"[{row.word}]", width))


def forest_figure(rows: Sequence[ForestRow], title: str = "the lab's tested comparisons"):
    """A forest plot: each difference with its 95 % interval, its equivalence margin as a grey band around
    zero; a panel per unit. Filled markers are verdicts, open ones "cannot tell" (no claim)."""
    if not rows:
        raise ValueError("a forest plot needs at least one row")
    units = list(dict.fromkeys(r.unit for r in rows))
    texts = {id(r): _tick(r) for r in rows}
    per_row = 0.16 * max(t.count("\n") + 1 for t in texts.values()) + 0.15  # inches: the tallest label's lines
    heights = [sum(r.unit == u for r in rows) for u in units]
    figure = new_figure(11, 1.2 + per_row * len(rows) + 0.5 * len(units))
    grid = figure.add_gridspec(len(units), 1, height_ratios=heights)
    seen = set()
    for index, unit in enumerate(units):
        axes = figure.add_subplot(grid[index])
        mine = [r for r in rows if r.unit == unit]
        for y, row in enumerate(reversed(mine)):
            band = "equivalence margin ±Δ" if "band" not in seen else None
            axes.fill_betweenx([y - 0.42, y + 0.42], -row.margin, row.margin, color="0.85", lw=0, label=band)
            seen.add("band")
            marker, filled = _LOOKS[row.outcome]
            colour = "C0" if filled else "C1"
            kind = (
                "exploratory (no test)"
                if row.outcome is Outcome.EXPLORATORY
                else "verdict (Holm at 5 %)"
                if filled
                else "cannot tell (no claim)"
            )
            label = kind if kind not in seen else None
            seen.add(kind)
            low, high = row.interval
            axes.errorbar(
                row.difference,
                y,
                xerr=[[row.difference - low], [high - row.difference]],
                fmt=marker,
                ms=7,
                capsize=4,
                color=colour,
                mfc=colour if filled else "white",
                label=label,
            )
        axes.axvline(0, color="0.3", lw=1)
        axes.set_yticks(range(len(mine)), [texts[id(r)] for r in reversed(mine)], fontsize=9)
        axes.set_ylim(-0.6, len(mine) - 0.4)
        axes.set_xlabel(f"B − A, {unit} (95 % interval)")
        axes.grid(alpha=0.3, axis="x")
    figure.axes[0].set_title(title)
    handles, labels = [], []
    for axes in figure.axes:
        for handle, label in zip(*axes.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    return figure


def _evals(row: Mapping) -> Iterable[tuple[str, int, float | None, int | None]]:
    for point in row.get("evals", []):
        if isinstance(point, Mapping):
            yield point["metric"], int(point["length"]), point.get("value"), point.get("step")
        else:
            yield point[0], int(point[1]), point[2], (point[4] if len(point) > 4 else None)


def arm_series(rows: Iterable[Mapping], metric: str, task: str | None = None) -> dict[str, dict[int, list[float]]]:
    """``{arm: {step: [value per seed]}}`` of ``metric`` at each trial's training length, from stored
    trial rows (``trials.json``: ``config`` and ``evals`` as ``[metric, length, value, note(, step)]``);
    a point without a step counts at the trial's last step. Arms are ``scheme / variant``."""
    found: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        config = row["config"]
        if task is not None and config.get("task") != task:
            continue
        arm = f"{config['scheme']} / {config.get('variant', 'base')}"
        for name, length, value, step in _evals(row):
            if name == metric and length == config["context"] and value is not None and math.isfinite(value):
                found.setdefault(arm, {}).setdefault(int(config["steps"] if step is None else step), []).append(
                    float(value)
                )
    return dict(sorted(found.items()))


def arms_figure(series: Mapping[str, Mapping[int, Sequence[float]]], metric_label: str):
    """Each arm's metric over training: a line of the mean over seeds with their range where the store
    holds evaluations during training; where it holds only the end, every seed's final value as a dot
    and the mean as a bar (the store then has no curve to draw, and the title says so)."""
    if not series:
        raise ValueError("no arm has a value of the metric")
    curves = any(len(points) > 1 for points in series.values())
    figure = new_figure(11, 4.6 if curves else 1.4 + 0.42 * len(series))
    axes = figure.add_subplot(1, 1, 1)
    styles = ("-", "--", "-.", ":")
    if curves:
        for index, (arm, points) in enumerate(series.items()):
            steps = sorted(points)
            means = [statistics.fmean(points[s]) for s in steps]
            (line,) = axes.plot(steps, means, styles[(index // 10) % 4], marker="o", ms=3, label=arm)
            axes.fill_between(
                steps,
                [min(points[s]) for s in steps],
                [max(points[s]) for s in steps],
                color=line.get_color(),
                alpha=0.12,
                lw=0,
            )
        axes.set_xlabel("training step")
        axes.set_ylabel(metric_label)
        axes.set_title(f"{metric_label} during training (mean over seeds, band: their range)")
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    else:
        arms = list(series)
        for y, arm in enumerate(arms):
            (step,) = series[arm]
            values = np.asarray(series[arm][step], dtype=float)
            axes.plot(
                values, np.full(len(values), y), "o", ms=5, color="C0", mfc="none", label="one seed" if y == 0 else None
            )
            axes.plot([values.mean()] * 2, [y - 0.3, y + 0.3], color="C1", lw=2.5, label="mean" if y == 0 else None)
        axes.set_yticks(range(len(arms)), arms)
        axes.set_ylim(-0.6, len(arms) - 0.4)
        axes.set_ylabel("arm (scheme / variant)")
        axes.set_xlabel(metric_label)
        steps = sorted({s for points in series.values() for s in points})
        axes.set_title(
            f"{metric_label} at the end of training (step {', '.join(map(str, steps))}); "
            "the store holds no evaluation during training"
        )
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    axes.grid(alpha=0.3)
    return figure
