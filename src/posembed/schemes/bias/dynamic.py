"""Dynamic position bias: an MLP of the (log-)distance, one output per head.

CrossFormer (Wang et al., ICLR 2022) computes its "dynamic position bias" with a small MLP of
the relative coordinates instead of a table; Swin Transformer V2 (Liu et al., CVPR 2022) feeds
the MLP log-spaced coordinates ``sign(d) * log(1 + |d|)`` so that it extrapolates to larger
windows. Here on sequences, as x-transformers' ``DynamicPositionBias``:

    b(h, i, j) = MLP(d)[h],   d = i - j   (or sign(i - j) * log(1 + |i - j|)).

The MLP is evaluated once per distinct distance and the bias gathered from that table.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_positive_int, values_readable
from posembed.schemes.base import BiasScheme, ScoreMod
from posembed.schemes.bias.relative import check_positions, relative_position_fn, relative_positions

__all__ = ["DynamicPositionBias", "log_distance"]


def log_distance(distance: Tensor) -> Tensor:
    """Swin-V2's log-spaced coordinate ``sign(d) * log(1 + |d|)``.

    >>> log_distance(torch.tensor([-3.0, 0.0, 1.0]))
    tensor([-1.3863,  0.0000,  0.6931])
    """
    return torch.sign(distance) * torch.log1p(distance.abs())


class DynamicPositionBias(BiasScheme):
    """A learned continuous function of the distance ``i - j`` (query minus key), per head.

    The MLP: ``Linear(1, hidden) [-> LayerNorm] -> SiLU``, then ``depth - 1`` blocks
    ``Linear(hidden, hidden) [-> LayerNorm] -> SiLU``, then ``Linear(hidden, H)``; the layout of
    x-transformers' ``DynamicPositionBias(dim=hidden, heads, depth, log_distance, norm)``, whose
    bias it equals given the same weights (its first LayerNorm has no bias: set ours to zero).

    Distances are integers; :meth:`bias` evaluates the MLP on the range of distances present
    (``Tq + Tk - 1`` values for contiguous positions) and gathers (one host sync to find the
    range; while compiling, it evaluates the MLP on every pair instead); :meth:`score_mod`
    captures the same ``(H, R)`` table. Serves causal and
    bidirectional attention. Swin-V2 reports log-spaced inputs transferring to larger windows;
    no sequence extrapolation result is claimed here: ``extrapolates = False``.

    Args:
        num_heads: number of attention heads H (the MLP's outputs).
        hidden: width of the MLP.
        depth: number of hidden blocks (``>= 1``).
        log_distances: feed ``sign(d) log(1 + |d|)`` instead of ``d``.
        norm: LayerNorm after each hidden linear layer.

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``; integers.
        - bias output: ``(H, Tq, Tk)`` or ``(B, H, Tq, Tk)``; ``q.dtype`` when given, else the
          parameters' dtype promoted to at least float32.

    Example:
        >>> dpb = DynamicPositionBias(num_heads=2, hidden=8, depth=2, log_distances=True)
        >>> dpb.bias(torch.arange(4), torch.arange(4)).shape
        torch.Size([2, 4, 4])
    """

    name = "dynamic_bias"
    paper = "Wang et al. 2022 (CrossFormer, ICLR); Liu et al. 2022 (Swin V2, CVPR)"
    extrapolates = False

    def __init__(
        self,
        num_heads: int,
        *,
        hidden: int = 32,
        depth: int = 2,
        log_distances: bool = False,
        norm: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_heads)
        self.hidden = check_positive_int(hidden, "hidden")
        self.depth = check_positive_int(depth, "depth")
        for flag, value in (("log_distances", log_distances), ("norm", norm)):
            if not isinstance(value, bool):
                raise TypeError(f"{flag} must be a bool, got {value!r}")
        self.log_distances, self.norm = log_distances, norm
        factory = {"device": device, "dtype": dtype}
        layers: list[nn.Module] = []
        for index in range(depth):
            layers.append(nn.Linear(1 if index == 0 else hidden, hidden, **factory))
            if norm:
                layers.append(nn.LayerNorm(hidden, **factory))
            layers.append(nn.SiLU())
        layers.append(nn.Linear(hidden, num_heads, **factory))
        self.mlp = nn.Sequential(*layers)

    def reset_parameters(self) -> None:
        for layer in self.mlp:
            if isinstance(layer, (nn.Linear, nn.LayerNorm)):
                layer.reset_parameters()

    @property
    def _first_weight(self) -> Tensor:
        """The first layer's weight: the MLP's dtype and device (``nn.Sequential`` items are typed ``Module``)."""
        return cast(nn.Linear, self.mlp[0]).weight

    def table(self, distances: Tensor) -> Tensor:
        """The MLP on integer distances ``i - j``: ``(R,)`` -> ``(H, R)``."""
        weight = self._first_weight
        x = distances.to(weight.dtype)
        if self.log_distances:
            x = log_distance(x)
        values = self.mlp(x.unsqueeze(-1))  # (R, H)
        return values.to(torch.promote_types(weight.dtype, torch.float32)).transpose(0, 1)

    def _distance_range(self, q_positions: Tensor, k_positions: Tensor) -> tuple[int, Tensor]:
        """``lo`` and the table of distances ``lo..hi`` (``i - j``) present between the positions."""
        # one read back to the host (the table's size depends on these values), not two
        lo, hi = torch.stack([q_positions.min() - k_positions.max(), q_positions.max() - k_positions.min()]).tolist()
        distances = torch.arange(lo, hi + 1, device=self._first_weight.device)
        return lo, self.table(distances)  # (H, hi - lo + 1)

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        check_positions(q_positions, k_positions)
        distance = -relative_positions(q_positions, k_positions)  # i - j, (..., Tq, Tk)
        if values_readable(q_positions) and values_readable(k_positions):
            lo, table = self._distance_range(q_positions, k_positions)
            bias = table[:, distance - lo]  # (H, ..., Tq, Tk)
        else:  # compiling: no host sync, the MLP on every pair
            bias = self.table(distance.flatten()).unflatten(1, distance.shape)  # (H, ..., Tq, Tk)
        if bias.dim() == 4:
            bias = bias.transpose(0, 1)  # (B, H, Tq, Tk)
        return bias.to(q.dtype) if q is not None else bias

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        check_positions(q_positions, k_positions)
        lo, table = self._distance_range(q_positions, k_positions)
        relative = relative_position_fn(q_positions, k_positions)

        def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score + table[h, -relative(b, q_idx, kv_idx) - lo].to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, hidden={self.hidden}, depth={self.depth}, "
            f"log_distances={self.log_distances}, norm={self.norm}"
        )
