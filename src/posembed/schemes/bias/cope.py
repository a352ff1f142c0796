"""CoPE: contextual position encoding (Golovneva, Wang, Weston & Sukhbaatar, 2024; arXiv 2405.18719).

Positions are counted by the content: a gate ``g_ij = sigmoid(q_i . k_j / sqrt(D))`` decides
whether key ``j`` counts for query ``i``, and the position of key ``j`` seen from ``i`` is

    p_ij = sum_{t=j..i} g_it        (causal),

a fractional number, clamped to ``npos_max - 1``; only real keys count (padding keys, given by
the attention layer's key padding mask, have no gate). Its embedding interpolates between learned
integer embeddings, ``e(p) = (ceil(p) - p) e[floor p] + (p - floor p) e[ceil p]``, and the bias
is ``q_i . e(p_ij)``, computed as an interpolation of the ``npos_max`` logits ``q_i . e[n]``.

The gate logits are scaled by ``1/sqrt(D)`` as in the paper's reference code (Appendix B), which
computes them from the already scaled attention logits; the bias itself is not rescaled.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_number, check_positive_int
from posembed.schemes.base import BiasScheme, ScoreMod
from posembed.schemes.bias.relative import check_qk

__all__ = ["CoPE", "contextual_positions", "interpolate_logits"]


def contextual_positions(gates: Tensor, visible: Tensor) -> Tensor:
    """``p_ij = sum_{t >= j, t visible from i} g_it``: a reverse cumulative sum along the keys.

    Shape:
        gates ``(B, H, Tq, Tk)``, visible ``(B|1, 1, Tq, Tk)`` (or any shape broadcasting to the
        gates') bool -> ``(B, H, Tq, Tk)``.

    >>> g = torch.tensor([[0.5, 0.0, 0.0], [0.5, 1.0, 0.0], [1.0, 0.25, 0.5]])
    >>> contextual_positions(g, torch.ones(3, 3, dtype=torch.bool).tril())
    tensor([[0.5000, 0.0000, 0.0000],
            [1.5000, 1.0000, 0.0000],
            [1.7500, 0.7500, 0.5000]])
    """
    gates = torch.where(visible, gates, torch.zeros_like(gates))
    return gates.flip(-1).cumsum(-1).flip(-1)


def interpolate_logits(position_logits: Tensor, positions: Tensor) -> Tensor:
    """``(1 - w) L[floor p] + w L[ceil p]`` with ``w = p - floor p``, for logits ``L`` of integer positions.

    Shape:
        position_logits ``(B, H, Tq, P)``, positions ``(B, H, Tq, Tk)`` in ``[0, P - 1]`` -> ``(B, H, Tq, Tk)``.

    >>> interpolate_logits(torch.tensor([[[[0.0, 10.0, 30.0]]]]), torch.tensor([[[[0.0, 0.5, 1.25, 2.0]]]]))
    tensor([[[[ 0.,  5., 15., 30.]]]])
    """
    floor = positions.floor()
    weight = positions - floor
    low = torch.gather(position_logits, -1, floor.long())
    high = torch.gather(position_logits, -1, positions.ceil().long())
    return low * (1 - weight) + high * weight


class CoPE(BiasScheme):
    """Contextual position encoding: the bias ``q_i . e(p_ij)`` at gate-counted positions ``p_ij``.

    Owns the ``(npos_max, D)`` table ``pos_emb`` of integer position embeddings, shared by the
    heads (as in the paper); it starts at zero (the paper's init), so a fresh CoPE adds nothing
    until trained; ``init_std > 0`` starts it normal instead. Equals x-transformers' ``CoPE``
    (``soft_onehot=False``, no talking heads) given the same table and gate logits.

    Causal: key ``t`` counts for query ``i`` when ``k_pos_t <= q_pos_i`` (so KV-cache and chunked
    calls agree with the full one) and ``t`` is a real token; keys are taken in their order along
    the key axis. Keys after the query get ``p = 0``; causal attention masks them.
    :meth:`check_attention` refuses bidirectional layers. Padding: the scheme declares
    ``needs_key_mask``, so :class:`~posembed.nn.attention.layer.SelfAttention` hands it the key padding
    mask and padding keys never count, wherever they sit and whatever positions they are given
    (left- or right-padded rows give, at their real tokens, the outputs of the unpadded rows).

    Backends: eager, SDPA and chunked (materialised bias). ``p_ij`` is a ``Tq x Tk`` cumulative
    sum, so there is no FlexAttention view: :meth:`score_mod` raises; ``backend="fused"`` does
    not apply (it reads q/k) and falls back to chunked.

    Args:
        num_heads: number of attention heads H (checked against q).
        head_dim: width D of the queries, keys and position embeddings.
        npos_max: number of integer positions; ``p`` is clamped to ``npos_max - 1``.
        init_std: std of the normal init of ``pos_emb`` (0: zeros).

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``; integers.
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``: required.
        - key_mask: ``(B, Tk)`` bool, True for real keys; ``None``: every key is real.
        - bias output: ``(B, H, Tq, Tk)`` in ``q.dtype``.

    Example:
        >>> cope = CoPE(num_heads=2, head_dim=4, npos_max=8, init_std=1.0)
        >>> q, k = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
        >>> cope.bias(torch.arange(5), torch.arange(5), q, k).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "cope"
    paper = "Golovneva et al. 2024 (CoPE, arXiv 2405.18719)"
    extrapolates = False
    needs_qk = True
    built_for = ("num_heads", "head_dim")
    head_dim: int
    needs_key_mask = True
    has_score_mod = False

    def __init__(
        self, num_heads: int, head_dim: int, *, npos_max: int, init_std: float = 0.0, device=None, dtype=None
    ) -> None:
        super().__init__(num_heads, head_dim)
        self.npos_max = check_positive_int(npos_max, "npos_max")
        self.init_std = check_number(init_std, "init_std", 0.0)
        self.pos_emb = nn.Parameter(torch.empty(npos_max, head_dim, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.init_std > 0.0:
            nn.init.normal_(self.pos_emb, std=self.init_std)
        else:
            nn.init.zeros_(self.pos_emb)

    def why_causal_only(self) -> str:
        return (
            "CoPE counts the gates of the keys between key j and query i (p_ij = sum_{t=j..i} g_it), "
            "the causal form; it cannot serve bidirectional attention (causal=False)"
        )

    def _check_inputs(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None, k: Tensor | None, key_mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """``(q, k)``, checked with the positions and ``key_mask``."""
        q, k = check_qk("CoPE", self.num_heads, self.head_dim, q_positions, k_positions, q, k)
        self._check_key_mask(key_mask, k)
        return q, k

    def _check_key_mask(self, key_mask: Tensor | None, k: Tensor) -> None:
        if key_mask is None:
            return
        if not isinstance(key_mask, Tensor) or key_mask.dtype != torch.bool:
            got = key_mask.dtype if isinstance(key_mask, Tensor) else type(key_mask).__name__
            raise TypeError(f"CoPE key_mask must be a bool tensor (True for real keys), got {got}")
        if key_mask.dim() != 2 or key_mask.shape[-1] != k.shape[2] or key_mask.shape[0] not in (1, k.shape[0]):
            raise ValueError(
                f"CoPE key_mask has shape {tuple(key_mask.shape)}; expected (B, Tk) = ({k.shape[0]}, {k.shape[2]})"
            )

    def positions(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor, k: Tensor, *, key_mask: Tensor | None = None
    ) -> Tensor:
        """The contextual positions ``p_ij``, clamped to ``npos_max - 1``: ``(B, H, Tq, Tk)``.

        Only real keys (``key_mask`` True, ``(B, Tk)``) at or before the query count.
        """
        q, k = self._check_inputs(q_positions, k_positions, q, k, key_mask)
        return self._positions(q_positions, k_positions, q, k, key_mask)

    def _positions(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor, k: Tensor, key_mask: Tensor | None
    ) -> Tensor:
        """:meth:`positions` of inputs already checked."""
        gates = torch.sigmoid(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim))  # (B, H, Tq, Tk)
        visible = (k_positions.unsqueeze(-2) <= q_positions.unsqueeze(-1)).unsqueeze(-3)  # (B|1, 1, Tq, Tk)
        if key_mask is not None:
            visible = visible & key_mask[:, None, None, :]  # (B, 1, Tq, Tk): padding keys never count
        return contextual_positions(gates, visible).clamp(max=self.npos_max - 1)

    def bias(
        self,
        q_positions: Tensor,
        k_positions: Tensor,
        q: Tensor | None = None,
        k: Tensor | None = None,
        *,
        key_mask: Tensor | None = None,
    ) -> Tensor:
        q, k = self._check_inputs(q_positions, k_positions, q, k, key_mask)
        positions = self._positions(q_positions, k_positions, q, k, key_mask)
        position_logits = torch.matmul(q, self.pos_emb.to(q.dtype).t())  # (B, H, Tq, npos_max)
        return interpolate_logits(position_logits, positions)

    def score_mod(
        self,
        q_positions: Tensor,
        k_positions: Tensor,
        q: Tensor | None = None,
        k: Tensor | None = None,
        *,
        key_mask: Tensor | None = None,
    ) -> ScoreMod:
        raise NotImplementedError(
            "CoPE has no FlexAttention score_mod: its positions p_ij are a Tq x Tk cumulative sum of "
            "gates; use backend 'sdpa', 'eager' or 'chunked' (which materialise the bias)"
        )

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, npos_max={self.npos_max}"
