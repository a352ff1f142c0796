"""The numbers behind the rotary sections: per-pair wavelengths, the long-term decay, pair usage.

- :func:`rotary_pairs`: each frequency pair's wavelength ``2 pi / theta_i`` before and after the
  scaling (YaRN, NTK, Llama 3 ...), read from ``posembed rope check``'s report for a Hugging Face
  config (its trained and scaled context, not the configured length), else from the scheme itself.
- :func:`rope_decay`: how q.k of aligned vectors changes with the relative distance m: the mean
  ``cos(m theta_i)`` over pairs, and RoFormer's long-term decay bound
  ``(2 / D) sum_j |S_j|``, ``S_j = sum_{i < j} exp(i m theta_i)`` (Su et al. 2021, section 3.4.3),
  both divided by their value at m = 0.
- :func:`pair_usage`: for every layer and head, the share of each rotary pair in
  ``||W_q pair|| * ||W_k pair||``: which frequencies the trained projections actually use
  (Barbero et al. 2024, "Round and Round We Go!").

Example:
    >>> import numpy as np
    >>> curves = rope_decay(np.array([1.0, 0.01]), np.array([0, 1000]))
    >>> float(curves["mean_cos"][0]), float(curves["bound"][0])
    (1.0, 1.0)
    >>> receding_below(np.array([1.0, 0.5, 0.05, 0.2, 0.01]), np.arange(5), 0.1)
    4
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from posembed.analysis.source_types import AttentionWeights, Source
from posembed.schemes.base import RotaryScheme
from posembed.schemes.rotary.rope import RotaryEmbedding, rope_inv_freq
from posembed.schemes.rotary.scaling import pair_treatment

__all__ = ["RotaryPairs", "rotary_pairs", "rope_decay", "distance_grid", "receding_below", "level_near", "pair_usage"]


@dataclass(frozen=True)
class RotaryPairs:
    """Per-pair frequencies (radians per position) of one rotary scheme, and the contexts around it."""

    scheme: str
    inv_freq: np.ndarray  # the frequencies used (after scaling), (P,)
    plain_inv_freq: np.ndarray  # plain RoPE with the same base, (P,)
    channels: list[tuple[int, int]]
    treatments: list[str]
    trained: int | None
    effective: int | None  # the scaled context: the length the scaling stretches ``trained`` to (factor x trained)
    attention_factor: float

    @property
    def wavelengths(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return 2 * np.pi / self.inv_freq

    @property
    def plain_wavelengths(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return 2 * np.pi / self.plain_inv_freq

    @property
    def scaled(self) -> bool:
        return not np.allclose(self.inv_freq, self.plain_inv_freq, rtol=1e-5)


def rotary_pairs(source: Source, length: int | None = None) -> RotaryPairs | None:
    """The pairs of ``source``'s RoPE: from its ``rope check`` report, else from its scheme (None: neither)."""
    if source.rope_report is not None and source.rope_report.layers[0].pairs:
        layer = source.rope_report.layers[0]
        rows = layer.pairs
        used = np.array([2 * np.pi / r.scaled_wavelength if math.isfinite(r.scaled_wavelength) else 0.0 for r in rows])
        return RotaryPairs(layer.scheme or "RoPE", used, np.array([2 * np.pi / r.wavelength for r in rows]),
                           [tuple(r.channels) for r in rows], [r.treatment for r in rows], layer.trained_context,
                           layer.scaled_context, float(layer.attention_factor or 1.0))  # fmt: skip
    scheme = source.scheme
    if isinstance(scheme, RotaryScheme) and not isinstance(scheme, RotaryEmbedding):
        return _sectioned_pairs(scheme, source.trained_length)
    if not isinstance(scheme, RotaryEmbedding):
        return None
    target = length or source.trained_length or 512
    plain = rope_inv_freq(scheme.rotary_dim, scheme.base).double().numpy()
    cos, sin = scheme.cos_sin(torch.tensor([1, max(target, 2) - 1]))
    used = torch.atan2(sin[0].double(), cos[0].double()).numpy() if scheme.dynamic else scheme.inv_freq.double().numpy()
    half = scheme.rotary_dim // 2
    channels = [(i, i + half) if scheme.layout == "half" else (2 * i, 2 * i + 1) for i in range(half)]
    trained = getattr(scheme, "original_max_len", None) or source.trained_length
    factor = getattr(scheme, "factor", None)
    effective = int(round(trained * factor)) if trained and factor else None
    return RotaryPairs(type(scheme).__name__, used, plain, channels,
                       [pair_treatment(p, u, factor) for p, u in zip(plain, used)], trained, effective,
                       float(scheme.attention_scaling))  # fmt: skip


