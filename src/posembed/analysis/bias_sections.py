"""The bias report sections: the attention bias against distance per head, and the effective receptive field.

A bias scheme (ALiBi, T5 buckets, KERPLE, Sandwich, FIRE, dynamic position bias ...) adds ``b(h, i, j)``
to the logits; all else equal, the key at distance m gets ``exp(b(m) - b(0))`` times the weight of the
key at distance 0. The receptive field of a head is the distance at which that factor falls to 1/10
(and 1/100): ``b(m) - b(0) <= -ln 10``.

Example:
    >>> from posembed.schemes.bias.alibi import ALiBi
    >>> bias = bias_by_distance(ALiBi(num_heads=2), 1024)  # slopes 1/16 and 1/256
    >>> bias.shape, receptive_field(bias, 10.0), receptive_field(bias[:, :64], 10.0)
    ((2, 1024), [37, 590], [37, None])
"""

from __future__ import annotations

import math

import numpy as np
import torch

from posembed._utils.html import HtmlReport
from posembed.analysis import scheme_plots
from posembed.schemes.base import BiasScheme

__all__ = ["bias_by_distance", "receptive_field", "bias_horizon", "section_bias_distance", "section_receptive_field"]

#: longest distance the bias sections look at
MAX_HORIZON = 8192


def bias_horizon(trained: int | None, analysed: int | None) -> int:
    """Distances to look at: 4x the trained context (at least 512 and the analysed length), at most 8192."""
    return int(min(MAX_HORIZON, max(512, 4 * (trained or 0), analysed or 0)))


def bias_by_distance(scheme: BiasScheme, length: int) -> np.ndarray:
    """``b(h, T-1, T-1-m)`` for m = 0 .. T-1: keys before the query (what a causal model sees).

    Shape:
        returns ``(H, T)``, column m = distance m.
    """
    keys = torch.arange(length)
    with torch.no_grad():
        bias = scheme.bias(torch.tensor([length - 1]), keys)  # (H, 1, T)
    if bias is None:
        raise ValueError(f"{type(scheme).__name__} adds no bias")
    return bias[:, 0].double().flip(-1).numpy()


def receptive_field(bias: np.ndarray, factor: float) -> list[int | None]:
    """Per head, the first distance m where ``b(m) - b(0) <= -ln(factor)`` (None: not within the row)."""
    drop = bias - bias[:, :1]
    found = []
    for row in drop:
        hits = np.nonzero(row <= -math.log(factor))[0]
        found.append(int(hits[0]) if hits.size else None)
    return found


def section_bias_distance(report: HtmlReport, scheme: BiasScheme, horizon: int, trained: int | None) -> dict:
    """The bias against distance, one line per head (six heads a panel)."""
    report.section("Attention bias against distance, per head")
    bias = bias_by_distance(scheme, horizon)  # (H, T)
    distances = np.arange(horizon)
    drop = bias - bias[:, :1]
    rising = [h for h in range(bias.shape[0]) if drop[h, 1:].max() > 1e-6]
    monotone = [h for h in range(bias.shape[0]) if np.all(np.diff(bias[h]) <= 1e-9)]
    report.paragraph(
        f"{type(scheme).__name__} ({bias.shape[0]} heads): b(m) - b(0), the bias a key m positions before the query "
        f"gets relative to the query's own position, for m = 0..{horizon - 1}"
        + (f" (the model trained on {trained} positions)" if trained else "")
        + ". Below the dotted line (-ln 10) the key's weight is divided by more than 10, all else equal."
    )
    at = [d for d in (1, 16, 128, trained, horizon - 1) if d is not None and d < horizon]
    rows = [{"head": h, **{f"m={d}": float(drop[h, d]) for d in sorted(set(at))}, "monotone": h in monotone}
            for h in range(bias.shape[0])]  # fmt: skip
    report.table(rows)
    report.figure(scheme_plots.bias_distance_figure(distances, bias, None), "bias_distance",
                  "attention bias relative to distance 0, per head")  # fmt: skip
    finding = f"{len(monotone)} of {bias.shape[0]} heads lower the weight steadily with distance"
    if rising:
        finding += (
            f"; {len(rising)} give some distant keys more weight than the query's own position ({_heads(rising)})"
        )
    spread = drop[:, -1]
    finding += f"; at distance {horizon - 1} the bias ranges from {spread.min():.3g} to {spread.max():.3g}"
    report.finding(finding + ".")
    return {"heads": int(bias.shape[0]), "horizon": horizon, "monotone_heads": monotone, "rising_heads": rising,
            "per_head": rows, "finding": finding + "."}  # fmt: skip


def _heads(heads: list[int]) -> str:
    return "heads " + ", ".join(str(h) for h in heads[:8]) + (" ..." if len(heads) > 8 else "")


def section_receptive_field(report: HtmlReport, scheme: BiasScheme, horizon: int, trained: int | None) -> dict:
    """Per head, the distance at which the bias divides the weight by 10 and by 100."""
    report.section("Effective receptive field")
    bias = bias_by_distance(scheme, horizon)
    tenfold, hundredfold = receptive_field(bias, 10.0), receptive_field(bias, 100.0)
    report.paragraph(
        "The receptive field of a head: the distance m at which exp(b(m) - b(0)) falls to 1/10 (and 1/100), "
        f"i.e. where the bias alone makes a key ten (a hundred) times less attended; empty where it does not "
        f"happen within {horizon} positions. Keys farther than that can still win, but only with a q·k "
        "advantage of ln 10 = 2.3 (ln 100 = 4.6)."
    )
    rows = [
        {"head": h, "weight / 10 at": t, "weight / 100 at": u} for h, (t, u) in enumerate(zip(tenfold, hundredfold))
    ]
    report.table(rows)
    report.figure(scheme_plots.receptive_field_figure(tenfold, hundredfold, horizon), "receptive_field",
                  "distance at which the bias divides the attention weight by 10 and by 100, per head")  # fmt: skip
    reached = sorted(v for v in tenfold if v is not None)
    never = len(tenfold) - len(reached)
    if reached:
        finding = (f"the bias divides the weight by 10 at distances from {reached[0]} to {reached[-1]} "
                   f"(median {int(np.median(reached))}) in {len(reached)} of {len(tenfold)} heads")  # fmt: skip
        if trained:
            inside = sum(v <= trained for v in reached)
            finding += f"; {inside} of them within the trained context of {trained}"
    else:
        finding = "no head's bias divides the weight by 10"
    if never:
        finding += (f"; {never} {'head never reaches' if never == 1 else 'heads never reach'} a tenfold drop "
                    f"within {horizon} positions (the bias leaves the whole context visible)")  # fmt: skip
    report.finding(finding + ".")
    return {"tenfold": tenfold, "hundredfold": hundredfold, "horizon": horizon, "finding": finding + "."}
