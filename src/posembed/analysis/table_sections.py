"""The table sections of the inspector report: everything computed from the position table alone.

Each ``section_*`` function adds its headings, explanations, tables and figures to an
:class:`~posembed._utils.html.HtmlReport` and returns its metrics as a JSON-able dict.

Example:
    >>> import numpy as np
    >>> from posembed._utils.html import HtmlReport
    >>> table = np.stack([np.sin(np.arange(64) / 4), np.cos(np.arange(64) / 4)], axis=1)
    >>> metrics = section_properties(HtmlReport("t"), table, None)
    >>> metrics["dot"]["phi_0"], round(metrics["dot"]["translation_invariance_error"], 9)
    (1.0, 0.0)
"""

from __future__ import annotations

import numpy as np
import torch

from posembed._utils.html import HtmlReport
from posembed.analysis import findings, plots
from posembed.analysis.probes import absolute_probe, relative_probe
from posembed.analysis.properties import offset_closeness, position_properties, similarity_matrices, symmetry_error
from posembed.analysis.sources import FirstLayer
from posembed.analysis.spectrum import dimension_spectrum, sinusoid_fit

__all__ = [
    "section_similarity",
    "section_properties",
    "section_probes",
    "section_spectrum",
    "first_layer_position_logits",
]

_PROPERTY_TEXT = (
    "phi(x, y) is the closeness of positions x and y: the dot product, the cosine, or (where the model has "
    "one) the first attention layer's position-to-position logit. phi(k) is the mean of phi(x, x+k) over x. "
    "Monotonicity: Spearman's rank correlation between the offset k and phi(k), over k = 1..20 (local) and over "
    "all offsets; -1 means closeness falls strictly with distance. 'first rise' is the first offset k with "
    "phi(k+1) > phi(k). Translation invariance error: for each offset k = 1..T/2 the standard deviation of "
    "phi(x, x+k) over x, averaged over k and divided by the standard deviation of all off-diagonal phi(x, y); "
    "0 means closeness depends on the offset only. Symmetry error: ||S - S^T||_F / ||S||_F for the T x T matrix "
    "S = phi(x, y); dot product and cosine are symmetric by construction, the attention logits need not be."
)


def section_similarity(report: HtmlReport, table: np.ndarray) -> dict:
    """Similarity heatmaps, norms and the PCA trajectory."""
    from sklearn.decomposition import PCA

    report.section("Position-to-position similarity")
    report.paragraph(
        f"The table has {table.shape[0]} positions of width {table.shape[1]}. Heatmaps: the dot product and the "
        "cosine between every pair of position vectors (row i, column j). Then the L2 norm of each vector, and "
        "the vectors projected on their first two principal components (scikit-learn PCA), in position order."
    )
    dot, cosine = similarity_matrices(table)
    report.figure(
        plots.similarity_figure(dot, cosine), "similarity", "dot product and cosine similarity between positions"
    )
    norms = np.linalg.norm(table, axis=1)
    report.figure(plots.norms_figure(norms), "norms", "L2 norm of each position vector")
    pca = PCA(n_components=min(3, *table.shape), random_state=0).fit(table)
    coords = pca.transform(table)
    report.figure(
        plots.pca_figure(coords, pca.explained_variance_ratio_),
        "pca",
        "first two principal components, coloured by position",
    )
    explained = [float(v) for v in pca.explained_variance_ratio_]
    finding, suspicious = findings.similarity_finding(cosine, norms, explained)
    report.finding(finding + ".", suspicious)
    return {
        "positions": int(table.shape[0]),
        "width": int(table.shape[1]),
        "norm_mean": float(norms.mean()),
        "norm_min": float(norms.min()),
        "norm_max": float(norms.max()),
        "pca_explained_variance": explained,
        "finding": finding + ".",
    }


def first_layer_position_logits(table: np.ndarray, layer: FirstLayer, device: torch.device | None = None) -> np.ndarray:
    """Mean over heads of the first layer's position-to-position logits ``(LN(p_i) W^Q)(LN(p_j) W^K)^T / sqrt(D)``.

    Each position vector is layer-normalised on its own (the LayerNorm's scale, no shift or biases):
    the position-position term of the four-term decomposition for the position alone. Computed on
    ``device`` (default: the CPU).

    Shape:
        table ``(T, C)`` -> ``(T, T)``, rows = query position.
    """
    from posembed.analysis.decomposition import four_terms

    device = torch.device("cpu" if device is None else device)
    positions, layer = torch.from_numpy(table).to(device), layer.to(device)
    normed = torch.nn.functional.layer_norm(positions, positions.shape[-1:], eps=layer.ln_eps) * layer.ln_weight
    terms = four_terms(torch.zeros_like(normed), normed, layer.wq, None, layer.wk, None, layer.num_heads)
    return terms["position-position"].mean(dim=0).cpu().numpy()


