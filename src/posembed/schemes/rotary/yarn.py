"""YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language Models").

RoPE with "NTK-by-parts" frequencies (fast dims kept, slow dims interpolated, a linear ramp
between) and an attention factor ``0.1 ln s + 1`` folded into cos and sin. The pure functions
(:func:`yarn_inv_freq`, :func:`yarn_attention_factor`) hold the math and equal Hugging Face's
``_compute_yarn_parameters`` number for number; :class:`YaRNRotary` owns the buffers. The other
context-extension variants are in :mod:`posembed.schemes.rotary.scaling`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from posembed._utils.checks import check_context_length, check_number
from posembed.schemes.rotary.rope import MIN_FACTOR, RotaryEmbedding

__all__ = ["YaRNRotary", "yarn_inv_freq", "yarn_attention_factor"]


def yarn_attention_factor(factor: float, mscale: float | None = None, mscale_all_dim: float | None = None) -> float:
    """YaRN's ``0.1 ln(s) + 1`` (or the DeepSeek ratio of two such terms).

    >>> round(yarn_attention_factor(16.0), 6)
    1.277259
    """

    def get_mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if mscale and mscale_all_dim:
        return float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
    return get_mscale(factor)


def yarn_inv_freq(
    rotary_dim: int, base: float, factor: float, original_max_len: int,
    beta_fast: float = 32.0, beta_slow: float = 1.0, truncate: bool = True, device=None,
) -> Tensor:  # fmt: skip
    """YaRN "NTK-by-parts" frequencies: interpolate (``theta / s``) the dims with wavelengths longer
    than the context, keep the fast ones, and ramp linearly in between (``beta_fast`` / ``beta_slow``
    rotations over the original length bound the ramp).
    """

    def correction_dim(rotations: float) -> float:
        return (rotary_dim * math.log(original_max_len / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(rotary_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1).to(device)
    pos_freqs = base ** (torch.arange(0, rotary_dim, 2, device=device).float() / rotary_dim)
    extrapolation = 1 - ramp  # 1: keep the original frequency, 0: interpolate
    return (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation


class YaRNRotary(RotaryEmbedding):
    """YaRN (Peng et al. 2023): NTK-by-parts frequencies plus an attention factor ``0.1 ln s + 1``.

    Args:
        head_dim: D.
        factor: s, the context-extension ratio.
        original_max_len: L, the pre-training context length.
        beta_fast, beta_slow: ramp bounds, in rotations over L (the paper's beta = 32 and
            alpha = 1): dims rotating more than ``beta_fast`` times keep their frequency, dims
            rotating less than ``beta_slow`` times are interpolated.
        attention_factor: overrides the default ``0.1 ln s + 1`` (folded into cos and sin,
            so logits scale by its square).
        mscale, mscale_all_dim: DeepSeek's variant of the attention factor.
        truncate: round the ramp bounds to whole dims (Hugging Face default).

    Example:
        >>> yarn = YaRNRotary(64, factor=16.0, original_max_len=4096)
        >>> round(yarn.attention_scaling, 6)
        1.277259
    """

    name = "rope_yarn"
    paper = "Peng et al. 2023 (YaRN)"
    extrapolates = True

    def __init__(
        self, head_dim: int, *, factor: float, original_max_len: int, beta_fast: float = 32.0,
        beta_slow: float = 1.0, attention_factor: float | None = None, mscale: float | None = None,
        mscale_all_dim: float | None = None, truncate: bool = True, **rope_kwargs,
    ) -> None:  # fmt: skip
        self.factor = check_number(factor, "factor", MIN_FACTOR)
        self.original_max_len = check_context_length(original_max_len, "original_max_len")
        self.beta_fast, self.beta_slow = float(beta_fast), float(beta_slow)
        if self.beta_fast <= self.beta_slow:
            raise ValueError(f"beta_fast={beta_fast} must be greater than beta_slow={beta_slow}")
        self.attention_factor = (
            None if attention_factor is None else check_number(attention_factor, "attention_factor", 0.0)
        )
        self.mscale, self.mscale_all_dim, self.truncate = mscale, mscale_all_dim, bool(truncate)
        super().__init__(head_dim, **rope_kwargs)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        inv_freq = yarn_inv_freq(
            self.rotary_dim, self.base, self.factor, self.original_max_len,
            self.beta_fast, self.beta_slow, self.truncate, device=device,
        )  # fmt: skip
        scaling = self.attention_factor
        if scaling is None:
            scaling = yarn_attention_factor(self.factor, self.mscale, self.mscale_all_dim)
        return inv_freq, scaling

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, factor={self.factor:g}, original_max_len={self.original_max_len}"
