"""Shaw-style relative position embeddings: the two forms BERT offered.

- ``relative_key`` (Shaw, Uszkoreit & Vaswani, NAACL 2018): ``s_ij += q_i · r_(i-j)``;
- ``relative_key_query`` (Huang et al., Findings of EMNLP 2020): ``s_ij += q_i · r_(i-j) + k_j · r_(i-j)``;

with ``r`` a learned table of vectors indexed by the clipped distance ``i - j`` and the sum
divided by ``sqrt(D)`` together with ``q·k`` (transformers 4.x ``position_embedding_type``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_positive_int
from posembed.schemes.base import BiasScheme, ScoreMod
from posembed.schemes.bias.relative import check_qk, relative_position_fn, relative_positions

__all__ = ["ShawRelative", "distance_index", "distance_logits", "MODES"]

#: the two forms, by their transformers 4.x ``position_embedding_type`` names
MODES = ("relative_key", "relative_key_query")


def distance_index(relative: Tensor, max_distance: int) -> Tensor:
    """Row of the distance table for each ``k_pos - q_pos``: ``clip(i - j, -R, R) + R``.

    >>> distance_index(torch.tensor([-5, -1, 0, 1, 5]), 2)
    tensor([4, 3, 2, 1, 0])
    """
    return (-relative).clamp(-max_distance, max_distance) + max_distance


def distance_logits(x: Tensor, table: Tensor) -> Tensor:
    """``x · r_d`` for every vector of ``x`` and every table row ``d``, in ``x.dtype``.

    Shape:
        x ``(B, H, T, D)``, table ``(2R + 1, D)`` -> ``(B, H, T, 2R + 1)``.
    """
    return torch.einsum("bhtd,rd->bhtr", x, table.to(x.dtype))


class ShawRelative(BiasScheme):
    """Learned relative position vectors read by the queries (and keys): ``relative_key(_query)``.

    ``b(h, i, j) = (q_i · r_d [+ k_j · r_d]) / sqrt(D)`` with ``d = clip(i - j, -R, R)`` and
    ``r`` a ``(2R + 1, D)`` table shared by the heads (``distance_embedding``, row ``d + R``).
    Clipping (Shaw et al.'s ``k``) means any length works: distances beyond ``R`` share the end
    rows. A transformers 4.x BERT table of ``2 * max_position_embeddings - 1`` rows is this
    table with ``R = max_position_embeddings - 1``, copied row for row (HF indexes
    ``(i - j) + max - 1``; it has no clipping and fails on longer inputs, here they clip at ``max - 1``).

    The bias depends on ``q`` and ``k`` (``needs_qk``), so it is always ``(B, H, Tq, Tk)``.
    :meth:`score_mod` precomputes ``q · r`` (and ``k · r``) for the ``2R + 1`` distances,
    ``(B, H, T, 2R + 1)``, and indexes them: memory ``O(T * R)``, no ``T x T`` tensor.
    No published result shows it beyond the training length: ``extrapolates = False``.

    Args:
        num_heads: number of attention heads H (checked against q).
        head_dim: width D of each head (and of each table row).
        max_distance: clipping distance R (> 0); the table has ``2R + 1`` rows.
        mode: ``"relative_key"`` or ``"relative_key_query"``.
        init_std: std of the normal init (BERT's ``initializer_range``).

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``; integers.
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``: required.
        - bias output: ``(B, H, Tq, Tk)`` in ``q.dtype``, already divided by ``sqrt(D)``.

    Example:
        >>> shaw = ShawRelative(num_heads=2, head_dim=4, max_distance=3, mode="relative_key_query")
        >>> q, k = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
        >>> shaw.bias(torch.arange(5), torch.arange(5), q, k).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "shaw"
    paper = "Shaw et al. 2018 (NAACL); Huang et al. 2020 (relative_key_query)"
    extrapolates = False
    needs_qk = True
    built_for = ("num_heads", "head_dim")
    head_dim: int

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        *,
        max_distance: int,
        mode: str = "relative_key",
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_heads, head_dim)
        self.max_distance = check_positive_int(max_distance, "max_distance")
        if mode not in MODES:
            raise ValueError(f"unknown Shaw mode {mode!r}; choose one of {', '.join(MODES)}")
        self.mode = mode
        self.init_std = init_std
        self.distance_embedding = nn.Embedding(2 * max_distance + 1, head_dim, device=device, dtype=dtype)
        self.reset_parameters()

    @property
    def weight(self) -> Tensor:
        """The ``(2R + 1, D)`` table; row ``d + R`` holds ``r_d`` for ``d = i - j``."""
        return self.distance_embedding.weight

    def reset_parameters(self) -> None:
        nn.init.normal_(self.distance_embedding.weight, std=self.init_std)

    def _check_qk(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None, k: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        return check_qk("ShawRelative", self.num_heads, self.head_dim, q_positions, k_positions, q, k)

    def _distance_logits(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor | None]:
        """``q · r / sqrt(D)`` and (relative_key_query) ``k · r / sqrt(D)``: ``(B, H, T, 2R + 1)`` each."""
        scale = 1.0 / math.sqrt(self.head_dim)
        q_logits = distance_logits(q, self.weight) * scale
        k_logits = distance_logits(k, self.weight) * scale if self.mode == "relative_key_query" else None
        return q_logits, k_logits

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        q, k = self._check_qk(q_positions, k_positions, q, k)
        q_logits, k_logits = self._distance_logits(q, k)
        batch, heads, q_len, _ = q_logits.shape
        rows = distance_index(relative_positions(q_positions, k_positions), self.max_distance)  # (..., Tq, Tk)
        rows = rows.unsqueeze(-3).expand(batch, heads, q_len, rows.shape[-1])  # (B, H, Tq, Tk)
        bias = torch.gather(q_logits, -1, rows)  # q_i · r_d[i, j]
        if k_logits is not None:
            bias = bias + torch.gather(k_logits.transpose(-1, -2), -2, rows)  # k_j · r_d[i, j]
        return bias

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        q, k = self._check_qk(q_positions, k_positions, q, k)
        q_logits, k_logits = self._distance_logits(q, k)
        relative = relative_position_fn(q_positions, k_positions)
        reach = self.max_distance

        if k_logits is None:

            def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
                row = distance_index(relative(b, q_idx, kv_idx), reach)
                return score + q_logits[b, h, q_idx, row].to(score.dtype)

        else:

            def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
                row = distance_index(relative(b, q_idx, kv_idx), reach)
                return score + (q_logits[b, h, q_idx, row] + k_logits[b, h, kv_idx, row]).to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, head_dim={self.head_dim}, max_distance={self.max_distance}, "
            f"mode={self.mode!r}"
        )
