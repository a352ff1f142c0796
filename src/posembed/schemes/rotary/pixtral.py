"""Pixtral's 2-D rotary embedding of image patches (Mistral AI 2024, Pixtral 12B).

One head-wide RoPE (``base^(-2i / D)``, ``i < D / 2``) whose frequencies are dealt to the two
axes: the even-indexed ones follow the patch row ``h``, the odd-indexed ones the column ``w``.
The pairs are laid out ``[h frequencies, w frequencies]`` in the ``"half"`` layout, as
transformers' ``PixtralVisionRotaryEmbedding`` (5.x) does: with ``angles="fp32"`` the rotated
queries and keys equal transformers' ``apply_rotary_pos_emb`` with its cos/sin.

Positions are patch coordinates ``(T, 2)`` = ``(row, column)`` (transformers stacks
``meshgrid(arange(H'), arange(W'))`` per image, see :func:`patch_coordinates`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed._utils.checks import check_positive_int
from posembed.schemes.rotary.axial import SectionedRotary
from posembed.schemes.rotary.checks import check_base, check_head_dim
from posembed.schemes.rotary.rope import rope_inv_freq

__all__ = ["PixtralRotary", "pixtral_frequencies", "patch_coordinates"]


def pixtral_frequencies(head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """``(inv_freq, axis_of)``: RoPE's ``D / 2`` frequencies, the even ones (rows) first, then the odd ones (columns).

    >>> pixtral_frequencies(8, base=10000.0)
    (tensor([1.0000, 0.0100, 0.1000, 0.0010]), tensor([0, 0, 1, 1]))
    """
    inv_freq = rope_inv_freq(head_dim, base)
    rows, columns = inv_freq[0::2], inv_freq[1::2]
    axis_of = torch.cat([torch.zeros(rows.numel(), dtype=torch.long), torch.ones(columns.numel(), dtype=torch.long)])
    return torch.cat([rows, columns]), axis_of


def patch_coordinates(grids: list[tuple[int, int]], device=None) -> Tensor:
    """``(row, column)`` of every patch of images cut into ``grids`` ``[(H', W'), ...]``, row-major, concatenated.

    Shape: ``(sum H' W', 2)``, long.

    >>> patch_coordinates([(1, 2), (2, 1)]).tolist()
    [[0, 0], [0, 1], [0, 0], [1, 0]]
    """
    parts = []
    for height, width in grids:
        rows, columns = torch.meshgrid(
            torch.arange(check_positive_int(height, "height"), device=device),
            torch.arange(check_positive_int(width, "width"), device=device),
            indexing="ij",
        )
        parts.append(torch.stack([rows.flatten(), columns.flatten()], dim=-1))  # (H' W', 2)
    return torch.cat(parts) if parts else torch.empty(0, 2, dtype=torch.long, device=device)


class PixtralRotary(SectionedRotary):
    """Pixtral's 2-D RoPE: row and column of each patch share one head-wide set of frequencies.

    Mistral AI 2024 (Pixtral 12B, arXiv:2410.07073): "RoPE-2D", the even frequencies of a
    ``D``-wide RoPE rotate by the patch row, the odd ones by the column; every channel rotates.

    Args:
        head_dim: D, the per-head width of q and k (even).
        base: the frequency base (``rope_theta``; Pixtral 12B: 10000).
        layout: ``"half"`` (transformers' checkpoints) or ``"interleaved"``.
        angles: ``"exact"`` (float64 angles) or ``"fp32"`` (transformers' float32 product, bit for bit).
        device: device of the buffers.

    Shape:
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``.
        - position_ids: ``(Tq, 2)`` or ``(B, Tq, 2)`` patch ``(row, column)``; a sequence ``(Tq,)``
          (and ``None = arange(Tq)``) puts position ``p`` at ``(p, p)``.
        - output: ``(q, k)`` rotated, same shapes and dtypes.

    Example:
        >>> rope = PixtralRotary(head_dim=8)
        >>> patches = patch_coordinates([(2, 3)])  # one image of 2 x 3 patches
        >>> q = torch.randn(1, 2, 6, 8)
        >>> q_rot, _ = rope(q, q, patches)
        >>> bool(torch.equal(q_rot[..., 0, :], q[..., 0, :]))  # patch (0, 0) is not turned
        True
    """

    name = "rope_pixtral"
    paper = "Mistral AI 2024 (Pixtral 12B)"
    extrapolates = False
    num_axes = 2

    def __init__(
        self, head_dim: int, *, base: float = 10000.0, layout: str = "half", angles: str = "exact", device=None
    ) -> None:
        self.head_dim = self.rotary_dim = check_head_dim(head_dim)
        self.base = check_base(base)
        super().__init__(layout=layout, angles=angles, device=device)

    def _frequencies(self) -> tuple[Tensor, Tensor]:
        return pixtral_frequencies(self.head_dim, self.base)

    def extra_repr(self) -> str:
        angles = f", angles={self.angles!r}" if self.angles != "exact" else ""
        return f"head_dim={self.head_dim}, base={self.base:g}, layout={self.layout!r}{angles}"
