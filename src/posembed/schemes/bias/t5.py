"""T5 relative position bias: bucketed distances, one learned scalar per (bucket, head).

Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
Transformer", JMLR 2020 (the bucketing comes from Mesh TensorFlow).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_positive_int
from posembed.schemes.base import BiasScheme, ScoreMod
from posembed.schemes.bias.relative import check_positions, relative_position_fn, relative_positions

__all__ = ["T5RelativeBias", "relative_position_bucket"]


def relative_position_bucket(
    relative_position: Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int
) -> Tensor:
    """Bucket of each relative position ``k_pos - q_pos``, as T5 does it.

    Bidirectional: half the buckets per sign (keys after the query take the upper half).
    Causal: positive (future) distances all fall in bucket 0. Within a half, distances below
    ``max_exact = half // 2`` get a bucket each; larger ones share logarithmically wider
    buckets up to ``max_distance``, beyond which everything lands in the last bucket.

    Shape:
        any shape of integers -> same shape, long, values in ``[0, num_buckets)``.

    >>> relative_position_bucket(torch.tensor([-200, -9, -1, 0, 1, 9, 200]), bidirectional=True,
    ...                          num_buckets=32, max_distance=128)
    tensor([15,  8,  1,  0, 17, 24, 31])
    """
    relative_position = relative_position.long()
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    # log of 0 is -inf for the exact distances; torch.where discards those entries
    log_ratio = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(distance < max_exact, distance, large)


def _check_bucket_config(num_buckets: int, max_distance: int, bidirectional: bool) -> None:
    if not isinstance(bidirectional, bool):
        raise TypeError(f"bidirectional must be a bool, got {bidirectional!r}")
    check_positive_int(num_buckets, "num_buckets")
    check_positive_int(max_distance, "max_distance")
    if bidirectional and (num_buckets < 4 or num_buckets % 2):
        raise ValueError(
            f"num_buckets={num_buckets}: a bidirectional T5 bias splits the buckets in two halves with "
            f"at least 2 each, so num_buckets must be even and >= 4"
        )
    if num_buckets < 2:
        raise ValueError(f"num_buckets={num_buckets}: a causal T5 bias needs num_buckets >= 2")
    max_exact = num_buckets // (4 if bidirectional else 2)
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance={max_distance} must exceed the {max_exact} exact buckets "
            f"(num_buckets={num_buckets}, bidirectional={bidirectional})"
        )


class T5RelativeBias(BiasScheme):
    """T5's bucketed relative position bias, added to the attention logits.

    ``b(h, i, j) = W[bucket(j - i), h]`` with ``W`` an ``nn.Embedding(num_buckets, H)`` (the
    Hugging Face name ``relative_attention_bias`` is kept, so T5 weights copy over as is).
    Buckets equal transformers' ``T5Attention._relative_position_bucket``; the bias equals
    ``T5Attention.compute_bias`` (encoder: ``bidirectional=True``, decoder: ``False``).

    T5 itself does not divide ``q·k`` by ``sqrt(D)`` (it folds that into its init); here the
    bias is added to whatever logits the attention layer computes, so a T5 table gives the
    same bias, while the q·k scaling is the attention layer's business.

    x-transformers' ``RelativePositionBias(scale, causal, num_buckets, max_distance, heads)``
    has identical buckets (its ``causal`` is ``not bidirectional``) but multiplies the looked-up
    values by ``scale`` (``dim_head ** 0.5`` in its ``TransformerWrapper``): its bias equals
    this one with ``W = scale * W_xt``. Its default init is ``N(0, 1)``; here ``N(0, init_std)``.

    In the ALiBi paper the T5 bias also extrapolates (WikiText-103 PPL 19.65 at 512 -> 20.41
    at 2512), so ``extrapolates = True``; its cost is a ``T x T`` bucket lookup.

    Args:
        num_heads: number of attention heads H.
        num_buckets: number of buckets (T5: 32); even and >= 4 when bidirectional.
        max_distance: distances at or beyond it share the last bucket (T5: 128).
        bidirectional: encoder-style (``True``) or causal decoder-style buckets; the causal form
            refuses bidirectional attention (:meth:`check_attention`).
        init_std: std of the normal init of the table.

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``; integers.
        - bias output: ``(H, Tq, Tk)``, or ``(B, H, Tq, Tk)`` for 2-D positions.

    Example:
        >>> t5 = T5RelativeBias(num_heads=4, num_buckets=8, max_distance=16)
        >>> t5.bias(torch.arange(5), torch.arange(5)).shape
        torch.Size([4, 5, 5])
        >>> t5.buckets(torch.arange(5), torch.arange(5))[0]
        tensor([0, 5, 6, 6, 6])
    """

    name = "t5_bias"
    paper = "Raffel et al. 2020 (T5, JMLR)"
    extrapolates = True

    def __init__(
        self,
        num_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_heads)
        _check_bucket_config(num_buckets, max_distance, bidirectional)
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.init_std = init_std
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads, device=device, dtype=dtype)
        self.reset_parameters()

    @property
    def weight(self) -> Tensor:
        """The ``(num_buckets, H)`` table."""
        return self.relative_attention_bias.weight

    def reset_parameters(self) -> None:
        nn.init.normal_(self.relative_attention_bias.weight, std=self.init_std)

    def why_causal_only(self) -> str | None:
        return (
            None
            if self.bidirectional
            else (
                "T5RelativeBias(bidirectional=False) is the causal (decoder) form: every key after the "
                "query falls in bucket 0, so it cannot tell future distances apart; bidirectional "
                "attention (causal=False) needs T5RelativeBias(num_heads, bidirectional=True)"
            )
        )

    def buckets(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Bucket index of every (query, key) pair: ``(Tq, Tk)`` or ``(B, Tq, Tk)`` long."""
        check_positions(q_positions, k_positions)
        return self._bucket(relative_positions(q_positions, k_positions))

    def _bucket(self, relative: Tensor) -> Tensor:
        return relative_position_bucket(
            relative, bidirectional=self.bidirectional, num_buckets=self.num_buckets, max_distance=self.max_distance
        )

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        values = self.relative_attention_bias(self.buckets(q_positions, k_positions))  # (..., Tq, Tk, H)
        bias = values.movedim(-1, -3)  # (..., H, Tq, Tk)
        return bias.to(q.dtype if q is not None else torch.float32)

    def distance_table(self) -> Tensor:
        """Bias of every distance ``d`` in ``[-max_distance, max_distance]``: ``(2 * max_distance + 1, H)``.

        Row ``d + max_distance``; all farther distances share the end rows' buckets.
        """
        distances = torch.arange(-self.max_distance, self.max_distance + 1, device=self.weight.device)
        return self.relative_attention_bias(self._bucket(distances))  # (2M+1, H)

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        """Look the bias up in :meth:`distance_table` (``O(max_distance * H)``, no ``T x T`` tensor)."""
        check_positions(q_positions, k_positions)
        relative = relative_position_fn(q_positions, k_positions)
        table = self.distance_table().float()
        reach = self.max_distance

        def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            row = relative(b, q_idx, kv_idx).clamp(-reach, reach) + reach
            return score + table[row, h].to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, bidirectional={self.bidirectional}"
        )
