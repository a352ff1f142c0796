"""xPos: RoPE with an exponential decay of the logits with distance (Sun et al. 2022,
"A Length-Extrapolatable Transformer").

Pair ``i`` of the query at position ``n`` is scaled by ``zeta_i^(n/B)`` and of the key at
position ``m`` by ``zeta_i^(-m/B)``, with ``zeta_i = (2i + 0.4 D) / (1.4 D)`` (< 1) and
``B = scale_base`` (512), so the logit of pair ``i`` carries ``zeta_i^((n - m)/B)``: a decay for
keys in the past. For keys in the future (``m > n``) it is a growth, so xPos is causal only.

As the reference implementations (torchscale, rotary-embedding-torch) do, the exponents are
centred, ``(n - c)/B`` with ``c = (min + max + 1) // 2`` over the positions of the call's queries
and keys (``T // 2`` for ``arange(T)``), which keeps the scales near 1; the logits do not depend
on ``c``. Spans much longer than ``B`` still under/overflow fp32 (``zeta_0^(T / 2B)``), as in
the reference implementations.
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed._utils.checks import check_positive_int
from posembed.schemes.fp32_buffers import Fp32Buffer
from posembed.schemes.rotary.checks import resolve_qk_positions
from posembed.schemes.rotary.rope import RotaryEmbedding, rope_cos_sin

__all__ = ["XPos", "xpos_zeta"]


def xpos_zeta(rotary_dim: int, device=None) -> Tensor:
    """``zeta_i = (2i + 0.4 D) / (1.4 D)`` for ``i < D/2``, float32.

    >>> xpos_zeta(10)
    tensor([0.2857, 0.4286, 0.5714, 0.7143, 0.8571])
    """
    return (torch.arange(0, rotary_dim, 2, device=device).float() + 0.4 * rotary_dim) / (1.4 * rotary_dim)


class XPos(RotaryEmbedding):
    """Length-extrapolatable rotary embedding (xPos), for causal attention only.

    Args:
        head_dim: D (even).
        scale_base: B, the decay length scale (512 in the paper).
        rotary_dim, base, layout, max_len, angles, device: as :class:`RotaryEmbedding`; the
            layout defaults to ``"interleaved"`` as in the reference implementations. The rotation
            angles are exact (float64) by default, as RoPE's; the decay scales are float32.

    Shape:
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``; positions as :class:`RotaryEmbedding`.
        - output: ``(q, k)`` rotated and scaled, same shapes and dtypes.

    Example:
        >>> xpos = XPos(head_dim=8)
        >>> q, k = torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
        >>> q_rot, k_rot = xpos(q, k)
        >>> q_rot.shape
        torch.Size([1, 2, 6, 8])
        >>> xpos.check_attention(num_heads=2, head_dim=8, causal=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: XPos is causal only: its scale zeta^((n - m)/B) grows for keys after the query ...
    """

    name = "xpos"
    paper = "Sun et al. 2022 (xPos, A Length-Extrapolatable Transformer)"
    extrapolates = True
    zeta = Fp32Buffer()  # (D/2,), float32 whatever the model's dtype

    def __init__(
        self,
        head_dim: int,
        *,
        scale_base: int = 512,
        rotary_dim: int | None = None,
        base: float = 10000.0,
        layout: str = "interleaved",
        max_len: int | None = None,
        angles: str = "exact",
        device=None,
    ) -> None:
        self.scale_base = check_positive_int(scale_base, "scale_base")
        super().__init__(
            head_dim, rotary_dim=rotary_dim, base=base, layout=layout, max_len=max_len, angles=angles, device=device
        )
        self.zeta = xpos_zeta(self.rotary_dim, device=self.inv_freq.device)

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if self.zeta is not None:  # None while RotaryEmbedding.__init__ runs
            with torch.no_grad():
                self.zeta.copy_(xpos_zeta(self.rotary_dim, device=self.zeta.device))

    def scales(self, position_ids: Tensor, center: Tensor | int) -> Tensor:
        """``zeta^((position - center)/B)``, float32, shape ``(*position_ids.shape, rotary_dim / 2)``."""
        power = (position_ids.to(torch.float32) - center) / self.scale_base
        return self.zeta ** power[..., None]

    def _rotate_qk(
        self, q: Tensor, k: Tensor, position_ids: Tensor | None, k_position_ids: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        q_pos, k_pos = resolve_qk_positions(q, k, position_ids, k_position_ids)
        if position_ids is None and k_position_ids is None:
            center: Tensor | int = q.shape[-2] // 2  # arange(T): no reduction needed
        else:
            low, high = torch.minimum(q_pos.min(), k_pos.min()), torch.maximum(q_pos.max(), k_pos.max())
            center = torch.div(low + high + 1, 2, rounding_mode="floor")
        if position_ids is None and k_position_ids is None:
            q_cos, q_sin = self.default_cos_sin(q.shape[-2])  # the cache when there is one
        else:
            q_cos, q_sin = rope_cos_sin(q_pos, self.inv_freq, angles=self.angles)
        q_scale = self.scales(q_pos, center)
        k_cos, k_sin = (q_cos, q_sin) if k_pos is q_pos else rope_cos_sin(k_pos, self.inv_freq, angles=self.angles)
        k_scale = 1.0 / self.scales(k_pos, center)
        q_out = self._rotate_one(q, q_cos * q_scale, q_sin * q_scale)
        return q_out, self._rotate_one(k, k_cos * k_scale, k_sin * k_scale)

    def why_causal_only(self) -> str:
        return (
            "XPos is causal only: its scale zeta^((n - m)/B) grows for keys after the query (m > n); "
            "use causal=True or another rotary scheme (RotaryEmbedding)"
        )

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, scale_base={self.scale_base}"
