"""Context-extension variants of RoPE: same rotation, other frequencies.

Each variant is a small subclass of :class:`~posembed.schemes.rotary.RotaryEmbedding` that
changes only how ``inv_freq`` and ``attention_scaling`` are computed (pure functions below).
The formulas follow the papers and, number for number, Hugging Face's ``modeling_rope_utils``
(the tests compare full tensors against its rope init functions).

============================== ================= ==========================================
class                          name              paper
============================== ================= ==========================================
:class:`LinearScalingRotary`   rope_linear       Chen et al. 2023 (position interpolation)
:class:`NTKAwareRotary`        rope_ntk          bloc97 2023 (NTK-aware scaled RoPE)
:class:`DynamicNTKRotary`      rope_dynamic_ntk  emozilla 2023 (dynamic NTK)
:class:`YaRNRotary`            rope_yarn         Peng et al. 2023 (YaRN)
:class:`Llama3Rotary`          rope_llama3       Meta 2024 (Llama 3.1)
:class:`LongRoPERotary`        rope_longrope     Ding et al. 2024 (LongRoPE)
:class:`ProportionalRotary`    rope_proportional Hugging Face ``proportional`` rope type
============================== ================= ==========================================

Every constructor takes ``head_dim`` and the variant's own fields, then the keyword arguments of
:class:`RotaryEmbedding` (``rotary_dim``, ``base``, ``layout``, ``max_len``, ``device``).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor

from posembed.schemes.rotary import RotaryEmbedding, rope_inv_freq

__all__ = [
    "LinearScalingRotary", "NTKAwareRotary", "DynamicNTKRotary", "YaRNRotary", "Llama3Rotary", "LongRoPERotary",
    "ProportionalRotary", "ntk_base", "dynamic_ntk_inv_freq", "yarn_inv_freq", "yarn_attention_factor",
    "llama3_inv_freq", "longrope_attention_factor",
]  # fmt: skip


def _factor(value: object, name: str = "factor", minimum: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < minimum:
        raise ValueError(f"{name} must be a finite number >= {minimum}, got {value}")
    return float(value)


def _length(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int (a context length), got {value!r}")
    return value


def ntk_base(base: float, factor: float, rotary_dim: int) -> float:
    """NTK-aware base ``base * s^(D / (D - 2))``.

    >>> round(ntk_base(10000.0, 4.0, 128))
    40890
    """
    return base * factor ** (rotary_dim / (rotary_dim - 2))


def dynamic_ntk_inv_freq(length: Tensor, base: float, factor: float, original_max_len: int, rotary_dim: int) -> Tensor:
    """Dynamic NTK frequencies for current length ``l``: base ``b * ((s l / L) - (s - 1))^(D/(D-2))``.

    ``l`` is clamped to at least ``L`` (the original frequencies below it); float32 tensor maths,
    no host synchronisation.
    """
    length = torch.clamp(length.to(torch.int64), min=original_max_len)
    scaled = base * ((factor * length / original_max_len) - (factor - 1)) ** (rotary_dim / (rotary_dim - 2))
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device=length.device).float() / rotary_dim
    return 1.0 / (scaled**exponents)


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


def llama3_inv_freq(
    inv_freq: Tensor, factor: float, low_freq_factor: float, high_freq_factor: float, original_max_len: int
) -> Tensor:
    """Llama 3.1 frequencies: long wavelengths divided by ``factor``, short ones kept, smooth in between."""
    low_freq_wavelen = original_max_len / low_freq_factor
    high_freq_wavelen = original_max_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_max_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def longrope_attention_factor(factor: float, original_max_len: int) -> float:
    """LongRoPE's ``sqrt(1 + ln(s) / ln(L))`` (1 when ``s <= 1``)."""
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(factor) / math.log(original_max_len))


class LinearScalingRotary(RotaryEmbedding):
    """Position interpolation (Chen et al. 2023): positions ``m / s``, i.e. ``inv_freq / s``.

    Args:
        head_dim: D.
        factor: s >= 1, the context-extension ratio (4 stretches 2048 to 8192 positions).

    Example:
        >>> pi = LinearScalingRotary(8, factor=4.0)
        >>> plain = RotaryEmbedding(8)
        >>> bool(torch.allclose(pi.cos_sin(torch.tensor([8]))[0], plain.cos_sin(torch.tensor([2]))[0]))
        True
    """

    name = "rope_linear"
    paper = "Chen et al. 2023 (position interpolation)"
    extrapolates = True

    def __init__(self, head_dim: int, *, factor: float, **rope_kwargs) -> None:
        self.factor = _factor(factor)
        super().__init__(head_dim, **rope_kwargs)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        inv_freq = rope_inv_freq(self.rotary_dim, self.base, device=device)
        inv_freq /= self.factor
        return inv_freq, 1.0

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, factor={self.factor:g}"


