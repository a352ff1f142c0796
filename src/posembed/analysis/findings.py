"""One-line conclusions of the inspector's table and model sections, computed from their numbers.

Every function returns ``(sentence, suspicious)``: ``suspicious`` is True when a number should not be
trusted as it stands (a probe worse than chance, a fit no better than on shuffled rows).

Example:
    >>> layers_finding([{"layer": 0, "error": 1.0, "chance": 8.0}, {"layer": 1, "error": 8.2, "chance": 8.0}])[0]
    'Position is decodable to within 1 positions at layer 0 (chance 8), readable (error below half of chance) at layer 0; from layer 1 on the probe is at chance'
    >>> spectrum_finding({"r2": 0.9, "r2_shuffled_rows": 0.05, "num_basis_frequencies": 8,
    ...                   "dimensions_with_r2_above_0.9": 10}, 16)[0]
    'The table is close to sinusoidal: R² 0.9 with 8 frequencies against 0.05 for the same rows shuffled; 10 of 16 dimensions fit with R² > 0.9'
"""

from __future__ import annotations

import numpy as np

from posembed.analysis.properties import offset_closeness

__all__ = [
    "similarity_finding", "properties_finding", "probes_finding", "spectrum_finding", "layers_finding",
    "decomposition_finding", "segments_finding",
]  # fmt: skip

#: a probe counts as worse than chance when its error exceeds chance by this factor
WORSE_THAN_CHANCE = 1.05


def similarity_finding(cosine: np.ndarray, norms: np.ndarray, explained: list[float]) -> tuple[str, bool]:
    """Neighbour similarity, where it falls below 0.5, norm outliers, PCA share."""
    phi = offset_closeness(cosine)
    below = np.flatnonzero(phi < 0.5)
    fall = f"falling below 0.5 at offset {int(below[0])}" if below.size else "never below 0.5 on average"
    median = float(np.median(norms))
    outlier = int(np.argmax(norms))
    ratio = float(norms[outlier] / median) if median > 0 else float("inf")
    stand = f"; position {outlier} stands out at {ratio:.2g}x the median norm" if ratio > 1.5 else ""
    return (
        f"Neighbouring positions are {'similar' if phi[1] > 0.5 else 'dissimilar'} (mean cosine {phi[1]:.2f} at "
        f"offset 1), {fall}; norms run {norms.min():.3g} to {norms.max():.3g}{stand}; the first two principal "
        f"components hold {sum(explained[:2]):.0%} of the variance",
        False,
    )


def properties_finding(rows: list[dict]) -> tuple[str, bool]:
    """Monotonicity and invariance of the first closeness measured (the one the section is about);
    for an asymmetric one, also of its backward row (keys before the query: what a causal model sees)."""
    row = rows[0]
    text = f"Closeness ({row['closeness']}) {_monotone_words(row)}"
    invariance = row["translation_invariance_error"]
    inv_text = "depends on the offset only" if invariance < 0.1 else "depends on absolute position too"
    text += f"; it {inv_text} (translation invariance error {invariance:.2g}), symmetry error {row['symmetry_error']:.2g}"
    backward = next((r for r in rows if r["closeness"] == f"{row['closeness']} (backward)"), None)
    if backward is not None:
        text += f"; looking backward (keys before the query) it {_monotone_words(backward)}"
    return text, False


def _monotone_words(row: dict) -> str:
    local, overall = row["monotonicity_local"], row["monotonicity_all"]
    words = "falls with distance" if local < -0.5 else "rises with distance" if local > 0.5 else "has no steady trend"
    words += f" nearby (Spearman {local:.2f} over k ≤ 20) and {overall:.2f} over all offsets"
    rise = row["first_nonmonotone_offset"]
    return words + (f", first rising at k = {rise}" if rise is not None else ", never rising")


def probes_finding(absolute: dict, relative: dict) -> tuple[str, bool]:
    """How precisely a linear probe reads absolute position and order."""
    suspicious = absolute["score"] >= absolute["chance"] or relative["score"] >= 0.5
    text = (
        f"Absolute position is linearly decodable to within {absolute['score']:.3g} positions on average "
        f"(chance {absolute['chance']:.3g}); the order of two positions with {relative['score']:.1%} error "
        "(chance 50%)"
    )
    if suspicious:
        text += "; a probe no better than chance: the table carries no linearly readable position there"
    return text, suspicious


