"""Compiled RoPE kernel: one pass over ``x`` per rotation, forward and backward (Su et al. 2021).

Eager PyTorch needs several passes to rotate a tensor (``x1 cos - x2 sin`` and
``x2 cos + x1 sin``, each a multiply and a multiply-add over half the channels). The kernel is
``torch.compile`` (Inductor) of the rotation formula (:func:`rotate_in_float32`), one loop that
reads ``x`` once and writes the output once, in ``x``'s dtype: float32, or bfloat16 / float16
widened to float32 inside the loop, with cos and sin in float32 (the exact angles are never
rounded to half precision), and the result rounded once. The backward of a rotation is the
inverse rotation (the same kernel with ``sin`` negated), so only ``cos`` and ``sin`` are saved.

The formula, the kernel (:class:`~posembed.schemes.rotary.rotation.CompiledRotation`, built lazily,
one process-wide instance from :func:`compiled_rotation`) and the dispatch between eager and
compiled all live in :mod:`posembed.schemes.rotary.rotation`: ``RotaryEmbedding(compiled=True)`` needs
the kernel, and schemes never import ``fused`` (the layering runs the other way). This module is
the public fast-path API over it: :func:`rotate` (the kernel, no eager dispatch) and
:func:`available`.

The first call for a new shape compiles (seconds; a C++ compiler on the CPU, Triton on CUDA).
``RotaryEmbedding`` takes it by default on CUDA and only when asked (``compiled=True``) on the
CPU (:func:`~posembed.schemes.rotary.rotation.compiled_by_default`); :func:`available` says whether it
can run here; a compile failure is logged once and the eager formula takes over.
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed.schemes.rotary.rotation import (
    COMPILED_DTYPES,
    ROPE_LAYOUTS,
    CompiledRotation,
    check_rotation,
    compile_available,
    compiled_rotation,
    rotate_in_float32,
    rotate_reference,
    rotate_with,
)  # fmt: skip

__all__ = [
    "COMPILED_DTYPES", "ROPE_LAYOUTS", "CompiledRotation", "available", "check_rotation", "compiled_rotation", "rotate",
    "rotate_in_float32", "rotate_reference",
]  # fmt: skip

#: whether the compiled kernel can be built here for a device type (``"cpu"`` by default; cheap)
available = compile_available


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "half") -> Tensor:
    """Rotate ``x`` by the compiled kernel; differentiable in ``x`` (not in ``cos``/``sin``).

    Same arguments and shapes as :func:`rotate_reference`. ``x`` in float32, bfloat16 or
    float16 is read and written in its dtype and rotated in float32 inside the kernel, with
    ``cos``/``sin`` taken in float32; other dtypes (float64) are rotated in their own.

    >>> x = torch.randn(2, 3, 10, 8)  # (B, H, T, D)
    >>> cos, sin = torch.rand(10, 4), torch.rand(10, 4)
    >>> torch.allclose(rotate(x, cos, sin), rotate_reference(x, cos, sin), atol=1e-6)
    True
    """
    check_rotation(x, cos, sin, layout)
    if cos.requires_grad or sin.requires_grad:
        raise ValueError("rotate() gives no gradient to cos/sin; use rotate_reference for learned angles")
    dtype = torch.float32 if x.dtype in COMPILED_DTYPES else x.dtype
    cos, sin = cos.to(dtype), sin.to(dtype)
    return rotate_with(compiled_rotation(), x, cos, sin, layout)
