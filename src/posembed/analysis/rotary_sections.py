"""The rotary report sections: per-pair wavelengths, the long-term decay of q.k, which pairs the model uses.

Each ``section_*`` function adds a numbered section (opening with its finding) to an
:class:`~posembed._utils.html.HtmlReport` and returns its metrics; the numbers come from
:mod:`posembed.analysis.rotary_math`.

Example:
    >>> from posembed.analysis.sources import load_scheme
    >>> from posembed._utils.html import HtmlReport
    >>> source = load_scheme("rope_yarn", dim=16, max_len=32, overrides={"factor": 4, "original_max_len": 64})
    >>> pairs = rotary_pairs(source)
    >>> found = section_rope_frequencies(HtmlReport("t"), pairs)
    >>> found["trained_context"], found["effective_context"], found["treatments"]["interpolate"] >= 1
    (64, 256, True)
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from posembed._utils.html import HtmlReport
from posembed.analysis import scheme_plots
from posembed.analysis.rotary_math import (
    RotaryPairs,
    distance_grid,
    level_near,
    pair_usage,
    receding_below,
    rope_decay,
    rotary_pairs,
)  # fmt: skip
from posembed.analysis.source_types import AttentionWeights

__all__ = ["rotary_pairs", "section_rope_frequencies", "section_rope_decay", "section_rope_usage"]

#: usage concentration (most-used pair's share over an even share) below which pairs count as evenly used
EVEN_USE = 1.5


def _scaling_words(pairs: RotaryPairs) -> str:
    counts = Counter(pairs.treatments)
    if not pairs.scaled:
        return f"{pairs.scheme} uses plain RoPE frequencies (no scaling)"
    parts = ", ".join(f"{n} {name}" for name, n in counts.items())
    return f"{pairs.scheme} scales the frequencies ({parts}; attention factor {pairs.attention_factor:.4g})"


def section_rope_frequencies(report: HtmlReport, pairs: RotaryPairs) -> dict:
    """Each frequency pair's wavelength against the trained and the scaled context."""
    report.section("Rotary frequencies against the context")
    waves, plain = pairs.wavelengths, pairs.plain_wavelengths
    horizon = pairs.trained or pairs.effective
    full = int((waves <= horizon).sum()) if horizon else None
    finite = waves[np.isfinite(waves)] if np.isfinite(waves).any() else np.array([np.nan])
    report.paragraph(
        f"{len(waves)} frequency pairs rotate channels {pairs.channels[0]}, "
        f"{pairs.channels[1] if len(pairs.channels) > 1 else ''}"
        " ... (pair i turns by θ_i per position; its wavelength 2π/θ_i is the number of positions per full turn). "
        "A pair whose wavelength exceeds the trained context never completed a turn in training: beyond that "
        "context it shows angles the model never saw, which is what the scalings (position interpolation, NTK, "
        "YaRN, Llama 3) stretch. The table counts what the scaling does to each pair, as `posembed rope check` does."
    )
    rows = [{"pair": i, "channels": str(ch), "wavelength": float(p), "scaled wavelength": float(w),
             "x trained": float(w / pairs.trained) if pairs.trained and np.isfinite(w) else None, "treatment": t}
            for i, (ch, p, w, t) in enumerate(zip(pairs.channels, plain, waves, pairs.treatments))]  # fmt: skip
    report.table(rows)
    report.figure(
        scheme_plots.wavelength_figure(plain, waves, pairs.trained, pairs.effective, pairs.scheme),
        "rope_wavelengths",
        "wavelength of each frequency pair, with the trained and scaled context",
    )
    finding = _scaling_words(pairs)
    if horizon:
        finding += (
            f"; {full} of {len(waves)} pairs complete a full turn within the trained context of {horizon}, "
            f"the slowest turning pair's wavelength is {float(finite.max() / horizon):.3g}x that context"
        )
    if pairs.effective and pairs.effective != pairs.trained:
        finding += f"; the scaled context is {pairs.effective} positions"
    report.finding(finding + ".")
    return {
        "scheme": pairs.scheme,
        "pairs": len(waves),
        "trained_context": pairs.trained,
        "effective_context": pairs.effective,
        "attention_factor": pairs.attention_factor,
        "full_turns_within_trained": full,
        "treatments": dict(Counter(pairs.treatments)),
        "wavelengths": [float(w) if np.isfinite(w) else None for w in waves],  # None: the pair does not turn
        "finding": finding + ".",
    }