def spectrum_finding(fit: dict, width: int) -> tuple[str, bool]:
    """Is the table sinusoidal: the fit's R² against the shuffled-row control."""
    gap = fit["r2"] - fit["r2_shuffled_rows"]
    verdict = "close to sinusoidal" if gap >= 0.5 else "partly sinusoidal" if gap >= 0.2 else "not sinusoidal"
    text = (
        f"The table is {verdict}: R² {fit['r2']:.2g} with {fit['num_basis_frequencies']} frequencies against "
        f"{fit['r2_shuffled_rows']:.2g} for the same rows shuffled; {fit['dimensions_with_r2_above_0.9']} of "
        f"{width} dimensions fit with R² > 0.9"
    )
    suspicious = gap <= 0
    if suspicious:
        text += "; the fit is no better than on shuffled rows, so R² here measures the basis, not the table"
    return text, suspicious


def layers_finding(rows: list[dict], nope: bool = False) -> tuple[str, bool]:
    """Where the per-layer probe reads position, where it drops to chance, and probes worse than chance."""
    errors = np.array([r["error"] for r in rows])
    chance = np.array([r["chance"] for r in rows])
    best = int(errors.argmin())
    readable = [r["layer"] for r in rows if r["error"] < 0.5 * r["chance"]]
    at_chance = [i for i in range(len(rows)) if errors[i] >= 0.9 * chance[i]]
    where = f"{errors[best]:.3g} positions at layer {rows[best]['layer']} (chance {chance[best]:.3g})"
    if errors[best] >= chance[best]:
        text = f"No layer reads position better than chance (best error {where})"
    else:
        text = f"Position is decodable to within {where}"
        text += f", readable (error below half of chance) at {_layers(readable)}" if readable else (
            ", but no layer reads it to better than half of chance")
        tail = next((i for i in range(len(rows)) if all(j in at_chance for j in range(i, len(rows)))), None)
        if tail is not None and tail > 0:
            text += f"; from layer {rows[tail]['layer']} on the probe is at chance"
    if nope:
        learned = "learned position implicitly (causal attention alone)" if readable else "shows no implicit position"
        text = f"Without any positional encoding the model {learned}. " + text
    worse = [r["layer"] for r in rows if r["error"] > WORSE_THAN_CHANCE * r["chance"]]
    if worse:
        text += (f"; suspicious: at {_layers(worse)} the probe does worse than always guessing the median, "
                 "a probe that failed to fit (too few windows or epochs), not evidence either way")  # fmt: skip
    return text, bool(worse)


def _layers(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``'layers 0-2, 5'``; ``[3]`` -> ``'layer 3'``."""
    return ("layer " if len(values) == 1 else "layers ") + _ranges(values)


def _ranges(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``'0-2, 5'``."""
    parts, start = [], None
    for i, value in enumerate(values):
        if start is None:
            start = value
        if i + 1 == len(values) or values[i + 1] != value + 1:
            parts.append(str(start) if start == value else f"{start}-{value}")
            start = None
    return ", ".join(parts)


def decomposition_finding(shares: dict[str, float], verdict: str) -> tuple[str, bool]:
    """Which first-layer term dominates and TUPE's add-or-concatenate verdict."""
    top = max(shares, key=shares.get)
    mixed = shares["word-position"] + shares["position-word"]
    return (
        f"The {top} term dominates first-layer attention ({shares[top]:.0%} of the logit magnitude); the mixed "
        f"word-position terms hold {mixed:.0%}, so adding positions acts {verdict}",
        False,
    )


def segments_finding(metrics: dict) -> tuple[str, bool]:
    """How large the segment vectors are against positions and tokens, and how far apart they are."""
    ratio_p = metrics["segment_to_position_ratio"]
    against = f"{ratio_p:.2g}x the mean position norm and " if ratio_p is not None else ""
    size = "small" if metrics["segment_to_token_ratio"] < 0.5 else "comparable to tokens"
    return (
        f"Segment vectors are {size}: {against}{metrics['segment_to_token_ratio']:.2g}x the mean token norm; "
        f"the segments differ by ||s_0 - s_last|| = {metrics['segment_difference_norm']:.3g}",
        False,
    )
