"""One-line conclusions of the inspector's table and model sections, computed from their numbers.

Every function returns ``(sentence, suspicious)``: ``suspicious`` is True when a number should not be
trusted as it stands (a probe worse than chance, a fit no better than on shuffled rows).

Example:
    >>> layers_finding([{"layer": 0, "error": 1.0, "chance": 8.0},
    ...                 {"layer": 1, "error": 8.2, "chance": 8.0}])[0]  # doctest: +NORMALIZE_WHITESPACE
    'Position is decodable to within 1 positions at layer 0 (chance 8), readable (error below half of chance)
    at layer 0; from layer 1 on the probe is at chance'
    >>> spectrum_finding({"r2": 0.9, "r2_shuffled_rows": 0.05, "num_basis_frequencies": 8,
    ...                   "dimensions_with_r2_above_0.9": 10}, 16)[0]  # doctest: +NORMALIZE_WHITESPACE
    "The table is close to sinusoidal: R² 0.9 with 8 frequencies against 0.05 for the same rows shuffled;
    10 of 16 dimensions fit with R² > 0.9 ('close' needs R² ≥ 0.9, at least 50% of the dimensions above 0.9
    and R² 0.5 above the shuffled rows)"
"""

from __future__ import annotations

import numpy as np

from posembed.analysis.properties import offset_closeness

__all__ = [
    "similarity_finding", "properties_finding", "probes_finding", "spectrum_finding", "layers_finding",
    "decomposition_finding", "segments_finding", "sinusoid_verdict",
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
    text += (
        f"; it {inv_text} (translation invariance error {invariance:.2g}), symmetry error {row['symmetry_error']:.2g}"
    )
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


#: "close to sinusoidal" needs all three: the fit's R², the share of dimensions each fitting with
#: R² above :data:`DIMENSION_R2`, and R² this far above the shuffled-row control
CLOSE_R2, CLOSE_DIMENSION_SHARE, CLOSE_GAP = 0.9, 0.5, 0.5
#: "partly sinusoidal": R² at least this far above the shuffled-row control
PARTLY_GAP = 0.2
#: the per-dimension R² that counts a dimension as fitted (``dimensions_with_r2_above_0.9``)
DIMENSION_R2 = 0.9


def sinusoid_verdict(fit: dict, width: int) -> str:
    """``close to sinusoidal``, ``partly sinusoidal`` or ``not sinusoidal`` by the thresholds above.

    >>> sinusoid_verdict({"r2": 0.63, "r2_shuffled_rows": 0.01, "dimensions_with_r2_above_0.9": 25}, 384)
    'partly sinusoidal'
    """
    gap = fit["r2"] - fit["r2_shuffled_rows"]
    share = fit["dimensions_with_r2_above_0.9"] / width if width else 0.0
    if fit["r2"] >= CLOSE_R2 and share >= CLOSE_DIMENSION_SHARE and gap >= CLOSE_GAP:
        return "close to sinusoidal"
    return "partly sinusoidal" if gap >= PARTLY_GAP else "not sinusoidal"


def spectrum_finding(fit: dict, width: int) -> tuple[str, bool]:
    """Is the table sinusoidal: the fit's R² against the shuffled-row control, with the rule applied."""
    gap = fit["r2"] - fit["r2_shuffled_rows"]
    verdict = sinusoid_verdict(fit, width)
    close = (
        f"'close' needs R² ≥ {CLOSE_R2:g}, at least {CLOSE_DIMENSION_SHARE:.0%} of the dimensions above "
        f"{DIMENSION_R2:g} and R² {CLOSE_GAP:g} above the shuffled rows"
    )
    rule = {
        "close to sinusoidal": close,
        "partly sinusoidal": f"{close}; 'partly', {PARTLY_GAP:g} above them",
        "not sinusoidal": f"'partly' needs R² {PARTLY_GAP:g} above the shuffled rows",
    }[verdict]
    text = (
        f"The table is {verdict}: R² {fit['r2']:.2g} with {fit['num_basis_frequencies']} frequencies against "
        f"{fit['r2_shuffled_rows']:.2g} for the same rows shuffled; {fit['dimensions_with_r2_above_0.9']} of "
        f"{width} dimensions fit with R² > {DIMENSION_R2:g} ({rule})"
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
        text += (
            f", readable (error below half of chance) at {_layers(readable)}"
            if readable
            else (", but no layer reads it to better than half of chance")
        )
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


#: a segment vector is "small" against tokens or positions below this ratio of mean norms, and
#: "larger" above :data:`SEGMENT_LARGE`; in between it is "comparable"
SEGMENT_SMALL, SEGMENT_LARGE = 0.5, 2.0


def _size_against(ratio: float, what: str) -> str:
    if ratio < SEGMENT_SMALL:
        return f"small against {what}"
    return f"larger than {what}" if ratio > SEGMENT_LARGE else f"comparable to {what}"


def segments_finding(metrics: dict) -> tuple[str, bool]:
    """How large the segment vectors are against positions and tokens, and how far apart they are.

    "small" against tokens (or positions) means under :data:`SEGMENT_SMALL` times their mean norm,
    "larger" over :data:`SEGMENT_LARGE` times, "comparable" in between; the sentence says each.

    >>> segments_finding({"segment_to_position_ratio": 1.0, "segment_to_token_ratio": 0.3,
    ...                   "segment_difference_norm": 0.5})[0]  # doctest: +NORMALIZE_WHITESPACE
    'Segment vectors are small against tokens but comparable to positions: 1x the mean position norm
    and 0.3x the mean token norm ("small" below 0.5x, "larger" above 2x); the segments differ by
    ||s_0 - s_last|| = 0.5'
    """
    ratio_p, ratio_t = metrics["segment_to_position_ratio"], metrics["segment_to_token_ratio"]
    sizes = [_size_against(ratio_t, "tokens")]
    if ratio_p is not None:
        sizes.append(_size_against(ratio_p, "positions"))
    if len(sizes) == 2 and sizes[0].split(" ")[0] == sizes[1].split(" ")[0]:
        size = sizes[0].replace("tokens", "tokens and positions")
    else:
        size = " but ".join(sizes)
    against = f"{ratio_p:.2g}x the mean position norm and " if ratio_p is not None else ""
    return (
        f'Segment vectors are {size}: {against}{ratio_t:.2g}x the mean token norm ("small" below '
        f'{SEGMENT_SMALL:g}x, "larger" above {SEGMENT_LARGE:g}x); the segments differ by ||s_0 - s_last|| = '
        f"{metrics['segment_difference_norm']:.3g}",
        False,
    )
