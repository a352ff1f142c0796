"""LongRoPE (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens"; Phi-3).

RoPE with searched per-frequency rescale factors, one set for short calls and one for long
ones, and an attention factor ``sqrt(1 + ln(s) / ln(L))`` folded into cos and sin, as Hugging
Face's ``_compute_longrope_parameters``. The other context-extension variants are in
:mod:`posembed.schemes.rotary.scaling` (YaRN in :mod:`posembed.schemes.rotary.yarn`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from posembed._utils.checks import check_context_length, check_number
from posembed.schemes.fp32_buffers import Fp32Buffer
from posembed.schemes.rotary.rope import RotaryEmbedding

__all__ = ["LongRoPERotary", "longrope_attention_factor"]


def longrope_attention_factor(factor: float, original_max_len: int) -> float:
    """LongRoPE's ``sqrt(1 + ln(s) / ln(L))`` (1 when ``s <= 1``)."""
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(factor) / math.log(original_max_len))


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
    takes_frequency_dim = True
    paper = "Ding et al. 2024 (LongRoPE)"
    long_inv_freq = Fp32Buffer()  # (D/2,), float32 whatever the model's dtype
    extrapolates = True
    dynamic = True

    def __init__(
        self, head_dim: int, *, short_factor: Sequence[float], long_factor: Sequence[float], original_max_len: int,
        factor: float = 1.0, attention_factor: float | None = None, **rope_kwargs,
    ) -> None:  # fmt: skip
        self.short_factor = [float(f) for f in short_factor]
        self.long_factor = [float(f) for f in long_factor]
        self.original_max_len = check_context_length(original_max_len, "original_max_len")
        self.factor = check_number(factor, "factor", 0.0)
        self.attention_factor = (
            None if attention_factor is None else check_number(attention_factor, "attention_factor", 0.0)
        )
        super().__init__(head_dim, **rope_kwargs)
        self.long_inv_freq = self._inv_freq("long_factor", self.inv_freq.device)

    def _inv_freq(self, which: str, device) -> Tensor:
        factors = getattr(self, which)
        if len(factors) != self.rotary_dim // 2:
            raise ValueError(f"{which} has {len(factors)} values; expected rotary_dim / 2 = {self.rotary_dim // 2}")
        ext = torch.tensor(factors, dtype=torch.float32, device=device)
        shape = torch.arange(0, self.frequency_dim, 2, dtype=torch.int64, device=device).float() / self.frequency_dim
        return 1.0 / (ext * self.base**shape)

    def _frequencies(self, device) -> tuple[Tensor, float]:
        scaling = self.attention_factor
        if scaling is None:
            scaling = longrope_attention_factor(self.factor, self.original_max_len)
        if self.long_inv_freq is not None:  # None while RotaryEmbedding.__init__ runs
            self.long_inv_freq.copy_(self._inv_freq("long_factor", device))
        return self._inv_freq("short_factor", device), scaling

    def _inv_freq_for(self, length: Tensor) -> Tensor:
        return torch.where(length > self.original_max_len, self.long_inv_freq, self.inv_freq)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, original_max_len={self.original_max_len}"
