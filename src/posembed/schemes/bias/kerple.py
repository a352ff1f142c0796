"""KERPLE: kernelized relative positional embeddings (Chi, Fan, Ramadge & Rudnicky, NeurIPS 2022).

Each head ``h`` adds a conditionally positive definite kernel of the distance, shifted to a bias:

- logarithmic: ``b(h, i, j) = -r1_h * log(1 + r2_h * |i - j|)``;
- power:       ``b(h, i, j) = -r1_h * |i - j| ** r2_h`` with ``0 < r2_h <= 2``;

with ``r1, r2 > 0`` learned per head. The paper's best variant (and ALiBi's learned
generalisation) is the logarithmic one.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from posembed.schemes.base import BiasScheme, ScoreMod, as_float_positions
from posembed.schemes.bias.relative import check_positions, relative_position_fn, relative_positions

__all__ = ["Kerple", "kerple_bias", "KERNELS", "KERPLE_EPS"]

#: the two kernels of the paper
KERNELS = ("log", "power")

#: floor of the learned ``r1``, ``r2`` (both are kept positive by clamping, not by a reparametrisation)
KERPLE_EPS = 1e-2


def kerple_bias(distance: Tensor, r1: Tensor, r2: Tensor, kernel: str) -> Tensor:
    """The KERPLE bias of non-negative distances ``|i - j|`` for per-head ``r1``, ``r2``.

    Shape:
        distance ``(...)``, r1 and r2 ``(H,)`` -> ``(H, ...)`` (in the dtype of ``r1``).

    >>> kerple_bias(torch.tensor([0.0, 1.0, 3.0]), torch.tensor([2.0]), torch.tensor([1.0]), "log")
    tensor([[-0.0000, -1.3863, -2.7726]])
    >>> kerple_bias(torch.tensor([0.0, 1.0, 3.0]), torch.tensor([2.0]), torch.tensor([2.0]), "power")
    tensor([[  0.,  -2., -18.]])
    """
    distance = distance.to(r1.dtype).unsqueeze(0)  # (1, ...)
    shape = (-1,) + (1,) * (distance.dim() - 1)
    r1, r2 = r1.view(shape), r2.view(shape)
    if kernel == "log":
        return -r1 * torch.log1p(r2 * distance)
    # |d| ** r2 with 0 ** r2 = 0 and a finite gradient in r2 at d = 0
    safe = torch.where(distance > 0, distance, torch.ones_like(distance))
    return torch.where(distance > 0, -r1 * safe.pow(r2), torch.zeros_like(r1 * distance))


class Kerple(BiasScheme):
    """KERPLE's learned per-head kernel of the distance, added to the scaled logits.

    ``kernel="log"``: ``b = -r1 * log(1 + r2 |i - j|)``; ``kernel="power"``:
    ``b = -r1 * |i - j| ** r2``. ``r1`` and ``r2`` are ``(H,)`` parameters, clamped in the
    forward to ``[KERPLE_EPS, inf)`` (and ``r2`` to ``[KERPLE_EPS, 2]`` for the power kernel,
    the range in which the kernel is conditionally positive definite). They start uniform:
    ``r1 ~ U(0, 1)`` (floored at ``eps``), ``r2 ~ U(0, 2)``.

    The bias depends only on ``|i - j|``, so it serves causal and bidirectional attention.
    The paper reports it extrapolating (trained at 512, evaluated to 16k), ``extrapolates = True``.
    Learned scalars are kept in their own dtype; distances are computed in float32 first.

    Args:
        num_heads: number of attention heads H.
        kernel: ``"log"`` or ``"power"``.

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``.
        - bias output: ``(H, Tq, Tk)`` or ``(B, H, Tq, Tk)``; ``q.dtype`` when ``q`` is given,
          else the parameters' dtype promoted to at least float32.

    Example:
        >>> kerple = Kerple(num_heads=1)
        >>> with torch.no_grad():
        ...     _ = kerple.r1.fill_(2.0), kerple.r2.fill_(1.0)
        >>> kerple.bias(torch.arange(3), torch.arange(3))[0]
        tensor([[-0.0000, -1.3863, -2.1972],
                [-1.3863, -0.0000, -1.3863],
                [-2.1972, -1.3863, -0.0000]], grad_fn=<SelectBackward0>)
    """

    name = "kerple"
    paper = "Chi et al. 2022 (KERPLE, NeurIPS)"
    extrapolates = True

    def __init__(self, num_heads: int, *, kernel: str = "log", device=None, dtype=None) -> None:
        super().__init__(num_heads)
        if kernel not in KERNELS:
            raise ValueError(f"unknown KERPLE kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
        self.kernel = kernel
        self.r1 = nn.Parameter(torch.empty(num_heads, device=device, dtype=dtype))
        self.r2 = nn.Parameter(torch.empty(num_heads, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.r1.uniform_(0.0, 1.0).clamp_(min=KERPLE_EPS)
            self.r2.uniform_(0.0, 2.0).clamp_(min=KERPLE_EPS)

    def coefficients(self) -> tuple[Tensor, Tensor]:
        """``(r1, r2)`` clamped to their valid ranges, at least float32: ``(H,)`` each."""
        dtype = torch.promote_types(self.r1.dtype, torch.float32)
        r1 = self.r1.to(dtype).clamp(min=KERPLE_EPS)
        r2 = self.r2.to(dtype).clamp(min=KERPLE_EPS, max=2.0 if self.kernel == "power" else None)
        return r1, r2

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        check_positions(q_positions, k_positions, integer=False)
        relative = relative_positions(as_float_positions(q_positions), as_float_positions(k_positions))
        r1, r2 = self.coefficients()
        bias = kerple_bias(relative.abs(), r1, r2, self.kernel)  # (H, ..., Tq, Tk)
        if bias.dim() == 4:
            bias = bias.transpose(0, 1)  # (B, H, Tq, Tk)
        return bias.to(q.dtype) if q is not None else bias

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        check_positions(q_positions, k_positions, integer=False)
        relative = relative_position_fn(as_float_positions(q_positions), as_float_positions(k_positions))
        r1, r2 = self.coefficients()
        kernel = self.kernel

        def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            distance = relative(b, q_idx, kv_idx).abs().to(r1.dtype)
            if kernel == "log":
                value = -r1[h] * torch.log1p(r2[h] * distance)
            else:
                safe = torch.where(distance > 0, distance, torch.ones_like(distance))
                value = torch.where(distance > 0, -r1[h] * safe.pow(r2[h]), torch.zeros_like(distance))
            return score + value.to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, kernel={self.kernel!r}"