def section_rope_decay(report: HtmlReport, pairs: RotaryPairs) -> dict:
    """The relative-distance decay of q.k for aligned vectors (RoFormer's long-term decay)."""
    report.section("Long-term decay of q·k with distance (Su et al., RoFormer)")
    horizon = pairs.effective or pairs.trained or 512
    distances = distance_grid(4 * horizon)
    used = rope_decay(pairs.inv_freq, distances)
    curves = {f"{pairs.scheme}: mean cos(mθ_i)": used["mean_cos"], f"{pairs.scheme}: RoFormer bound": used["bound"]}
    if pairs.scaled:
        plain = rope_decay(pairs.plain_inv_freq, distances)
        curves["plain RoPE: mean cos(mθ_i)"], curves["plain RoPE: RoFormer bound"] = plain["mean_cos"], plain["bound"]
    report.paragraph(
        "For a query and a key that are the same vector of ones (every pair aligned), q·k at relative distance m "
        "is the mean of cos(m θ_i) over the pairs; RoFormer's bound on q·k for slowly varying vectors is "
        "(2/D) Σ_j |Σ_{i<j} exp(i m θ_i)|. Both are divided by their value at m = 0, so the attention factor "
        f"({pairs.attention_factor:.4g}) cancels. Distances run to {int(distances[-1])} (4x the "
        f"{'scaled' if pairs.effective else 'trained'} context). 'Halved from' is the first distance after which "
        "the curve never again exceeds 0.5 in magnitude; 'at' a context is the mean magnitude within 25% of it. "
        "With few pairs the bound levels off near 1.3/sqrt(D/2) instead of decaying further."
    )
    reference = pairs.trained or horizon
    marks = {"trained": reference, "scaled": pairs.effective if pairs.effective != reference else None}
    rows, metrics = [], {}
    for name, curve in curves.items():
        values = {key: (level_near(curve, distances, at) if at else None) for key, at in marks.items()}
        half = receding_below(curve, distances, 0.5)
        rows.append({"curve": name, "at the trained context": values["trained"],
                     "at the scaled context": values["scaled"], "halved from": half})  # fmt: skip
        metrics[name] = {"at_trained_context": values["trained"], "at_scaled_context": values["scaled"],
                         "halved_from": half}  # fmt: skip
    report.table(rows)
    report.figure(scheme_plots.decay_figure(distances, curves, pairs.trained, pairs.effective),
                  "rope_decay", "q·k of aligned vectors against relative distance")  # fmt: skip
    finding = _decay_words(rows, reference, pairs, int(distances[-1]))
    report.finding(finding + ".")
    return {"distances": [int(d) for d in distances[:: max(1, len(distances) // 64)]], "curves": metrics,
            "finding": finding + "."}  # fmt: skip


def _decay_words(rows: list[dict], reference: int, pairs: RotaryPairs, longest: int) -> str:
    aligned, bound = rows[0], rows[1]
    text = (
        f"RoFormer's bound on q·k falls to {bound['at the trained context']:.2f} of its distance-0 value "
        f"at the trained context ({reference})"
    )
    if bound["at the scaled context"] is not None:
        text += f" and {bound['at the scaled context']:.2f} at the scaled context ({pairs.effective})"
    half = bound["halved from"]
    text += (
        f"; it stays below half from distance {half} on"
        if half is not None
        else f"; it never halves within {longest} positions"
    )
    text += f"; q·k of aligned vectors is {aligned['at the trained context']:.2f} at the trained context"
    if pairs.scaled:
        plain = rows[3]
        text += f" (plain RoPE with the same base: bound {plain['at the trained context']:.2f} there"
        if plain["at the scaled context"] is not None:
            text += f", {plain['at the scaled context']:.2f} at the scaled context"
        text += ")"
    return text


def section_rope_usage(report: HtmlReport, pairs: RotaryPairs, attention: list[AttentionWeights]) -> dict:
    """Which frequency pairs the trained q/k projections use, per layer and head (heatmap)."""
    report.section("Frequency pairs the model uses")
    shares = pair_usage(attention, pairs.channels)  # (L, H, P)
    layers, heads, count = shares.shape
    waves = pairs.wavelengths
    horizon = pairs.trained or pairs.effective
    slow = waves > horizon if horizon else np.zeros(count, dtype=bool)
    concentration = shares.max(axis=-1) * count  # (L, H): 1 = even
    slow_share = shares[..., slow].sum(axis=-1)  # (L, H)
    report.paragraph(
        f"For each of the {layers} layers and {heads} query heads: the norm of the rows of W_q and of W_k that "
        "write a pair's two channels, multiplied (a bound on what the pair can add to q·k), as a share of the "
        "head's total. Pairs with little weight are frequencies the head ignores; heavily used slow pairs "
        "(wavelength beyond the trained context) act as position-free 'semantic' channels (Barbero et al. 2024). "
        "Concentration: the most-used pair's share over an even share 1/P (1 = every pair used alike)."
    )
    rows = [{"layer": layer, "mean concentration": float(concentration[layer].mean()),
             "max concentration": float(concentration[layer].max()),
             "most-used pair (mode over heads)": int(np.bincount(shares[layer].argmax(-1), minlength=count).argmax()),
             "share in slow pairs": float(slow_share[layer].mean())} for layer in range(layers)]  # fmt: skip
    report.table(rows)
    report.figure(scheme_plots.usage_figure(shares, waves, horizon), "rope_pair_usage",
                  "share of each frequency pair in the q/k projection weights, per layer and head")  # fmt: skip
    even_slow = float(slow.mean())
    mean_concentration = float(concentration.mean())
    if mean_concentration < EVEN_USE:
        finding = (
            f"the heads spread their q/k weight evenly over the {count} pairs (the most-used pair holds "
            f"{mean_concentration:.2f}x an even share on average): no frequency preference, as in an untrained model"
        )
    else:
        favoured = np.bincount(shares.reshape(-1, count).argmax(-1), minlength=count).argmax()
        finding = (f"the heads concentrate their q/k weight (the most-used pair holds {mean_concentration:.2f}x an "
                   f"even share on average); the pair most often on top is pair {favoured} (wavelength "
                   f"{float(waves[favoured]):.3g})")  # fmt: skip
    if horizon and slow.any():
        finding += (f"; pairs slower than the trained context hold {float(slow_share.mean()):.0%} of the weight "
                    f"(even: {even_slow:.0%})")  # fmt: skip
    report.finding(finding + ".")
    return {"per_layer": rows, "mean_concentration": mean_concentration,
            "slow_pair_share": float(slow_share.mean()), "even_slow_share": even_slow,
            "mean_share_per_pair": [float(v) for v in shares.mean(axis=(0, 1))], "finding": finding + "."}  # fmt: skip
