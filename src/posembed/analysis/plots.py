"""Figures of the inspector (matplotlib, Agg canvas; every function returns a ``Figure``).

Example:
    >>> import numpy as np
    >>> figure = norms_figure(np.ones(8))
    >>> type(figure).__name__
    'Figure'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from posembed._utils.html import new_figure

__all__ = [
    "similarity_figure",
    "norms_figure",
    "pca_figure",
    "closeness_figure",
    "spectrum_figure",
    "fit_figure",
    "layer_probe_figure",
    "decomposition_figure",
    "segments_figure",
]


def _heatmap(figure, axes, matrix: np.ndarray, title: str, cmap: str = "viridis", symmetric: bool = False) -> None:
    # a robust colour limit: one outlier row (BERT's position 0) must not wash out the rest
    limit = max(float(np.percentile(np.abs(matrix), 99.5)), 1e-12) if symmetric else None
    image = axes.imshow(
        matrix,
        cmap=cmap,
        origin="upper",
        aspect="auto",
        interpolation="nearest",
        vmin=-limit if symmetric else None,
        vmax=limit if symmetric else None,
    )
    axes.set_title(title, fontsize=10)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)


def similarity_figure(dot: np.ndarray, cosine: np.ndarray):
    """Position-by-position dot product and cosine heatmaps."""
    figure = new_figure(11, 4.6)
    for index, (matrix, title) in enumerate(((dot, "dot product p_i . p_j"), (cosine, "cosine(p_i, p_j)"))):
        axes = figure.add_subplot(1, 2, index + 1)
        _heatmap(figure, axes, matrix, title, cmap="RdBu_r", symmetric=True)
        axes.set_xlabel("position j")
        axes.set_ylabel("position i")
    return figure


def norms_figure(norms: np.ndarray):
    """The L2 norm of each position vector."""
    figure = new_figure(6.5, 3.2)
    axes = figure.add_subplot(1, 1, 1)
    axes.plot(np.arange(len(norms)), norms, lw=1.2)
    axes.set_xlabel("position")
    axes.set_ylabel("||p||")
    axes.set_title("norm of each position vector", fontsize=10)
    return figure


def pca_figure(coords: np.ndarray, explained: Sequence[float]):
    """Positions projected on the first two principal components, coloured by position."""
    figure = new_figure(6, 5)
    axes = figure.add_subplot(1, 1, 1)
    axes.plot(coords[:, 0], coords[:, 1], color="0.8", lw=0.8, zorder=1)
    points = axes.scatter(coords[:, 0], coords[:, 1], c=np.arange(len(coords)), cmap="plasma", s=8, zorder=2)
    figure.colorbar(points, ax=axes, label="position")
    axes.set_xlabel(f"PC1 ({explained[0]:.1%} of variance)")
    axes.set_ylabel(f"PC2 ({explained[1]:.1%} of variance)")
    axes.set_title("PCA trajectory of the position vectors", fontsize=10)
    return figure


def closeness_figure(curves: Mapping[str, np.ndarray]):
    """``phi(k)`` (mean closeness at offset k), one panel per closeness, with the first rise marked."""
    columns = min(len(curves), 3)
    rows = -(-len(curves) // columns)
    figure = new_figure(11, 3.4 * rows)
    for index, (name, phi) in enumerate(curves.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        axes.plot(np.arange(len(phi)), phi, lw=1.2)
        rises = np.flatnonzero(np.diff(phi) > 0)
        if rises.size:
            axes.axvline(rises[0], color="C3", ls="--", lw=1, label=f"first rise at k={rises[0]}")
            axes.legend(fontsize=8)
        axes.set_xlabel("offset k")
        axes.set_title(f"phi(k): {name}", fontsize=10)
    return figure


def spectrum_figure(frequencies: np.ndarray, power: np.ndarray, dominant: np.ndarray):
    """Log power per dimension (dimensions sorted by dominant frequency) and the mean spectrum."""
    figure = new_figure(11, 4.2)
    order = np.argsort(dominant, kind="stable")
    axes = figure.add_subplot(1, 2, 1)
    _heatmap(figure, axes, np.log10(power[1:, order] + 1e-12), "log10 power (dims sorted by peak)", cmap="magma")
    axes.set_xlabel("dimension (sorted)")
    axes.set_ylabel("frequency bin (cycles / T)")
    axes = figure.add_subplot(1, 2, 2)
    share = power[1:].sum(axis=1) / max(power[1:].sum(), 1e-300)
    axes.loglog(frequencies[1:], share, lw=1.2)
    axes.set_xlabel("frequency (cycles per position)")
    axes.set_ylabel("share of power")
    axes.set_title("spectrum summed over dimensions", fontsize=10)
    return figure


def fit_figure(
    r2_per_dimension: np.ndarray, overall: float, shuffled: float, frequencies: np.ndarray, energy: np.ndarray
):
    """Per-dimension R^2 of the sinusoidal fit (sorted) and the fitted energy per basis frequency."""
    figure = new_figure(11, 3.6)
    axes = figure.add_subplot(1, 2, 1)
    axes.plot(np.sort(r2_per_dimension)[::-1], lw=1.2, label="table")
    axes.axhline(overall, color="C2", ls="--", lw=1, label=f"overall R^2 = {overall:.3f}")
    axes.axhline(shuffled, color="C3", ls=":", lw=1, label=f"rows shuffled = {shuffled:.3f}")
    axes.set_xlabel("dimension (sorted by R^2)")
    axes.set_ylabel("R^2")
    axes.set_ylim(-0.05, 1.05)
    axes.legend(fontsize=8)
    axes.set_title("sinusoidal fit per dimension", fontsize=10)
    axes = figure.add_subplot(1, 2, 2)
    axes.semilogx(2 * np.pi / frequencies, energy, marker="o", ms=3, lw=1)
    axes.set_xlabel("basis period (positions)")
    axes.set_ylabel("share of fitted energy")
    axes.set_title("which sinusoids the fit uses", fontsize=10)
    return figure


def layer_probe_figure(errors: Sequence[float], chance: Sequence[float]):
    """Per-layer probe error next to the chance level."""
    figure = new_figure(6.5, 3.6)
    axes = figure.add_subplot(1, 1, 1)
    layers = np.arange(len(errors))
    axes.plot(layers, errors, marker="o", label="MLP probe")
    axes.plot(layers, chance, ls="--", color="0.5", label="chance (predict the median)")
    axes.set_xticks(layers)
    axes.set_xlabel("layer (0 = embedding output)")
    axes.set_ylabel("mean |predicted - true position|")
    axes.set_title("position through depth", fontsize=10)
    axes.legend(fontsize=8)
    return figure


def decomposition_figure(terms: Mapping[str, np.ndarray], shares: Mapping[str, float]):
    """The four first-layer logit terms (mean over heads, one window) and their shares."""
    figure = new_figure(13, 3.6)
    limit = max(float(np.percentile(np.abs(term), 99.5)) for term in terms.values())
    heatmaps = []
    for index, (name, term) in enumerate(terms.items()):
        axes = figure.add_subplot(1, 5, index + 1)
        image = axes.imshow(term, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
        axes.set_title(f"{name}\nshare {shares[name]:.1%}", fontsize=9)
        axes.set_xlabel("key j")
        if index == 0:
            axes.set_ylabel("query i")
        heatmaps.append(axes)
    axes = figure.add_subplot(1, 5, 5)
    figure.colorbar(image, ax=heatmaps, fraction=0.02, pad=0.01)
    axes.bar(range(len(shares)), list(shares.values()), color=["C0", "C1", "C2", "C3"])
    axes.set_xticks(range(len(shares)))
    axes.set_xticklabels(["w-w", "w-p", "p-w", "p-p"])
    axes.set_title("share of mean |term|", fontsize=9)
    return figure


def segments_figure(segment_norms: np.ndarray, position_norm: float, token_norm: float):
    """Segment vector norms next to the mean position and token norms."""
    figure = new_figure(6, 3.4)
    axes = figure.add_subplot(1, 1, 1)
    labels = [f"segment {i}" for i in range(len(segment_norms))] + ["mean position", "mean token"]
    values = [*segment_norms, position_norm, token_norm]
    axes.bar(range(len(values)), values, color=["C4"] * len(segment_norms) + ["C0", "C1"])
    axes.set_xticks(range(len(values)))
    axes.set_xticklabels(labels, rotation=20, fontsize=8)
    axes.set_ylabel("L2 norm")
    axes.set_title("segment, position and token vector norms", fontsize=10)
    return figure
