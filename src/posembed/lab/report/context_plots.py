"""The context report's figures (:mod:`posembed.lab.report.context`): perplexity against length,
one line per (model, method), and passkey heatmaps (length x depth), one panel per line that
retrieved anything. Numbers are means over the study's seeds. Matplotlib is imported lazily.

Both take the report's :class:`~posembed.lab.report.context_results.Results` (its ``lines``, ``lengths``,
``value``, ``label``, ...); this module does not import it, so the report imports its figures and
not the other way round.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

__all__ = ["perplexity_figure", "passkey_figure", "plain_log_axes"]


def plain_log_axes(axes, lengths) -> None:
    """Log-log axes whose ticks read as plain numbers: x ticks at the measured ``lengths`` only
    (96, 192, 384, not 2^7), y ticks as decimals (18.5, not 1.85 x 10^1)."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    plain = FuncFormatter(lambda value, _: f"{value:g}")
    some = FuncFormatter(lambda value, _: f"{value:g}" if _leading_digit(value) in (2, 5) else "")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(list(lengths), [str(n) for n in lengths])
    axes.xaxis.set_minor_locator(NullLocator())
    axes.yaxis.set_major_formatter(plain)
    axes.yaxis.set_minor_formatter(some)


def _leading_digit(value: float) -> int:
    """``3`` for 30 or 0.3 (0 for values <= 0)."""
    return int(round(value / 10 ** math.floor(math.log10(value)))) if value > 0 else 0


def perplexity_figure(results: Any):
    """Held-out perplexity against evaluated length (both axes logarithmic, ticks in plain numbers:
    the measured lengths on x), one line per (model, method)."""
    from posembed._utils.html import new_figure

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
    plain_log_axes(axes, results.lengths)
    axes.set_xlabel("evaluated length (characters)")
    axes.set_ylabel("held-out perplexity")
    axes.set_title("Perplexity against length per method")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    return figure


def passkey_figure(results: Any, skip: Collection[str] = ()):
    """Passkey accuracy heatmaps, one panel per line whose label is not in ``skip`` (the all-zero
    ones, which the report names in words instead); ``None`` when no panel is left."""
    from posembed._utils.html import new_figure

    lines = [
        line
        for line in results.lines
        if results.label(line) not in skip and results.value(*line, results.lengths[0], "passkey_mean") is not None
    ]
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
