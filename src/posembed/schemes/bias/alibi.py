"""ALiBi: attention with linear biases (Press et al., ICLR 2022).

No position vector enters the model; each head ``h`` adds ``m_h * (j - i)`` to the scaled logit
of query ``i`` and key ``j``, a penalty linear in the distance with a fixed, head-specific slope.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from posembed._utils.checks import check_positive_int
from posembed.schemes.base import BiasScheme, ScoreMod, as_float_positions
from posembed.schemes.bias.relative import check_positions, relative_position_fn, relative_positions

__all__ = ["ALiBi", "alibi_slopes", "alibi_bias"]


def alibi_slopes(num_heads: int) -> list[float]:
    """Head slopes by the official formula (fairseq ALiBi), for any head count.

    A power of two ``n`` gets the geometric sequence starting at ``2^(-8/n)`` with that ratio;
    otherwise, with ``c = 2^floor(log2 n)``: ``slopes(c) + slopes(2c)[0::2][:n - c]``.

    Examples:
        >>> alibi_slopes(4)
        [0.25, 0.0625, 0.015625, 0.00390625]
        >>> [round(s, 4) for s in alibi_slopes(6)]
        [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125]
    """
    check_positive_int(num_heads, "num_heads")

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(num_heads))
    if closest == num_heads:
        return power_of_two(num_heads)
    return power_of_two(closest) + power_of_two(2 * closest)[0::2][: num_heads - closest]


def alibi_bias(slopes: Tensor, relative: Tensor, *, symmetric: bool) -> Tensor:
    """``m_h * (j - i)`` (causal form) or ``-m_h * |j - i|`` (symmetric) in float32.

    Shape:
        slopes ``(H,)``, relative ``(Tq, Tk)`` or ``(B, Tq, Tk)`` -> ``(H, Tq, Tk)`` or ``(B, H, Tq, Tk)``.
    """
    distance = as_float_positions(relative).unsqueeze(-3)  # (..., 1, Tq, Tk)
    if symmetric:
        distance = -distance.abs()
    return slopes.float().view(-1, 1, 1) * distance  # (..., H, Tq, Tk)


class ALiBi(BiasScheme):
    """Attention with linear biases: head ``h`` adds ``m_h * (j - i)`` to the scaled logits.

    Two forms:

    - ``symmetric=False`` (default, the paper's causal form): ``b(h, i, j) = m_h * (j - i)``.
      For ``j <= i`` this is ``-m_h * (i - j) <= 0``; the upper triangle ``j > i`` holds the same
      linear formula, i.e. a *positive* ``m_h * (j - i)``, which is only meaningful because causal
      attention masks it. So this form refuses bidirectional attention (:meth:`check_attention`).
    - ``symmetric=True``: ``b(h, i, j) = -m_h * |i - j|``, the bidirectional variant used here
      (the paper defines only the causal form; this is the common choice, e.g. x-transformers).

    On the lower triangle the two forms agree. x-transformers' ``AlibiPositionalBias`` always
    builds ``-m_h * |j - i|`` (its sign convention: negative penalties, positions of the queries
    at the end of the keys), which equals ``symmetric=True`` everywhere and the causal form on
    every unmasked entry. Slopes follow the official formula (:func:`alibi_slopes`) for any
    head count. Trained at 512 tokens, ALiBi keeps WikiText-103 perplexity flat out to 15,512
    (18.31), hence ``extrapolates = True``.

    Args:
        num_heads: number of attention heads H (one slope each).
        symmetric: use ``-m_h * |i - j|`` (bidirectional attention) instead of ``m_h * (j - i)``.
        device: device of the ``slopes`` buffer.

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``.
        - bias output: ``(H, Tq, Tk)``, or ``(B, H, Tq, Tk)`` for 2-D positions; float32, or
          ``q.dtype`` when ``q`` is given.

    Example:
        >>> alibi = ALiBi(num_heads=2)
        >>> alibi.slopes
        tensor([0.0625, 0.0039])
        >>> alibi.bias(torch.arange(3), torch.arange(3))[0] * 16
        tensor([[ 0.,  1.,  2.],
                [-1.,  0.,  1.],
                [-2., -1.,  0.]])
    """

    name = "alibi"
    paper = "Press et al. 2022 (ICLR)"
    extrapolates = True
    slopes: Tensor  # (H,), float32, a buffer

    def __init__(self, num_heads: int, *, symmetric: bool = False, device=None) -> None:
        super().__init__(num_heads)
        if not isinstance(symmetric, bool):
            raise TypeError(f"symmetric must be a bool, got {symmetric!r}")
        self.symmetric = symmetric
        self.register_buffer("slopes", torch.empty(num_heads, device=device), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """(Re)build the fixed slopes; ALiBi has no learned parameters."""
        with torch.no_grad():
            self.slopes.copy_(torch.tensor(alibi_slopes(self.num_heads), dtype=torch.float32))

    def why_causal_only(self) -> str | None:
        return (
            None
            if self.symmetric
            else (
                "ALiBi(symmetric=False) is the causal form m*(j - i), positive above the diagonal; "
                "bidirectional attention (causal=False) needs ALiBi(num_heads, symmetric=True), "
                "the -m*|i - j| form"
            )
        )

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        check_positions(q_positions, k_positions, integer=False)
        relative = relative_positions(as_float_positions(q_positions), as_float_positions(k_positions))
        bias = alibi_bias(self.slopes, relative, symmetric=self.symmetric)  # (..., H, Tq, Tk)
        return bias.to(q.dtype) if q is not None else bias

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        check_positions(q_positions, k_positions, integer=False)
        relative = relative_position_fn(as_float_positions(q_positions), as_float_positions(k_positions))
        slopes = self.slopes.float()

        if self.symmetric:

            def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
                return score - (slopes[h] * relative(b, q_idx, kv_idx).abs()).to(score.dtype)

        else:

            def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
                return score + (slopes[h] * relative(b, q_idx, kv_idx)).to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, symmetric={self.symmetric}"