def section_properties(
    report: HtmlReport,
    table: np.ndarray | None,
    layer: FirstLayer | None,
    extra: dict[str, np.ndarray] | None = None,
    device: torch.device | None = None,
) -> dict:
    """Wang et al.'s monotonicity, translation invariance and symmetry.

    ``extra`` adds closeness matrices of models without a table (rotary logits, attention biases);
    the first-layer logits are computed on ``device`` (default: the CPU).
    """
    report.section("Properties (Wang et al., ICLR 2021)")
    report.paragraph(_PROPERTY_TEXT)
    matrices = dict(zip(("dot", "cosine"), similarity_matrices(table))) if table is not None else {}
    for name, matrix in (extra or {}).items():
        matrices[name] = matrix
        report.paragraph(
            f"{name}: the model has no position table; this is the closeness its scheme gives positions i and j."
        )
    if layer is not None and table is not None:
        matrices["first-layer logits"] = first_layer_position_logits(table, layer, device)
        report.paragraph(
            "First-layer logits: each position vector alone is layer-normalised (its own mean and deviation, "
            "the LayerNorm's scale), projected with layer 0's W^Q and W^K, "
            "and the scaled logits are averaged over heads."
        )
    for name, matrix in list(matrices.items()):
        if symmetry_error(matrix) > 1e-9:  # direction matters: also keys *before* the query (what causal models see)
            matrices[f"{name} (backward)"] = matrix.T
    report.paragraph(
        "phi(k) looks forward (key k positions after the query); for asymmetric closeness a '(backward)' row "
        "measures keys k positions before the query (the transpose), the only direction a causal model uses."
    )
    rows, metrics = [], {}
    for name, matrix in matrices.items():
        found = position_properties(matrix, name).as_dict()
        metrics[_key(name)] = found
        rows.append(found)
    report.table(rows)
    curves = {name: offset_closeness(matrix) for name, matrix in matrices.items()}
    report.figure(plots.closeness_figure(curves), "closeness", "phi(k), mean closeness at offset k")
    finding, suspicious = findings.properties_finding(rows)
    report.finding(finding + ".", suspicious)
    metrics["finding"] = finding + "."
    return metrics


def _key(name: str) -> str:
    """A metrics key from a row name: 'first-layer logits (backward)' -> 'first_layer_logits_backward'."""
    return "_".join(name.replace("-", " ").replace("(", " ").replace(")", " ").replace(",", " ").split())


def section_probes(report: HtmlReport, table: np.ndarray, pairs: int) -> dict:
    """Wang & Chen's absolute and relative probes."""
    report.section("Probes (Wang & Chen, EMNLP 2020)")
    report.paragraph(
        "Absolute: scikit-learn LinearRegression from a position vector to its position, 5-fold cross-validation "
        "with shuffled folds; the score is the mean of |round(prediction) - position| over held-out positions "
        "(chance: always predicting the mean position). Relative: LogisticRegression (standardised inputs, C=0.1) "
        f"on the concatenation [p_i; p_j] of {pairs} random pairs (i != j) predicting whether j > i; 5-fold "
        "cross-validated error rate (chance 0.5)."
    )
    absolute = absolute_probe(table)
    relative = relative_probe(table, pairs=pairs)
    report.table([result.as_dict() for result in (absolute, relative)])
    finding, suspicious = findings.probes_finding(absolute.as_dict(), relative.as_dict())
    report.finding(finding + ".", suspicious)
    return {"absolute": absolute.as_dict(), "relative": relative.as_dict(), "finding": finding + "."}


def section_spectrum(report: HtmlReport, table: np.ndarray, num_frequencies: int) -> dict:
    """Is it sinusoidal? Per-dimension spectra and the sinusoidal-basis fit."""
    report.section("Is it sinusoidal?")
    frequencies, power, dominant = dimension_spectrum(table)
    # a short table (a small lab model) holds fewer frequencies: 2 F + 1 basis functions <= positions
    num_frequencies = max(1, min(num_frequencies, (table.shape[0] - 1) // 2))
    fit = sinusoid_fit(table, num_frequencies=num_frequencies)
    report.paragraph(
        "Spectrum: each dimension of the table read as a signal over positions, mean removed, |FFT|^2 (numpy). "
        f"Fit: every dimension is fitted by least squares (scikit-learn LinearRegression) from a basis of a constant "
        f"and sin/cos at {num_frequencies} geometric frequencies from one period over the table to a period of two "
        f"positions. R^2 = 1 - SS_res / SS_tot over all dimensions is {fit.r2:.3f}; the same basis explains "
        f"{fit.r2_shuffled:.3f} of the same table with its rows shuffled "
        f"(what {2 * num_frequencies + 1} functions fit by "
        f"chance on {table.shape[0]} points). {int((fit.r2_per_dimension > 0.9).sum())} of {table.shape[1]} dimensions "
        "have R^2 > 0.9."
    )
    report.figure(
        plots.spectrum_figure(frequencies, power, dominant),
        "spectrum",
        "power spectrum of each dimension across positions",
    )
    report.figure(
        plots.fit_figure(fit.r2_per_dimension, fit.r2, fit.r2_shuffled, fit.frequencies, fit.energy_per_frequency),
        "sinusoid_fit",
        "R^2 of the sinusoidal fit per dimension, and the fitted energy per basis period",
    )
    metrics = fit.as_dict()
    metrics["dominant_period_median"] = float(np.median(1.0 / dominant))
    metrics["low_frequency_power_share"] = float(power[1:5].sum() / max(power[1:].sum(), 1e-300))
    finding, suspicious = findings.spectrum_finding(metrics, table.shape[1])
    report.finding(finding + ".", suspicious)
    metrics["finding"] = finding + "."
    return metrics