class NTKAwareRotary(RotaryEmbedding):
    """NTK-aware scaled RoPE: a larger base ``base * s^(D/(D-2))`` (bloc97 2023).

    Base 1e4, D 128, s 4 gives base 40 890 (see :attr:`scaled_base`).

    Example:
        >>> round(NTKAwareRotary(128, factor=4.0).scaled_base)
        40890
    """

    name = "rope_ntk"
    paper = "bloc97 2023 (NTK-aware scaled RoPE)"
    extrapolates = True

    def __init__(self, head_dim: int, *, factor: float, **rope_kwargs) -> None:
        self.factor = _factor(factor)
        super().__init__(head_dim, **rope_kwargs)

    @property
    def scaled_base(self) -> float:
        return ntk_base(self.base, self.factor, self.rotary_dim)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        return rope_inv_freq(self.rotary_dim, self.scaled_base, device=device), 1.0

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, factor={self.factor:g}"


class DynamicNTKRotary(RotaryEmbedding):
    """Dynamic NTK: the NTK base recomputed from the current length ``l`` of each call.

    For ``l <= L`` (``original_max_len``) the frequencies are plain RoPE's; beyond, the base is
    ``base * ((s l / L) - (s - 1))^(D/(D-2))``. ``l`` is ``max(position) + 1`` over the queries
    and keys of the call, so both are rotated with one set of frequencies. Unlike Hugging Face's
    stateful module (which keeps the largest length seen until it drops below ``L``), the result
    depends only on the call's own positions. No cos/sin cache (``max_len`` is ignored).

    Example:
        >>> rope = DynamicNTKRotary(8, factor=2.0, original_max_len=16)
        >>> short, long = torch.arange(8), torch.arange(32)
        >>> bool(torch.equal(rope.cos_sin(short)[0], RotaryEmbedding(8).cos_sin(short)[0]))
        True
        >>> bool(torch.equal(rope.cos_sin(long)[0], RotaryEmbedding(8).cos_sin(long)[0]))
        False
    """

    name = "rope_dynamic_ntk"
    paper = "emozilla 2023 (dynamic NTK scaling)"
    extrapolates = True
    dynamic = True

    def __init__(self, head_dim: int, *, factor: float, original_max_len: int, **rope_kwargs) -> None:
        self.factor = _factor(factor)
        self.original_max_len = _length(original_max_len, "original_max_len")
        super().__init__(head_dim, **rope_kwargs)

    def _inv_freq_for(self, length: Tensor) -> Tensor:
        return dynamic_ntk_inv_freq(length, self.base, self.factor, self.original_max_len, self.rotary_dim)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, factor={self.factor:g}, original_max_len={self.original_max_len}"


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
        self.factor = _factor(factor)
        self.original_max_len = _length(original_max_len, "original_max_len")
        self.beta_fast, self.beta_slow = float(beta_fast), float(beta_slow)
        if self.beta_fast <= self.beta_slow:
            raise ValueError(f"beta_fast={beta_fast} must be greater than beta_slow={beta_slow}")
        self.attention_factor = None if attention_factor is None else _factor(attention_factor, "attention_factor", 0.0)
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


class Llama3Rotary(RotaryEmbedding):
    """Llama 3.1 RoPE scaling: low frequencies divided by ``factor``, high ones kept, smooth between.

    Args:
        head_dim: D.
        factor: 8 for Llama 3.1.
        low_freq_factor, high_freq_factor: 1 and 4 for Llama 3.1.
        original_max_len: 8192 for Llama 3.1.

    Example:
        >>> rope = Llama3Rotary(128, factor=8.0, original_max_len=8192, base=500000.0)
        >>> plain = rope_inv_freq(128, 500000.0)
        >>> bool(torch.equal(rope.inv_freq[:4], plain[:4])), bool(torch.allclose(rope.inv_freq[-1], plain[-1] / 8))
        (True, True)
    """

    name = "rope_llama3"
    paper = "Grattafiori et al. 2024 (Llama 3)"
    extrapolates = True

    def __init__(
        self, head_dim: int, *, factor: float, original_max_len: int, low_freq_factor: float = 1.0,
        high_freq_factor: float = 4.0, **rope_kwargs,
    ) -> None:  # fmt: skip
        self.factor = _factor(factor)
        self.original_max_len = _length(original_max_len, "original_max_len")
        self.low_freq_factor = _factor(low_freq_factor, "low_freq_factor", 0.0)
        self.high_freq_factor = _factor(high_freq_factor, "high_freq_factor", 0.0)
        if self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                f"high_freq_factor={high_freq_factor} must be greater than low_freq_factor={low_freq_factor}"
            )
        super().__init__(head_dim, **rope_kwargs)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        inv_freq = rope_inv_freq(self.rotary_dim, self.base, device=device)
        args = (self.factor, self.low_freq_factor, self.high_freq_factor, self.original_max_len)
        return llama3_inv_freq(inv_freq, *args), 1.0

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, factor={self.factor:g}, original_max_len={self.original_max_len}"


