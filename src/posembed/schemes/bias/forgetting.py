"""Forgetting gates: the Forgetting Transformer's data-dependent decay (Lin et al., ICLR 2025).

FoX gives every token ``t`` and head ``h`` a forget gate ``f_t = sigmoid(w_h^T x_t + b_h)`` and
adds to the logit of query ``i`` and key ``j <= i``

    b(h, i, j) = sum_{t=j+1..i} log f_t  =  c_i - c_j,   c_t = sum_{s<=t} log f_s,

a learned, input-dependent ALiBi (a constant gate ``f = exp(-m)`` gives ALiBi's ``-m (i - j)``);
x-transformers calls it ``DataDependentAlibi``.

The bias interface hands a scheme the projected queries and keys, not the layer input ``x``; the
gate here reads the *key* of token ``t`` instead: ``f_t = sigmoid(w_h . k_t + b_h)``, a linear
map of the key, one ``w_h`` of width D per head. The key is itself a linear map of ``x``, so this
is FoX's gate restricted to the key's row space (exactly FoX when ``w_h`` lies in it); it costs
``H * (D + 1)`` parameters and needs no change to the attention layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from posembed._utils.checks import check_number
from posembed.schemes.base import BiasScheme, ScoreMod
from posembed.schemes.bias.relative import check_positions

__all__ = ["ForgettingGate", "forget_cumsums"]


def forget_cumsums(log_gates: Tensor, q_positions: Tensor, k_positions: Tensor) -> tuple[Tensor, Tensor]:
    """Prefix sums ``c`` of the keys' log gates, and ``c`` at each query's own position.

    ``c_q[i]`` is ``c`` at the last key whose position is ``<= q_pos_i``: the keys must be in
    position order along the key axis (as in any causal layer or KV cache), so that the keys a
    query sees form a prefix. A query before every key gets ``0``.

    Shape:
        log_gates ``(B, H, Tk)``, q_positions ``(Tq,)|(B, Tq)``, k_positions ``(Tk,)|(B, Tk)``
        -> ``c`` ``(B, H, Tk)`` and ``c_q`` ``(B, H, Tq)``.

    >>> c, c_q = forget_cumsums(torch.tensor([[[-1.0, -2.0, -3.0]]]), torch.tensor([1, 2]), torch.arange(3))
    >>> c, c_q
    (tensor([[[-1., -3., -6.]]]), tensor([[[-3., -6.]]]))
    """
    cumsum = log_gates.cumsum(-1)  # (B, H, Tk)
    seen = (k_positions.unsqueeze(-2) <= q_positions.unsqueeze(-1)).sum(-1)  # (..., Tq) keys at or before
    last = (seen - 1).clamp(min=0)
    batch, heads, _ = cumsum.shape
    index = last.unsqueeze(-2).expand(batch, heads, last.shape[-1])  # (B, H, Tq)
    at_query = torch.gather(cumsum, -1, index)
    at_query = torch.where(seen.unsqueeze(-2) > 0, at_query, torch.zeros_like(at_query))
    return cumsum, at_query


class ForgettingGate(BiasScheme):
    """FoX forget gates from the keys: ``b(h, i, j) = sum_{j < t <= i} log sigmoid(w_h . k_t + b_h)``.

    See the module docstring for the choice of reading the gate off the key. The gate bias
    starts at ``bias_init`` (5: ``f ~ 0.993``, nearly no forgetting, as x-transformers'
    ``DataDependentAlibi``); ``w`` starts at 0.

    Causal only: :meth:`check_attention` refuses bidirectional layers. Keys after the query
    get ``c_i - c_j > 0`` in :meth:`bias` (masked by causal attention), the same value the
    :meth:`score_mod` gives. Backends: eager, SDPA and chunked through the materialised bias,
    and FlexAttention through :meth:`score_mod`, which captures only the ``(B, H, T)`` prefix
    sums (as FoX runs on a flash kernel). Not ``fused`` (it reads k).

    Args:
        num_heads: number of attention heads H.
        head_dim: width D of the keys.
        bias_init: initial gate bias ``b_h``.

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``; integers in
          non-decreasing order along the keys.
        - k: ``(B, H, Tk, D)``, required (q is not read).
        - bias output: ``(B, H, Tq, Tk)`` in ``k.dtype``.

    Example:
        >>> import math
        >>> fox = ForgettingGate(num_heads=1, head_dim=2, bias_init=0.0)  # f_t = sigmoid(0) = 1/2
        >>> k = torch.randn(1, 1, 3, 2)
        >>> fox.bias(torch.arange(3), torch.arange(3), k, k)[0, 0].tril().detach() / math.log(0.5) + 0.0
        tensor([[0., 0., 0.],
                [1., 0., 0.],
                [2., 1., 0.]])
    """

    name = "forgetting"
    paper = "Lin et al. 2025 (Forgetting Transformer, ICLR)"
    extrapolates = True
    needs_qk = True
    built_for = ("num_heads", "head_dim")
    head_dim: int

    def __init__(self, num_heads: int, head_dim: int, *, bias_init: float = 5.0, device=None, dtype=None) -> None:
        super().__init__(num_heads, head_dim)
        self.bias_init = check_number(bias_init, "bias_init", float("-inf"))
        self.weight = nn.Parameter(torch.empty(num_heads, head_dim, device=device, dtype=dtype))
        self.gate_bias = nn.Parameter(torch.empty(num_heads, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)
        nn.init.constant_(self.gate_bias, self.bias_init)

    def why_causal_only(self) -> str:
        return (
            "ForgettingGate decays over the tokens between key and query in one direction (FoX is causal); "
            "it cannot serve bidirectional attention (causal=False)"
        )

    def log_gates(self, k: Tensor) -> Tensor:
        """``log f_t = log sigmoid(w_h . k_t + b_h)``: ``(B, H, Tk, D)`` -> ``(B, H, Tk)``."""
        logits = torch.einsum("bhtd,hd->bht", k, self.weight.to(k.dtype)) + self.gate_bias.to(k.dtype).view(-1, 1)
        return F.logsigmoid(logits)

    def _cumsums(self, q_positions: Tensor, k_positions: Tensor, k: Tensor | None) -> tuple[Tensor, Tensor]:
        check_positions(q_positions, k_positions)
        expected = (self.num_heads, k_positions.shape[-1], self.head_dim)
        if k is None or k.dim() != 4 or tuple(k.shape[1:]) != expected:
            shape = None if k is None else tuple(k.shape)
            raise ValueError(
                f"ForgettingGate reads the keys: k must have shape (B, {expected[0]}, {expected[1]}, {expected[2]}) "
                f"(num_heads, length of k_positions, head_dim), got {shape}"
            )
        for name, positions in (("q_positions", q_positions), ("k_positions", k_positions)):
            if positions.dim() == 2 and positions.shape[0] not in (1, k.shape[0]):
                raise ValueError(f"{name} has batch size {positions.shape[0]} but k has batch size {k.shape[0]}")
        return forget_cumsums(self.log_gates(k), q_positions, k_positions)

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        cumsum, at_query = self._cumsums(q_positions, k_positions, k)
        return at_query.unsqueeze(-1) - cumsum.unsqueeze(-2)  # (B, H, Tq, Tk)

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        cumsum, at_query = self._cumsums(q_positions, k_positions, k)

        def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score + (at_query[b, h, q_idx] - cumsum[b, h, kv_idx]).to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, bias_init={self.bias_init}"
