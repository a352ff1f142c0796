"""The lab report's figures: a metric against test length per scheme, and training loss curves.

Each function returns a matplotlib Figure (Agg canvas, no pyplot state) or ``None`` when the
trials hold nothing to draw. Lines are means over seeds, shaded bands +/- one standard deviation
(where there are two seeds or more); the ``base`` variant is drawn solid, other variants dashed;
a dotted vertical line marks the training length L. The lines are faceted by scheme family
(absolute, rotary, bias, NoPE), one panel each and at most :data:`MAX_LINES` lines a panel (a
larger family takes more, near-equal panels; a one-line panel joins a neighbour), with each
panel's legend outside its data, to the right.

>>> _band(Stat((1.0, 3.0))), _band(Stat((1.0,)))
((2.0, 1.4142135623730951), (1.0, 0.0))
>>> keys = [("copy", s, "base") for s in ("rope", "alibi", "learned", "nope", "t5_bias")]
>>> [(title, [k[1] for k in group]) for title, group in facets(keys)]
[('rotary + bias', ['rope', 'alibi', 't5_bias']), ('absolute + NoPE', ['learned', 'nope'])]
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from posembed._utils.html import new_figure
from posembed.lab.report.tables import GroupKey, LabData, Stat, metric_lengths, metric_stat, scheme_family, train_length
from posembed.lab.sweep.store import TrialRecord
from posembed.lab.task_registry import METRICS, metric_label, task_entry

__all__ = ["length_figure", "loss_figure", "facets", "scheme_family", "MAX_LINES"]

#: most lines in one panel
MAX_LINES = 6


def _band(stat: Stat) -> tuple[float, float]:
    """(mean, std) with std 0 for a single seed (nothing to shade)."""
    return stat.mean, (stat.std if stat.n >= 2 else 0.0)


def _style(variant: str) -> str:
    return "-" if variant == "base" else "--"


def facets(keys: Sequence[GroupKey]) -> list[tuple[str, list[GroupKey]]]:
    """Group keys by scheme family (first-seen order), in panels of at most :data:`MAX_LINES`.

    A family larger than that is split into near-equal panels (7 lines: 4 and 3, never 6 and 1);
    a panel left with one line joins its smaller neighbour ("bias + NoPE"; on a tie the next
    one), so no panel holds a lonely curve unless the whole figure has one.
    """
    families: dict[str, list[GroupKey]] = {}
    for key in keys:
        families.setdefault(scheme_family(key[1]), []).append(key)
    panels: list[tuple[str, list[GroupKey]]] = []
    for family, members in families.items():
        count = -(-len(members) // MAX_LINES)
        size = -(-len(members) // count)
        chunks = [members[i : i + size] for i in range(0, len(members), size)]
        for index, chunk in enumerate(chunks):
            panels.append((family if count == 1 else f"{family} ({index + 1}/{count})", chunk))
    return _join_lonely(panels)


def _join_lonely(panels: list[tuple[str, list[GroupKey]]]) -> list[tuple[str, list[GroupKey]]]:
    """Merge every one-line panel into its smaller neighbour, or take a line from it when it is full."""
    index = 0
    while index < len(panels) and len(panels) > 1:
        if len(panels[index][1]) != 1:
            index += 1
            continue
        neighbours = [i for i in (index + 1, index - 1) if 0 <= i < len(panels)]
        other = min(neighbours, key=lambda i: len(panels[i][1]))  # the next one on a tie (listed first)
        first, second = sorted((index, other))
        if len(panels[first][1]) + len(panels[second][1]) <= MAX_LINES:
            panels[first : second + 1] = [
                (f"{panels[first][0]} + {panels[second][0]}", panels[first][1] + panels[second][1])
            ]
            index = first
        else:  # every neighbour full: the one it would have joined lends it a line
            title, lonely = panels[index]
            if other < index:
                lender, line = panels[other][1][:-1], [panels[other][1][-1]]
                panels[other], panels[index] = (
                    (panels[other][0], lender),
                    (f"{panels[other][0]} + {title}", line + lonely),
                )
            else:
                lender, line = panels[other][1][1:], [panels[other][1][0]]
                panels[other], panels[index] = (
                    (panels[other][0], lender),
                    (f"{title} + {panels[other][0]}", lonely + line),
                )
            index += 1
    return panels


def _panels(count: int):
    """A figure with ``count`` stacked panels sharing the x axis."""
    figure = new_figure(8.0, 1.2 + 2.6 * count)
    first = figure.add_subplot(count, 1, 1)
    return figure, [first] + [figure.add_subplot(count, 1, i + 1, sharex=first) for i in range(1, count)]


def _legend_outside(axes) -> None:
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def length_figure(data: LabData, task: str, metric: str, *, log_y: bool = False):
    """``metric`` against evaluated length for every (scheme, variant) of ``task``, a panel per family."""
    groups = data.groups(task)
    if not groups:
        return None
    panels = facets(list(groups))
    figure, axes_list = _panels(len(panels))
    drawn = False
    context = train_length(next(iter(groups.values())))
    lengths = metric_lengths((t for g in groups.values() for t in g), metric)
    for axes, (family, keys) in zip(axes_list, panels):
        for key in keys:
            drawn |= _length_line(axes, groups[key], metric, f"{key[1]} / {key[2]}", _style(key[2]))
        axes.axvline(context, color="grey", linestyle=":", linewidth=1, label=f"training length L = {context}")
        if log_y:
            _log_axes(axes, lengths, context)
        if metric in METRICS and METRICS[metric].fraction:
            axes.set_ylim(-0.03, 1.03)
        axes.set_ylabel(metric_label(metric))
        axes.set_title(family, fontsize=9, loc="left")
        axes.grid(alpha=0.3)
        _legend_outside(axes)
    if not drawn:
        return None
    axes_list[-1].set_xlabel(task_entry(task).lengths)
    figure.suptitle(f"{task}: {metric_label(metric)} against length (mean ± std over seeds)", fontsize=10)
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
    """Training loss against step, one line per (scheme, variant), mean over seeds, a panel per family."""
    groups: dict[GroupKey, list[TrialRecord]] = data.groups(task)
    if not groups:
        return None
    panels = facets(list(groups))
    figure, axes_list = _panels(len(panels))
    drawn = False
    for axes, (family, keys) in zip(axes_list, panels):
        for key in keys:
            curve = mean_curve(groups[key])
            if curve:
                axes.plot([s for s, _ in curve], [v for _, v in curve], _style(key[2]), linewidth=1.2,
                          label=f"{key[1]} / {key[2]}")  # fmt: skip
                drawn = True
        axes.set_ylabel("training loss")
        axes.set_title(family, fontsize=9, loc="left")
        axes.grid(alpha=0.3)
        if axes.lines:
            _legend_outside(axes)
    if not drawn:
        return None
    axes_list[-1].set_xlabel("training step")
    figure.suptitle(f"{task}: training loss (mean over seeds)", fontsize=10)
    return figure
