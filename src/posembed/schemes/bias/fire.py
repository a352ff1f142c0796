"""FIRE: functional interpolation for relative positions (Li et al., ICLR 2024; arXiv 2310.04418).

A small MLP ``f_theta: R -> R^H`` reads the *progressively interpolated* distance

    b(h, i, j) = f_theta( psi(i - j) / psi(max(L, i)) )[h],   psi(x) = log(c x + 1),

where ``i`` is the query's position, ``c > 0`` and the threshold ``L > 0`` are learned.
Dividing by ``psi(i)`` maps every distance into ``[0, 1]`` whatever the query's position, which
is what lets FIRE extrapolate; ``L`` keeps the normalisation fixed for short prefixes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from posembed._utils.checks import check_number, check_positive_int
from posembed.schemes.base import BiasScheme, ScoreMod, as_float_positions
from posembed.schemes.bias.relative import check_positions, relative_position_fn, relative_positions

__all__ = ["FIRE", "fire_inputs", "FIRE_EPS"]

#: floor of the learned ``c`` and ``L`` (kept positive by clamping)
FIRE_EPS = 1e-4


def fire_inputs(distance: Tensor, query_position: Tensor, c: Tensor, threshold: Tensor) -> Tensor:
    """``psi(i - j) / psi(max(L, i))`` with ``psi(x) = log(c x + 1)``: the MLP's input.

    ``distance = i - j`` is clamped at 0 (keys after the query are masked by causal attention).

    Shape:
        distance and query_position broadcast together (``(..., Tq, Tk)`` and ``(..., Tq, 1)``).

    >>> fire_inputs(torch.tensor([0.0, 1.0, 2.0]), torch.tensor(2.0), torch.tensor(1.0), torch.tensor(1.0))
    tensor([0.0000, 0.6309, 1.0000])
    """
    numerator = torch.log1p(c * distance.clamp(min=0.0))
    denominator = torch.log1p(c * torch.maximum(query_position, threshold))
    return numerator / denominator


class FIRE(BiasScheme):
    """FIRE's learned function of the normalised distance, one output per head (causal).

    ``f_theta`` is ``Linear(1, hidden) -> ReLU -> Linear(hidden, H)`` (the paper's MLP with one
    hidden layer, 32 units). ``c`` starts at 1 and ``L`` at ``threshold``; both are clamped to
    ``>= FIRE_EPS`` in the forward. Positions are computed in float32 and promoted to the
    parameters' dtype (float64 parameters give a float64 bias, for gradcheck).

    FIRE is defined for causal attention (``i - j >= 0``); :meth:`check_attention` refuses
    bidirectional layers. The paper shows it extrapolating: ``extrapolates = True``.

    Args:
        num_heads: number of attention heads H (the MLP's outputs).
        hidden: width of the MLP's hidden layer.
        threshold: initial value of the learned ``L``.
        init_c: initial value of the learned ``c``.

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``.
        - bias output: ``(H, Tq, Tk)`` or ``(B, H, Tq, Tk)``; ``q.dtype`` when ``q`` is given.

    Example:
        >>> fire = FIRE(num_heads=2, hidden=4, threshold=4.0)
        >>> fire.bias(torch.arange(5), torch.arange(5)).shape
        torch.Size([2, 5, 5])
    """

    name = "fire"
    paper = "Li et al. 2024 (FIRE, ICLR)"
    extrapolates = True

    def __init__(
        self,
        num_heads: int,
        *,
        hidden: int = 32,
        threshold: float = 512.0,
        init_c: float = 1.0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_heads)
        self.hidden = check_positive_int(hidden, "hidden")
        self.init_threshold = check_number(threshold, "threshold", FIRE_EPS)
        self.init_c = check_number(init_c, "init_c", FIRE_EPS)
        factory = {"device": device, "dtype": dtype}
        self.mlp_in = nn.Linear(1, hidden, **factory)
        self.mlp_out = nn.Linear(hidden, num_heads, **factory)
        self.c = nn.Parameter(torch.empty((), **factory))
        self.threshold = nn.Parameter(torch.empty((), **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.mlp_in.reset_parameters()
        self.mlp_out.reset_parameters()
        with torch.no_grad():
            self.c.fill_(self.init_c)
            self.threshold.fill_(self.init_threshold)

    def why_causal_only(self) -> str:
        return (
            "FIRE normalises i - j by psi(max(L, i)), the causal form (keys j <= i); it cannot serve "
            "bidirectional attention (causal=False): use Kerple, Sandwich or DynamicPositionBias there"
        )

    def _constants(self) -> tuple[Tensor, Tensor, torch.dtype]:
        dtype = torch.promote_types(self.c.dtype, torch.float32)
        return self.c.to(dtype).clamp(min=FIRE_EPS), self.threshold.to(dtype).clamp(min=FIRE_EPS), dtype

    def mlp(self, x: Tensor) -> Tensor:
        """``f_theta`` on a tensor of normalised distances: ``(...)`` -> ``(..., H)``."""
        hidden = F.relu(self.mlp_in(x.unsqueeze(-1).to(self.mlp_in.weight.dtype)))
        return self.mlp_out(hidden)

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        check_positions(q_positions, k_positions, integer=False)
        c, threshold, dtype = self._constants()
        q_pos, k_pos = as_float_positions(q_positions), as_float_positions(k_positions)
        distance = -relative_positions(q_pos, k_pos).to(dtype)  # i - j, (..., Tq, Tk)
        x = fire_inputs(distance, q_pos.to(dtype).unsqueeze(-1), c, threshold)
        bias = self.mlp(x).to(dtype).movedim(-1, -3)  # (..., H, Tq, Tk)
        return bias.to(q.dtype) if q is not None else bias

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        """The MLP evaluated inline, one hidden unit at a time (score_mods see scalars)."""
        check_positions(q_positions, k_positions, integer=False)
        c, threshold, dtype = self._constants()
        q_pos = as_float_positions(q_positions)
        relative = relative_position_fn(q_pos, as_float_positions(k_positions))
        read_q = (lambda b, idx: q_pos[idx]) if q_pos.dim() == 1 else (lambda b, idx: q_pos[b, idx])
        w_in, b_in = self.mlp_in.weight[:, 0].to(dtype), self.mlp_in.bias.to(dtype)  # (hidden,)
        w_out, b_out = self.mlp_out.weight.to(dtype), self.mlp_out.bias.to(dtype)  # (H, hidden), (H,)

        def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            distance = -relative(b, q_idx, kv_idx).to(dtype)
            x = fire_inputs(distance, read_q(b, q_idx).to(dtype), c, threshold)
            value = b_out[h]
            for unit in range(w_in.shape[0]):
                value = value + w_out[h, unit] * torch.relu(w_in[unit] * x + b_in[unit])
            return score + value.to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, hidden={self.hidden}, threshold={self.init_threshold}, init_c={self.init_c}"
        )
