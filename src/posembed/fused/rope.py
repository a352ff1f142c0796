"""Compiled RoPE kernel: one pass over ``x`` per rotation, forward and backward (Su et al. 2021).

Eager PyTorch needs several passes to rotate a tensor (``x1 cos - x2 sin`` and
``x2 cos + x1 sin``, each a multiply and a multiply-add over half the channels). Here the
formula is compiled once with ``torch.compile`` (Inductor) into one loop that reads ``x``
once and writes the output once. The backward of a rotation is the inverse rotation (the
same kernel with ``sin`` negated), so the autograd Function saves only ``cos`` and ``sin``.

The first call for a new shape compiles (seconds; needs a C++ compiler on CPU), so this is an
opt-in fast path: :func:`available` says whether it can run here, and callers keep their eager
path (``posembed.schemes.rotary.apply_rotary``) as the fallback and the reference.
"""

from __future__ import annotations

import functools
import logging

import torch
from torch import Tensor

__all__ = ["LAYOUTS", "available", "check_rotation", "rotate", "rotate_reference"]

log = logging.getLogger(__name__)

LAYOUTS = ("half", "interleaved")


def check_rotation(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> None:
    """The arguments of a rotation fit: a known layout, cos and sin alike, at most ``D / 2`` wide."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if cos.shape != sin.shape or 2 * cos.shape[-1] > x.shape[-1]:
        raise ValueError(
            f"cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must share a shape whose last dim "
            f"is at most half of x's last dim {x.shape[-1]}"
        )


def rotate_reference(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "half") -> Tensor:
    """The rotation formula, plain PyTorch: what the compiled kernel computes.

    Args:
        x: queries or keys; the first ``r = 2 * cos.shape[-1]`` channels are rotated.
        cos, sin: ``cos(m * theta_i)``, ``sin(m * theta_i)``, broadcastable to ``x[..., :r/2]``.
        layout: ``"half"`` (pairs ``(i, i + r/2)``, GPT-NeoX / Llama) or ``"interleaved"``
            (pairs ``(2i, 2i + 1)``, GPT-J / Meta).

    Shape:
        x ``(B, H, T, D)`` (any leading dims); cos, sin ``(T, r/2)`` or ``(B, 1, T, r/2)``;
        output like ``x``.

    >>> rotate_reference(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0]]), torch.tensor([[1.0]]))
    tensor([[0., 1.]])
    """
    half = cos.shape[-1]
    if layout == "half":
        x1, x2 = x[..., :half], x[..., half : 2 * half]
    else:
        pairs = x[..., : 2 * half].unflatten(-1, (half, 2))  # (..., r/2, 2)
        x1, x2 = pairs[..., 0], pairs[..., 1]
    r1, r2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    rotated = torch.cat((r1, r2), -1) if layout == "half" else torch.stack((r1, r2), -1).flatten(-2)
    if 2 * half == x.shape[-1]:
        return rotated
    return torch.cat((rotated, x[..., 2 * half :]), -1)  # partial rotary: pass-through


@functools.cache
def _kernel():
    return torch.compile(rotate_reference, dynamic=None, fullgraph=True)


_broken: list[str] = []  # the first compile error, if any: later calls go straight to eager


@functools.cache
def available() -> bool:
    """Whether the compiled kernel can be built here (Inductor's C++ compiler is present).

    Cheap: nothing is compiled. If compiling still fails later, :func:`rotate` logs it once
    and falls back to the eager formula.
    """
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        return bool(get_cpp_compiler())
    except Exception as error:  # no Inductor, no C++ compiler, unsupported platform, ...
        log.info("compiled RoPE kernel unavailable (%s); the eager formula is used", error)
        return False


def _run(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    if not _broken:
        try:
            return _kernel()(x, cos, sin, layout)
        except Exception as error:  # compile failure: log once, stay correct
            _broken.append(str(error))
            log.warning("compiling the RoPE kernel failed (%s); using the eager formula", error)
    return rotate_reference(x, cos, sin, layout)


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "half") -> Tensor:
    """Rotate ``x`` by the compiled kernel; differentiable in ``x`` (not in ``cos``/``sin``).

    Same arguments and shapes as :func:`rotate_reference`. ``cos``/``sin`` are cast to
    ``x``'s dtype; half-precision inputs are best rotated in float32 by the caller.

    >>> x = torch.randn(2, 3, 10, 8)  # (B, H, T, D)
    >>> cos, sin = torch.rand(10, 4), torch.rand(10, 4)
    >>> torch.allclose(rotate(x, cos, sin), rotate_reference(x, cos, sin), atol=1e-6)
    True
    """
    check_rotation(x, cos, sin, layout)
    if cos.requires_grad or sin.requires_grad:
        raise ValueError("rotate() gives no gradient to cos/sin; use rotate_reference for learned angles")
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if torch.is_grad_enabled() and x.requires_grad:
        return _Rotate.apply(x, cos, sin, layout)
    return _run(x, cos, sin, layout)


class _Rotate(torch.autograd.Function):
    """Forward: rotate by +angle. Backward: rotate the gradient by -angle (the transpose)."""

    @staticmethod
    def forward(ctx, x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
        ctx.save_for_backward(cos, sin)
        ctx.layout = layout
        return _run(x, cos, sin, layout)

    @staticmethod
    def backward(ctx, grad: Tensor):
        cos, sin = ctx.saved_tensors
        return _run(grad.contiguous(), cos, -sin, ctx.layout), None, None, None
