"""Multimodal RoPE (M-RoPE) of Qwen2-VL (Wang et al. 2024).

One head-wide RoPE (``base^(-2i / D)``, ``i < D / 2``) cut into three consecutive sections of
``mrope_section = (s_t, s_h, s_w)`` frequencies (``s_t + s_h + s_w = D / 2``; Qwen2-VL 7B:
``(16, 24, 24)`` of 64): the first section turns by the token's time coordinate, the second by
its row, the third by its column, in the ``"half"`` layout, as transformers'
``Qwen2VLRotaryEmbedding`` + ``apply_multimodal_rotary_pos_emb`` (with ``angles="fp32"``, bit
for bit). Text tokens sit at ``(p, p, p)``, so on text M-RoPE is plain RoPE.

Positions are ``(T, 3)`` or ``(B, T, 3)`` ``(t, h, w)`` coordinates, or a text sequence ``(T,)``;
:func:`posembed.schemes.mrope_positions.mrope_position_ids` builds them for interleaved text,
images and videos (transformers' ``get_rope_index`` gives the same, axis first: ``(3, B, T)``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed.schemes.axial_rope import SectionedRotary
from posembed.schemes.rotary import rope_inv_freq
from posembed.schemes.rotary_checks import check_base, check_head_dim

__all__ = ["MRoPE", "default_mrope_section", "mrope_frequencies"]


def default_mrope_section(head_dim: int) -> tuple[int, int, int]:
    """Qwen2-VL's split of the ``D / 2`` frequencies: 3/8 each to rows and columns, the rest to time.

    >>> default_mrope_section(128)
    (16, 24, 24)
    """
    half = head_dim // 2
    spatial = half * 3 // 8
    return half - 2 * spatial, spatial, spatial


def check_mrope_section(section: object, head_dim: int) -> tuple[int, int, int]:
    """``section`` as three non-negative ints that sum to ``head_dim / 2``."""
    values = tuple(section) if isinstance(section, (list, tuple)) else ()
    ints = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
    if len(values) != 3 or not ints or sum(values) != head_dim // 2:
        raise ValueError(
            f"mrope_section must be three non-negative ints (time, height, width) summing to head_dim / 2 = "
            f"{head_dim // 2}; got mrope_section={section!r}"
        )
    return values  # type: ignore[return-value]


def mrope_frequencies(head_dim: int, section: tuple[int, int, int], base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """``(inv_freq, axis_of)``: RoPE's ``D / 2`` frequencies; the first ``s_t`` follow time, then ``s_h``
    rows, then ``s_w`` columns.

    Built from Python ints, so it also runs under ``with torch.device("meta")`` (where a tensor
    ``repeat_interleave`` cannot know its output length).

    >>> mrope_frequencies(8, (2, 1, 1))[1]
    tensor([0, 0, 1, 2])
    """
    axis_of = torch.tensor([axis for axis, size in enumerate(section) for _ in range(size)], dtype=torch.long)
    return rope_inv_freq(head_dim, base), axis_of


class MRoPE(SectionedRotary):
    """Qwen2-VL's multimodal RoPE: sections of one RoPE follow time, height and width.

    Wang et al. 2024 (Qwen2-VL, arXiv:2409.12191), "M-RoPE".

    Args:
        head_dim: D, the per-head width of q and k (even).
        mrope_section: frequencies per axis ``(time, height, width)``, summing to ``D / 2``;
            ``None``: :func:`default_mrope_section` (Qwen2-VL's 1/4, 3/8, 3/8).
        base: the frequency base (``rope_theta``; Qwen2-VL: 1e6).
        layout: ``"half"`` (transformers' checkpoints) or ``"interleaved"``.
        angles: ``"exact"`` (float64 angles) or ``"fp32"`` (transformers' float32 product, bit for bit).
        device: device of the buffers.

    Shape:
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``.
        - position_ids: ``(Tq, 3)`` or ``(B, Tq, 3)`` ``(t, h, w)``; a text sequence ``(Tq,)``
          (and ``None = arange(Tq)``) puts position ``p`` at ``(p, p, p)``.
        - output: ``(q, k)`` rotated, same shapes and dtypes.

    Example:
        >>> from posembed.schemes.rotary import RotaryEmbedding
        >>> mrope, rope = MRoPE(head_dim=16), RotaryEmbedding(head_dim=16)
        >>> q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
        >>> all(torch.allclose(a, b) for a, b in zip(mrope(q, k), rope(q, k)))  # text only: plain RoPE
        True
    """

    name = "mrope"
    paper = "Wang et al. 2024 (Qwen2-VL)"
    extrapolates = False
    num_axes = 3

    def __init__(
        self,
        head_dim: int,
        *,
        mrope_section: tuple[int, int, int] | None = None,
        base: float = 10000.0,
        layout: str = "half",
        angles: str = "exact",
        device=None,
    ) -> None:
        self.head_dim = self.rotary_dim = check_head_dim(head_dim)
        section = default_mrope_section(head_dim) if mrope_section is None else mrope_section
        self.mrope_section = check_mrope_section(section, self.head_dim)
        self.base = check_base(base)
        super().__init__(layout=layout, angles=angles, device=device)

    def _frequencies(self) -> tuple[Tensor, Tensor]:
        return mrope_frequencies(self.head_dim, self.mrope_section, self.base)

    def extra_repr(self) -> str:
        angles = f", angles={self.angles!r}" if self.angles != "exact" else ""
        return (f"head_dim={self.head_dim}, mrope_section={self.mrope_section}, base={self.base:g}, "
                f"layout={self.layout!r}{angles}")
