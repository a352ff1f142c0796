"""The lab report's figures: a metric against test length per scheme, and training loss curves.

Each function returns a matplotlib Figure (Agg canvas, no pyplot state) or ``None`` when the
trials hold nothing to draw. Lines are means over seeds, shaded bands +/- one standard deviation
(where there are two seeds or more); the ``base`` variant is drawn solid, other variants dashed;
a dotted vertical line marks the training length L.

>>> _band(Stat((1.0, 3.0))), _band(Stat((1.0,)))
((2.0, 1.4142135623730951), (1.0, 0.0))
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from posembed.lab.report_tables import GroupKey, LabData, Stat, metric_lengths, metric_stat, train_length
from posembed.lab.store import TrialRecord
from posembed.report import new_figure

__all__ = ["length_figure", "loss_figure"]

_LABELS = {"accuracy": "accuracy", "exact_match": "exact match", "perplexity": "perplexity", "val_loss": "validation loss"}


def _band(stat: Stat) -> tuple[float, float]:
    """(mean, std) with std 0 for a single seed (nothing to shade)."""
    return stat.mean, (stat.std if stat.n >= 2 else 0.0)


def _style(variant: str) -> str:
    return "-" if variant == "base" else "--"


def length_figure(data: LabData, task: str, metric: str, *, log_y: bool = False):
    """``metric`` against evaluated length for every (scheme, variant) of ``task``."""
    groups = data.groups(task)
    if not groups:
        return None
    figure = new_figure(6.4, 4.0)
    axes = figure.add_subplot()
    drawn = False
    for (_, scheme, variant), trials in groups.items():
        drawn |= _length_line(axes, trials, metric, f"{scheme} / {variant}", _style(variant))
    if not drawn:
        return None
    context = train_length(next(iter(groups.values())))
    axes.axvline(context, color="grey", linestyle=":", linewidth=1, label=f"training length L = {context}")
    if log_y:
        _log_axes(axes, metric_lengths((t for g in groups.values() for t in g), metric), context)
    if metric in ("accuracy", "exact_match"):
        axes.set_ylim(-0.03, 1.03)
    axes.set_xlabel({"perplexity": "evaluated context (characters)", "accuracy": "sequence length"}.get(
        metric, "operand length"))
    axes.set_ylabel(_LABELS.get(metric, metric))
    axes.set_title(f"{task}: {_LABELS.get(metric, metric)} against length (mean ± std over seeds)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    return figure


def _log_axes(axes, lengths: list[int], context: int) -> None:
    """Context on a log2 axis labelled ``n (kx)``; perplexity on a log axis when it spans > 3x."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    axes.set_xscale("log", base=2)
    axes.set_xticks(lengths, [f"{n} ({n / context:.3g}x)" for n in lengths])
    axes.xaxis.set_minor_formatter(NullFormatter())
    low, high = axes.get_ylim()
    if low > 0 and high / low > 3:
        axes.set_yscale("log")
        axes.yaxis.set_major_formatter(ScalarFormatter())


def _length_line(axes, trials: Sequence[TrialRecord], metric: str, label: str, style: str) -> bool:
    xs, means, stds = [], [], []
    for length in metric_lengths(trials, metric):
        stat = metric_stat(trials, metric, length)
        if stat.n:
            mean, std = _band(stat)
            xs.append(length)
            means.append(mean)
            stds.append(std)
    if not xs:
        return False
    (line,) = axes.plot(xs, means, style, marker="o", markersize=3, label=label)
    low = [m - s for m, s in zip(means, stds, strict=True)]
    high = [m + s for m, s in zip(means, stds, strict=True)]
    axes.fill_between(xs, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    return True


def mean_curve(trials: Sequence[TrialRecord]) -> list[tuple[int, float]]:
    """Training loss per logged step, averaged over the seeds that logged that step.

    >>> from types import SimpleNamespace as S
    >>> mean_curve([S(curve=[(1, 2.0), (2, 1.0)]), S(curve=[(1, 4.0), (2, None)])])
    [(1, 3.0), (2, 1.0)]
    """
    by_step: dict[int, list[float]] = {}
    for trial in trials:
        for step, loss in trial.curve:
            if loss is not None and math.isfinite(loss):
                by_step.setdefault(step, []).append(loss)
    return [(step, statistics.fmean(values)) for step, values in sorted(by_step.items())]


def loss_figure(data: LabData, task: str):
    """Training loss against step, one line per (scheme, variant), mean over seeds."""
    groups: dict[GroupKey, list[TrialRecord]] = data.groups(task)
    figure = new_figure(6.4, 4.0)
    axes = figure.add_subplot()
    drawn = False
    for (_, scheme, variant), trials in groups.items():
        curve = mean_curve(trials)
        if curve:
            axes.plot([s for s, _ in curve], [v for _, v in curve], _style(variant), linewidth=1.2,
                      label=f"{scheme} / {variant}")
            drawn = True
    if not drawn:
        return None
    axes.set_xlabel("training step")
    axes.set_ylabel("training loss")
    axes.set_title(f"{task}: training loss (mean over seeds)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    return figure