class LongRoPERotary(RotaryEmbedding):
    """LongRoPE (Ding et al. 2024; Phi-3): per-frequency rescale factors, short and long.

    A call whose length (largest position + 1) is at most ``original_max_len`` uses
    ``short_factor``, a longer one ``long_factor`` (for queries and keys alike). The attention factor defaults to
    ``sqrt(1 + ln(s) / ln(L))``. As Hugging Face, the choice is made per call from its largest
    position, so no cos/sin cache is built (``max_len`` is ignored).

    Args:
        head_dim: D.
        short_factor, long_factor: ``rotary_dim / 2`` factors each.
        original_max_len: L, the pre-training context length.
        factor: s, the extension ratio (``max_position_embeddings / L``), for the attention factor.
        attention_factor: explicit attention factor (overrides the default).

    Example:
        >>> rope = LongRoPERotary(4, short_factor=[1.0, 1.0], long_factor=[1.0, 4.0], original_max_len=8, factor=4.0)
        >>> rope.cos_sin(torch.arange(8))[1][-1, 1] == rope.cos_sin(torch.arange(9))[1][7, 1]
        tensor(False)
    """

    name = "rope_longrope"
    paper = "Ding et al. 2024 (LongRoPE)"
    extrapolates = True
    dynamic = True

    def __init__(
        self, head_dim: int, *, short_factor: Sequence[float], long_factor: Sequence[float], original_max_len: int,
        factor: float = 1.0, attention_factor: float | None = None, **rope_kwargs,
    ) -> None:  # fmt: skip
        self.short_factor = [float(f) for f in short_factor]
        self.long_factor = [float(f) for f in long_factor]
        self.original_max_len = _length(original_max_len, "original_max_len")
        self.factor = _factor(factor, "factor", 0.0)
        self.attention_factor = None if attention_factor is None else _factor(attention_factor, "attention_factor", 0.0)
        super().__init__(head_dim, **rope_kwargs)
        self.register_buffer("long_inv_freq", self._inv_freq("long_factor", self.inv_freq.device), persistent=False)

    def _inv_freq(self, which: str, device) -> Tensor:
        factors = getattr(self, which)
        if len(factors) != self.rotary_dim // 2:
            raise ValueError(f"{which} has {len(factors)} values; expected rotary_dim / 2 = {self.rotary_dim // 2}")
        ext = torch.tensor(factors, dtype=torch.float32, device=device)
        shape = torch.arange(0, self.rotary_dim, 2, dtype=torch.int64, device=device).float() / self.rotary_dim
        return 1.0 / (ext * self.base**shape)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        scaling = self.attention_factor
        if scaling is None:
            scaling = longrope_attention_factor(self.factor, self.original_max_len)
        if hasattr(self, "long_inv_freq"):
            self.long_inv_freq.copy_(self._inv_freq("long_factor", device))
        return self._inv_freq("short_factor", device), scaling

    def _inv_freq_for(self, length: Tensor) -> Tensor:
        return torch.where(length > self.original_max_len, self.long_inv_freq, self.inv_freq)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, original_max_len={self.original_max_len}"


class ProportionalRotary(RotaryEmbedding):
    """Hugging Face's ``proportional`` RoPE: only the first ``rope_fraction`` of the frequency
    pairs rotate (with exponents over the full head dim), the rest get frequency 0; all
    frequencies are divided by ``factor``. Unlike partial rotary, the zero-frequency pairs are
    spread over the full head in the chosen layout.

    Example:
        >>> rope = ProportionalRotary(8, rope_fraction=0.5)
        >>> rope.inv_freq
        tensor([1.0000, 0.1000, 0.0000, 0.0000])
    """

    name = "rope_proportional"
    paper = "Hugging Face transformers (proportional rope type)"
    extrapolates = False

    def __init__(self, head_dim: int, *, rope_fraction: float, factor: float = 1.0, **rope_kwargs) -> None:
        self.rope_fraction = _factor(rope_fraction, "rope_fraction", 0.0)
        if self.rope_fraction > 1.0:
            raise ValueError(f"rope_fraction must be in [0, 1], got {rope_fraction}")
        self.factor = _factor(factor, "factor", 0.0)
        if self.factor == 0.0:
            raise ValueError("factor must be > 0, got 0")
        if rope_kwargs.get("rotary_dim") not in (None, head_dim):
            raise ValueError("ProportionalRotary spreads its frequencies over the full head; leave rotary_dim unset")
        super().__init__(head_dim, **rope_kwargs)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        angles = int(self.rope_fraction * self.head_dim // 2)
        exponents = torch.arange(0, 2 * angles, 2, dtype=torch.int64, device=device).float() / self.head_dim
        rotated = 1.0 / (self.base**exponents)
        zeros = torch.zeros(self.head_dim // 2 - angles, dtype=torch.float32, device=device)
        return torch.cat((rotated, zeros)) / self.factor, 1.0

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rope_fraction={self.rope_fraction:g}, factor={self.factor:g}"
