"""Context-extension variants of RoPE: same rotation, other frequencies.

Each variant is a small subclass of :class:`~posembed.schemes.rotary.rope.RotaryEmbedding` that
changes only how ``inv_freq`` and ``attention_scaling`` are computed (pure functions below).
The formulas follow the papers and, number for number, Hugging Face's ``modeling_rope_utils``
(the tests compare full tensors against its rope init functions).

========================================================= ================= =========================================
class                                                     name              paper
========================================================= ================= =========================================
:class:`LinearScalingRotary`                              rope_linear       Chen et al. 2023 (position interpolation)
:class:`NTKAwareRotary`                                   rope_ntk          bloc97 2023 (NTK-aware scaled RoPE)
:class:`DynamicNTKRotary`                                 rope_dynamic_ntk  emozilla 2023 (dynamic NTK)
:class:`~posembed.schemes.rotary.yarn.YaRNRotary`         rope_yarn         Peng et al. 2023 (YaRN)
:class:`Llama3Rotary`                                     rope_llama3       Meta 2024 (Llama 3.1)
:class:`~posembed.schemes.rotary.longrope.LongRoPERotary` rope_longrope     Ding et al. 2024 (LongRoPE)
:class:`ProportionalRotary`                               rope_proportional Hugging Face ``proportional`` rope type
========================================================= ================= =========================================

YaRN and LongRoPE, which also rescale attention, have their own modules
(:mod:`posembed.schemes.rotary.yarn`, :mod:`posembed.schemes.rotary.longrope`).

Every constructor takes ``head_dim`` and the variant's own fields, then the keyword arguments of
:class:`RotaryEmbedding` (``rotary_dim``, ``base``, ``layout``, ``max_len``, ``device``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from posembed._utils.checks import check_context_length, check_number
from posembed.schemes.rotary.rope import MIN_FACTOR, RotaryEmbedding, rope_inv_freq

__all__ = [
    "LinearScalingRotary", "NTKAwareRotary", "DynamicNTKRotary", "Llama3Rotary", "ProportionalRotary",
    "ntk_base", "dynamic_ntk_inv_freq", "llama3_inv_freq", "pair_treatment",
]  # fmt: skip


def pair_treatment(plain: float, used: float, factor: float | None) -> str:
    """What a scaling does to one frequency pair, from its plain and its used ``inv_freq``: ``"no rotation"``,
    ``"keep"``, ``"interpolate"`` (divided by ``factor``), ``"ramp"`` (divided by less or more) or ``"extrapolate"``
    (a higher frequency). The words of ``posembed rope check`` and the inspector.

    >>> pair_treatment(1.0, 0.25, 4.0), pair_treatment(1.0, 1.0, 4.0), pair_treatment(1.0, 0.5, 4.0)
    ('interpolate', 'keep', 'ramp')
    """
    if used == 0.0:
        return "no rotation"
    ratio = plain / used
    if math.isclose(ratio, 1.0, rel_tol=1e-4):
        return "keep"
    if factor and factor > 1 and math.isclose(ratio, factor, rel_tol=1e-4):
        return "interpolate"
    return "ramp" if ratio > 1 else "extrapolate"


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


def llama3_inv_freq(
    inv_freq: Tensor, factor: float, low_freq_factor: float, high_freq_factor: float, original_max_len: int
) -> Tensor:
    """Llama 3.1 frequencies: long wavelengths divided by ``factor``, short ones kept, smooth in between.
    With ``low_freq_factor == high_freq_factor`` there is no in-between: a step at ``original_max_len /
    low_freq_factor`` (the ramp's 0/0 is masked, as transformers' own computation masks it)."""
    low_freq_wavelen = original_max_len / low_freq_factor
    high_freq_wavelen = original_max_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_max_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


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
    takes_frequency_dim = True
    paper = "Chen et al. 2023 (position interpolation)"
    extrapolates = True

    def __init__(self, head_dim: int, *, factor: float, **rope_kwargs) -> None:
        self.factor = check_number(factor, "factor", MIN_FACTOR)
        super().__init__(head_dim, **rope_kwargs)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        inv_freq = rope_inv_freq(self.frequency_dim, self.base, device=device)
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
        self.factor = check_number(factor, "factor", MIN_FACTOR)
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
    takes_frequency_dim = True
    paper = "emozilla 2023 (dynamic NTK scaling)"
    extrapolates = True
    dynamic = True

    def __init__(self, head_dim: int, *, factor: float, original_max_len: int, **rope_kwargs) -> None:
        self.factor = check_number(factor, "factor", MIN_FACTOR)
        self.original_max_len = check_context_length(original_max_len, "original_max_len")
        super().__init__(head_dim, **rope_kwargs)

    def _inv_freq_for(self, length: Tensor) -> Tensor:
        return dynamic_ntk_inv_freq(length, self.base, self.factor, self.original_max_len, self.frequency_dim)

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
    takes_frequency_dim = True
    paper = "Grattafiori et al. 2024 (Llama 3)"
    extrapolates = True

    def __init__(
        self, head_dim: int, *, factor: float, original_max_len: int, low_freq_factor: float = 1.0,
        high_freq_factor: float = 4.0, **rope_kwargs,
    ) -> None:  # fmt: skip
        self.factor = check_number(factor, "factor", MIN_FACTOR)
        self.original_max_len = check_context_length(original_max_len, "original_max_len")
        self.low_freq_factor = check_number(low_freq_factor, "low_freq_factor", 0.0)
        self.high_freq_factor = check_number(high_freq_factor, "high_freq_factor", 0.0)
        if self.low_freq_factor == 0:  # original_max_len / low_freq_factor is the longest kept wavelength
            raise ValueError("low_freq_factor must be greater than 0 (it divides original_max_len), got 0")
        if self.high_freq_factor < self.low_freq_factor:  # equal: a clean step, no ramp (Llama 4 Scout publishes 1, 1)
            raise ValueError(f"high_freq_factor={high_freq_factor} must be at least low_freq_factor={low_freq_factor}")
        super().__init__(head_dim, **rope_kwargs)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        inv_freq = rope_inv_freq(self.frequency_dim, self.base, device=device)
        args = (self.factor, self.low_freq_factor, self.high_freq_factor, self.original_max_len)
        return llama3_inv_freq(inv_freq, *args), 1.0

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, factor={self.factor:g}, original_max_len={self.original_max_len}"


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
        self.rope_fraction = check_number(rope_fraction, "rope_fraction", 0.0)
        if self.rope_fraction > 1.0:
            raise ValueError(f"rope_fraction must be in [0, 1], got {rope_fraction}")
        self.factor = check_number(factor, "factor", 0.0)
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