def _sectioned_pairs(scheme: RotaryScheme, trained: int | None) -> RotaryPairs | None:
    """N-D rotary schemes (axial, M-RoPE, Pixtral): the pairs along the first axis (the others do not turn)."""
    inv_freq, axis = getattr(scheme, "inv_freq", None), getattr(scheme, "axis_of", None)
    layout, rotary_dim = getattr(scheme, "layout", None), getattr(scheme, "rotary_dim", None)
    if inv_freq is None or layout is None or rotary_dim is None or inv_freq.numel() != rotary_dim // 2:
        return None
    used = inv_freq.double().numpy().copy()
    if axis is not None and axis.numel() == used.size:
        used[axis.cpu().numpy() != 0] = 0.0  # positions run along the first axis, other coordinates held at 0
    half = rotary_dim // 2
    channels = [(i, i + half) if layout == "half" else (2 * i, 2 * i + 1) for i in range(half)]
    treatments = ["keep" if u else "no rotation" for u in used]
    return RotaryPairs(type(scheme).__name__, used, used.copy(), channels, treatments, trained, None, 1.0)


def distance_grid(longest: int, points: int = 400) -> np.ndarray:
    """Integer distances 0, 1, 2, ... up to ``longest``, log-spaced beyond the first few."""
    grid = np.unique(np.round(np.geomspace(1, max(longest, 2), points)).astype(np.int64))
    return np.concatenate([[0], grid])


def rope_decay(inv_freq: np.ndarray, distances: np.ndarray) -> dict[str, np.ndarray]:
    """``mean_cos`` and RoFormer's ``bound`` at each distance, both 1 at distance 0.

    Shape:
        inv_freq ``(P,)``, distances ``(N,)`` -> two ``(N,)`` arrays.
    """
    angles = np.outer(distances.astype(np.float64), inv_freq.astype(np.float64))  # (N, P)
    mean_cos = np.cos(angles).mean(axis=1)
    partial = np.cumsum(np.exp(1j * angles), axis=1)  # S_1 .. S_P, (N, P)
    bound = np.abs(partial).mean(axis=1)
    at_zero = (inv_freq.size + 1) / 2
    return {"mean_cos": mean_cos, "bound": bound / at_zero}


def level_near(curve: np.ndarray, distances: np.ndarray, at: int) -> float:
    """Mean ``|curve|`` over the distances within 25% of ``at`` (one point alone is noisy with few pairs)."""
    near = (distances >= 0.75 * at) & (distances <= 1.25 * at)
    return float(np.abs(curve[near]).mean()) if near.any() else float(np.abs(np.interp(at, distances, curve)))


def receding_below(curve: np.ndarray, distances: np.ndarray, level: float) -> int | None:
    """The first distance from which ``|curve|`` stays below ``level`` (None: it never does)."""
    envelope = np.maximum.accumulate(np.abs(curve)[::-1])[::-1]
    below = np.nonzero(envelope < level)[0]
    return int(distances[below[0]]) if below.size else None


def pair_usage(attention: list[AttentionWeights], channels: list[tuple[int, int]]) -> np.ndarray:
    """Share of each rotary pair in ``||W_q pair|| * ||W_k pair||``, per layer and query head.

    Shape:
        returns ``(L, H, P)``; each ``[l, h]`` row sums to 1.
    """
    index = torch.tensor(channels)  # (P, 2)
    found = []
    for layer in attention:
        d = layer.head_dim
        wq = layer.wq.reshape(layer.num_heads, d, -1)  # (H, D, C)
        wk = layer.wk.reshape(layer.num_kv_heads, d, -1)  # (KV, D, C)
        q = wq[:, index].pow(2).sum(dim=(-1, -2)).sqrt()  # (H, P)
        k = wk[:, index].pow(2).sum(dim=(-1, -2)).sqrt()  # (KV, P)
        k = k.repeat_interleave(layer.num_heads // layer.num_kv_heads, dim=0)  # (H, P)
        usage = q * k
        found.append((usage / usage.sum(dim=-1, keepdim=True).clamp_min(1e-300)).numpy())
    return np.stack(found)
