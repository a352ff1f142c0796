"""Sandwich: the sinusoidal embeddings' own inner product as a bias (Chi, Fan, Rudnicky & Ramadge, ACL 2023).

"Dissecting Transformer Length Extrapolation via the Lens of Receptive Field Analysis" keeps,
of the four terms of ``(x_i + p_i)^T (x_j + p_j)``, only the position-position term
``p_i^T p_j`` of sinusoidal embeddings ``p`` of width ``d'``, which depends on ``i - j`` only:

    p_i^T p_j = sum_{k=1}^{d'/2} cos((i - j) * w_k),   w_k = 10000 ** (-2k / d'),

shifted by its value ``d'/2`` at distance 0 so that it is ``<= 0``, and divided per head by
ALiBi's slope denominators ``8h / H`` (``h = 1..H``), as the authors' head scaling (also NeMo's
``SandwichRelativePositionEmbedding``). The form implemented here is exactly

    b(h, i, j) = (sum_{k=1}^{d'/2} cos((i - j) * w_k) - d'/2) * H / (8h).
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed._utils.checks import check_number, check_positive_int
from posembed._utils.devices import host_checks
from posembed.schemes.base import BiasScheme, ScoreMod, as_float_positions
from posembed.schemes.bias.relative import check_positions, relative_position_fn, relative_positions
from posembed.schemes.fp32_buffers import Fp64Buffer

__all__ = ["Sandwich", "sandwich_frequencies", "sandwich_head_scales", "sandwich_bias"]


def sandwich_frequencies(dim: int, base: float = 10000.0) -> Tensor:
    """``w_k = base ** (-2k / d')`` for ``k = 1..d'/2``: ``(d'/2,)`` float64.

    >>> sandwich_frequencies(4, base=100.0)
    tensor([0.1000, 0.0100], dtype=torch.float64)
    """
    k = torch.arange(1, dim // 2 + 1, dtype=torch.float64)
    return base ** (-2.0 * k / dim)


def sandwich_head_scales(num_heads: int) -> Tensor:
    """``H / (8h)`` for ``h = 1..H`` (the reciprocal of ALiBi's ``8h/H``): ``(H,)`` float64.

    >>> sandwich_head_scales(4).tolist()
    [0.5, 0.25, 0.16666666666666666, 0.125]
    """
    h = torch.arange(1, num_heads + 1, dtype=torch.float64)
    return num_heads / (8.0 * h)


def sandwich_bias(relative: Tensor, frequencies: Tensor, head_scales: Tensor) -> Tensor:
    """``(sum_k cos(d * w_k) - K) * s_h`` for every relative position ``d`` (``K = len(frequencies)``).

    Computed in the dtype of ``frequencies`` (float64 for the buffers of :class:`Sandwich`).

    Shape:
        relative ``(...)``, frequencies ``(K,)``, head_scales ``(H,)`` -> ``(H, ...)``.
    """
    angles = relative.to(frequencies.dtype).unsqueeze(-1) * frequencies  # (..., K)
    kernel = torch.cos(angles).sum(-1) - frequencies.shape[0]  # (...)
    return head_scales.view((-1,) + (1,) * kernel.dim()) * kernel.unsqueeze(0)  # (H, ...)


class Sandwich(BiasScheme):
    """Sandwich's parameter-free bias: the sinusoidal inner product of the distance, per-head scaled.

    ``b(h, i, j) = (sum_{k=1}^{d'/2} cos((i - j) w_k) - d'/2) * H / (8h)`` with
    ``w_k = base ** (-2k / d')``; see the module docstring for where each piece comes from.
    Symmetric in ``i - j`` and ``0`` on the diagonal, so it serves causal and bidirectional
    attention. Chi et al. report it extrapolating like ALiBi/KERPLE: ``extrapolates = True``.
    The cosine sum is evaluated in float64 (the frequencies are tiny for large ``d'``) and cast.

    Args:
        num_heads: number of attention heads H.
        dim: width ``d'`` of the sinusoidal embeddings whose inner product is taken (even).
        base: the sinusoid base (10000).

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``.
        - bias output: ``(H, Tq, Tk)`` or ``(B, H, Tq, Tk)``; float32, or ``q.dtype`` when given.

    Example:
        >>> sandwich = Sandwich(num_heads=1, dim=2, base=1.0)  # one frequency, w_1 = 1
        >>> sandwich.bias(torch.arange(3), torch.arange(3))[0] * 8  # cos(i - j) - 1
        tensor([[ 0.0000, -0.4597, -1.4161],
                [-0.4597,  0.0000, -0.4597],
                [-1.4161, -0.4597,  0.0000]])
    """

    name = "sandwich"
    paper = "Chi et al. 2023 (Sandwich, ACL)"
    extrapolates = True
    # float64 whatever the model's dtype: .half() / .float() leave them exact, .to(device) moves them
    frequencies = Fp64Buffer()  # (d' / 2,)
    head_scales = Fp64Buffer()  # (H,)

    def __init__(self, num_heads: int, dim: int, *, base: float = 10000.0, device=None) -> None:
        super().__init__(num_heads)
        self.dim = check_positive_int(dim, "dim")
        if dim % 2:
            raise ValueError(f"Sandwich dim={dim} must be even: the sinusoidal embedding pairs sin and cos")
        self.base = check_number(base, "base", 0.0)
        if self.base <= 0.0:
            raise ValueError(f"base must be positive, got {base}")
        self.frequencies = torch.empty(dim // 2, dtype=torch.float64, device=device)
        self.head_scales = torch.empty(num_heads, dtype=torch.float64, device=device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """(Re)build the fixed frequencies and head scales; Sandwich learns nothing."""
        with torch.no_grad():
            self.frequencies.copy_(sandwich_frequencies(self.dim, self.base))
            self.head_scales.copy_(sandwich_head_scales(self.num_heads))

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        check_positions(q_positions, k_positions, integer=False)
        relative = relative_positions(as_float_positions(q_positions), as_float_positions(k_positions))
        bias = sandwich_bias(relative, self.frequencies, self.head_scales)  # (H, ..., Tq, Tk)
        if bias.dim() == 4:
            bias = bias.transpose(0, 1)  # (B, H, Tq, Tk)
        return bias.to(q.dtype if q is not None else torch.float32)

    def distance_table(self, max_distance: int) -> Tensor:
        """Bias of every distance ``d`` in ``[-max_distance, max_distance]``: ``(H, 2 * max_distance + 1)`` float32."""
        distances = torch.arange(-max_distance, max_distance + 1, device=self.frequencies.device)
        return sandwich_bias(distances, self.frequencies, self.head_scales).float()

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        """Integer positions index a ``(H, 2R + 1)`` distance table where reading their range ``R``
        back is free (:func:`~posembed._utils.devices.host_checks`: the CPU); elsewhere (no host sync on
        CUDA) and for real positions the sum is evaluated inline."""
        check_positions(q_positions, k_positions, integer=False)
        integer = not (q_positions.dtype.is_floating_point or k_positions.dtype.is_floating_point)
        if integer and host_checks(q_positions.device):
            relative = relative_position_fn(q_positions, k_positions)
            reach = _largest_distance(q_positions, k_positions)
            table = self.distance_table(reach)

            def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
                return score + table[h, relative(b, q_idx, kv_idx) + reach].to(score.dtype)

            return score_mod

        relative = relative_position_fn(as_float_positions(q_positions), as_float_positions(k_positions))
        frequencies, scales = self.frequencies.float(), self.head_scales.float()

        def score_mod_real(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            distance = relative(b, q_idx, kv_idx)
            total: float | Tensor = -float(frequencies.shape[0])  # a Tensor from the first term on
            for index in range(frequencies.shape[0]):  # unrolled: score_mods see scalars
                total = total + torch.cos(distance * frequencies[index])
            return score + (scales[h] * total).to(score.dtype)

        return score_mod_real

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, dim={self.dim}, base={self.base}"


def _largest_distance(q_positions: Tensor, k_positions: Tensor) -> int:
    """``max |k_pos - q_pos|`` over all pairs (one host sync while building a score_mod)."""
    if q_positions.numel() == 0 or k_positions.numel() == 0:
        return 0
    spans = (k_positions.max() - q_positions.min()).abs(), (q_positions.max() - k_positions.min()).abs()
    return int(torch.stack(spans).max())
