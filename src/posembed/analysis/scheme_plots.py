"""Figures of the scheme sections (rotary and bias models); every function returns a ``Figure``.

Line plots keep at most :data:`MAX_LINES` lines a panel (more heads: more panels) with the legend
outside the data.

Example:
    >>> import numpy as np
    >>> figure = bias_distance_figure(np.arange(4.0), -np.outer(np.arange(1, 9), np.arange(4.0)), None)
    >>> len(figure.axes)
    2
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from posembed._utils.html import new_figure

__all__ = ["MAX_LINES", "wavelength_figure", "decay_figure", "usage_figure", "bias_distance_figure",
           "receptive_field_figure"]  # fmt: skip

#: most lines drawn in one panel
MAX_LINES = 6


def _context_lines(axes, trained: int | None, effective: int | None, vertical: bool) -> None:
    line = axes.axvline if vertical else axes.axhline
    if trained:
        line(trained, color="0.3", ls=":", lw=1, label=f"trained context {trained}")
    if effective and effective != trained:
        line(effective, color="C3", ls="--", lw=1, label=f"scaled context {effective}")


def _legend_outside(axes) -> None:
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def wavelength_figure(plain: np.ndarray, used: np.ndarray, trained: int | None, effective: int | None, name: str):
    """Each pair's wavelength (positions per turn): plain RoPE and what the scheme uses."""
    figure = new_figure(8, 3.8)
    axes = figure.add_subplot(1, 1, 1)
    pairs = np.arange(len(plain))
    if not np.allclose(plain, used, rtol=1e-5):
        axes.semilogy(pairs, plain, "o", mfc="none", color="0.5", label="plain RoPE")
    axes.semilogy(pairs, used, "o-", ms=4, color="C0", label=name)
    _context_lines(axes, trained, effective, vertical=False)
    axes.set_xlabel("frequency pair i (0 = fastest)")
    axes.set_ylabel("wavelength 2π/θ_i (positions)")
    axes.set_title("per-pair wavelength against the context", fontsize=10)
    axes.grid(alpha=0.3, which="both")
    _legend_outside(axes)
    return figure


def decay_figure(distances: np.ndarray, curves: Mapping[str, np.ndarray], trained: int | None, effective: int | None):
    """q.k of aligned vectors against relative distance (log x)."""
    figure = new_figure(8, 3.8)
    axes = figure.add_subplot(1, 1, 1)
    shown = distances > 0
    for index, (label, curve) in enumerate(list(curves.items())[:MAX_LINES]):
        axes.semilogx(distances[shown], curve[shown], lw=1.2, ls="-" if index % 2 == 0 else "--", label=label)
    _context_lines(axes, trained, effective, vertical=True)
    axes.axhline(0.1, color="0.7", lw=0.8)
    axes.set_xlabel("relative distance m (positions)")
    axes.set_ylabel("value / value at m = 0")
    axes.set_title("long-term decay of q·k (RoFormer)", fontsize=10)
    axes.grid(alpha=0.3)
    _legend_outside(axes)
    return figure


def usage_figure(shares: np.ndarray, wavelengths: np.ndarray, trained: int | None):
    """Heatmap of each pair's share of q/k weight; rows = layer x head, columns = pairs."""
    layers, heads, pairs = shares.shape
    figure = new_figure(9, min(2.0 + 0.12 * layers * heads, 12.0))
    axes = figure.add_subplot(1, 1, 1)
    image = axes.imshow(shares.reshape(layers * heads, pairs), aspect="auto", cmap="magma", interpolation="nearest")
    figure.colorbar(image, ax=axes, fraction=0.04, pad=0.02, label="share of the head's q/k weight")
    step = max(1, pairs // 12)
    axes.set_xticks(range(0, pairs, step), [f"{w:.3g}" for w in wavelengths[::step]], rotation=45, fontsize=7)
    axes.set_yticks([layer * heads for layer in range(layers)], [f"layer {layer}" for layer in range(layers)],
                    fontsize=7)  # fmt: skip
    if trained:
        past = np.nonzero(wavelengths > trained)[0]
        if past.size:
            axes.axvline(past[0] - 0.5, color="cyan", lw=1)
    axes.set_xlabel("pair wavelength (positions); cyan line: longer than the trained context")
    axes.set_ylabel("layer, head")
    axes.set_title("which frequency pairs the q/k projections use", fontsize=10)
    return figure


def bias_distance_figure(distances: np.ndarray, bias: np.ndarray, receptive: np.ndarray | None):
    """Bias (relative to distance 0) against distance, per head, at most :data:`MAX_LINES` heads a panel.

    Shape:
        distances ``(N,)``, bias ``(H, N)``.
    """
    heads = bias.shape[0]
    panels = -(-heads // MAX_LINES)
    figure = new_figure(8, 2.8 * panels)
    relative = bias - bias[:, :1]
    for panel in range(panels):
        axes = figure.add_subplot(panels, 1, panel + 1)
        for head in range(panel * MAX_LINES, min(heads, (panel + 1) * MAX_LINES)):
            axes.plot(distances, relative[head], lw=1.2, label=f"head {head}")
        axes.axhline(-np.log(10), color="0.5", ls=":", lw=1, label="weight / 10")
        axes.set_ylabel("b(m) - b(0)")
        axes.grid(alpha=0.3)
        _legend_outside(axes)
    axes.set_xlabel("distance m from the query to the key (positions)")
    figure.axes[0].set_title("attention bias against distance, per head", fontsize=10)
    return figure


def receptive_field_figure(tenfold: list[int | None], hundredfold: list[int | None], horizon: int):
    """Per head, the distance at which the bias divides the weight by 10 and by 100 (log y)."""
    figure = new_figure(8, 3.4)
    axes = figure.add_subplot(1, 1, 1)
    heads = np.arange(len(tenfold))
    for offset, (values, label) in enumerate(((tenfold, "weight / 10"), (hundredfold, "weight / 100"))):
        shown = [horizon if v is None else v for v in values]
        hatch = ["//" if v is None else "" for v in values]
        bars = axes.bar(heads + (offset - 0.5) * 0.4, shown, width=0.4, label=label, color=f"C{offset}")
        for bar, pattern in zip(bars, hatch):
            bar.set_hatch(pattern)
    axes.set_yscale("log")
    axes.axhline(horizon, color="0.5", ls=":", lw=1, label=f"analysed horizon {horizon} (hatched: not reached)")
    axes.set_xticks(heads)
    axes.set_xlabel("head")
    axes.set_ylabel("distance (positions)")
    axes.set_title("effective receptive field per head", fontsize=10)
    _legend_outside(axes)
    return figure
