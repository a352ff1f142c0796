"""bf16 matrix products on the CPU (AMX), attention kept in fp32: an opt-in speed lever.

oneDNN's math mode ``torch.backends.mkldnn.matmul.fp32_precision = "bf16"`` lets fp32 matrix
products round their inputs to bf16 and accumulate in fp32 (AMX tiles where the CPU has
``amx_bf16``), the CPU's counterpart of TF32 on a GPU. Tensors, parameters and the optimizer stay
fp32; only the products' inputs are rounded, so the numbers change (by about bf16's 2^-8 relative
in each product's inputs) and depend on the machine. It is never on by default.

Under that mode torch's CPU flash-attention kernel runs several times slower, so while it is on
:func:`posembed.nn.attention.kernels.sdpa_attention` runs SDPA through :func:`fp32_sdpa`, which
switches the mode off for the attention kernel's forward and backward (attention itself stays
fp32-exact). :func:`bf16_matmuls` is the switch; ``benchmarks/bench_lab_speed.py --only levers``
measures it.

Example:
    >>> with bf16_matmuls():
    ...     bf16_matmuls_enabled()
    True
    >>> bf16_matmuls_enabled()
    False
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["bf16_matmuls", "bf16_matmuls_enabled", "fp32_sdpa"]


def bf16_matmuls_enabled() -> bool:
    """Whether fp32 matrix products on the CPU currently run in oneDNN's bf16 math mode."""
    return torch.backends.mkldnn.matmul.fp32_precision == "bf16"


@contextlib.contextmanager
def _matmul_precision(precision: str) -> Iterator[None]:
    before = torch.backends.mkldnn.matmul.fp32_precision
    torch.backends.mkldnn.matmul.fp32_precision = precision
    try:
        yield
    finally:
        torch.backends.mkldnn.matmul.fp32_precision = before


@contextlib.contextmanager
def bf16_matmuls(enabled: bool = True) -> Iterator[None]:
    """fp32 matrix products on the CPU in bf16 math mode for the duration (restored afterwards);
    a no-op when not ``enabled``. Run the forward *and* the backward inside it."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool, got {type(enabled).__name__}")
    with _matmul_precision("bf16") if enabled else contextlib.nullcontext():
        yield


class _Fp32Sdpa(torch.autograd.Function):
    """SDPA (no mask, no dropout) with the matmul math mode at fp32 in its forward and backward."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None) -> Tensor:
        with _matmul_precision("ieee"), torch.enable_grad():
            inputs = tuple(t.detach().requires_grad_(t.requires_grad) for t in (q, k, v))
            out = F.scaled_dot_product_attention(*inputs, is_causal=causal, scale=scale)
        ctx.save_for_backward(*inputs, out)
        return out.detach()

    @staticmethod
    def backward(ctx, grad: Tensor):
        *inputs, out = ctx.saved_tensors
        wanted = [t for t in inputs if t.requires_grad]
        with _matmul_precision("ieee"):
            grads = iter(torch.autograd.grad(out, wanted, grad) if wanted else ())
        return (*(next(grads) if t.requires_grad else None for t in inputs), None, None)


def fp32_sdpa(q: Tensor, k: Tensor, v: Tensor, *, causal: bool, scale: float | None) -> Tensor:
    """``F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)`` computed with the
    matmul math mode at fp32, forward and backward (the same numbers as outside :func:`bf16_matmuls`)."""
    if not any(t.requires_grad for t in (q, k, v)) or not torch.is_grad_enabled():
        with _matmul_precision("ieee"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    return _Fp32Sdpa.apply(q, k, v, causal, scale)
