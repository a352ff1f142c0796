"""The attention backends that need no compiler: eager, SDPA, chunked and fused.

Each computes ``softmax(scale * q k^T + bias + mask) v`` for one
:class:`~posembed.nn.attention.inputs.AttentionInputs`; what each materialises, and when
:func:`posembed.nn.attention.backends.choose_backend` picks it, is told in
:mod:`posembed.nn.attention.backends`. FlexAttention lives there too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from posembed._utils.checks import check_allocation
from posembed.kernels.attention import bias_attention
from posembed.kernels.cpu_matmul import bf16_matmuls_enabled, fp32_sdpa
from posembed.nn.attention.inputs import AttentionInputs, adds_bias, allowed_mask, logit_mask, needs_grad

__all__ = ["eager_attention", "sdpa_attention", "chunked_attention", "fused_attention"]


def _softmax_attend(q: Tensor, k: Tensor, v: Tensor, extra: Tensor | None, scale: float, dropout: float) -> Tensor:
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (B, H, Tq, T)
    if extra is not None:
        scores = scores + extra
    # half types upcast to float32 for the softmax; float64 stays float64 (never rounded down)
    probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(v.dtype)
    if dropout > 0.0:
        probs = F.dropout(probs, p=dropout)
    return torch.matmul(probs, v)  # (B, H, Tq, Dv)


def eager_attention(inp: AttentionInputs) -> Tensor:
    """The reference: ``softmax(scale q k^T + bias + mask) v`` in plain PyTorch.

    Example:
        >>> q = k = v = torch.randn(1, 2, 5, 8)  # (B, H, T, D)
        >>> inp = AttentionInputs(q, k, v, scale=8**-0.5, causal=True, positions=torch.arange(5))
        >>> torch.allclose(eager_attention(inp), chunked_attention(inp, chunk_size=2), atol=1e-6)
        True
    """
    _check_dense(inp, "eager", copies=3)  # scores, masked scores, float32 probabilities
    return _softmax_attend(inp.q, inp.k, inp.v, logit_mask(inp), inp.scale, inp.dropout)


def sdpa_attention(inp: AttentionInputs) -> Tensor:
    """``F.scaled_dot_product_attention``; bias, causal and padding masks merged into ``attn_mask``."""
    adds = adds_bias(inp.scheme)
    if not adds and inp.key_mask is None:
        # eager only: the mode is a process setting dynamo cannot trace (a compiled graph keeps plain SDPA)
        if (
            inp.dropout == 0.0
            and inp.q.device.type == "cpu"
            and not torch.compiler.is_compiling()
            and bf16_matmuls_enabled()
        ):
            return fp32_sdpa(inp.q, inp.k, inp.v, causal=inp.causal, scale=inp.scale)  # see posembed.kernels.cpu_matmul
        return F.scaled_dot_product_attention(
            inp.q, inp.k, inp.v, dropout_p=inp.dropout, is_causal=inp.causal, scale=inp.scale
        )
    _check_dense(inp, "sdpa", copies=2)  # the merged mask and the kernel's scores
    if not adds:
        mask = allowed_mask(inp)  # boolean, True = take part
    else:
        mask = logit_mask(inp)
        mask = None if mask is None else mask.to(inp.q.dtype)
    return F.scaled_dot_product_attention(inp.q, inp.k, inp.v, attn_mask=mask, dropout_p=inp.dropout, scale=inp.scale)


def _check_dense(inp: AttentionInputs, backend: str, copies: int) -> None:
    """Refuse, before allocating, ``(B, H, Tq, Tk)`` float32 tensors larger than the device's memory."""
    batch, heads, length, _ = inp.q.shape
    shape = (batch, heads, length, inp.k.shape[-2])
    check_allocation(
        copies * batch * heads * length * inp.k.shape[-2] * 4,
        inp.q.device,
        f"backend {backend!r} at T={length}: {copies} float32 tensors of shape (B, H, T, T) = {shape}",
        hint="backend='fused' or 'chunked' keep O(T * block) scores",
    )


def chunked_attention(inp: AttentionInputs, chunk_size: int = 256) -> Tensor:
    """Loop over query chunks: only ``(B, H, chunk, T)`` logits and bias exist at a time.

    With autograd on, each chunk runs under ``torch.utils.checkpoint``, so the backward
    recomputes a chunk's probabilities instead of keeping all of them: memory O(T * chunk).
    """
    length = inp.q.shape[-2]
    grad = needs_grad(inp)
    outputs = []
    for start in range(0, length, chunk_size):
        rows = slice(start, min(start + chunk_size, length))
        if grad:
            out = checkpoint(_chunk, inp, rows, use_reentrant=False)
        else:
            out = _chunk(inp, rows)
        outputs.append(out)
    return torch.cat(outputs, dim=-2)  # (B, H, T, Dv)


def _chunk(inp: AttentionInputs, rows: slice) -> Tensor:
    return _softmax_attend(inp.q[:, :, rows], inp.k, inp.v, logit_mask(inp, rows), inp.scale, inp.dropout)


def fused_attention(inp: AttentionInputs) -> Tensor:
    """Block-streamed attention with a recomputing backward (no ``(H, T, T)`` tensor)."""
    scheme = inp.scheme if adds_bias(inp.scheme) else None  # NoPE: plain attention
    return bias_attention(
        inp.q,
        inp.k,
        inp.v,
        scheme,
        causal=inp.causal,
        q_positions=inp.positions,
        k_positions=inp.positions,
        scale=inp.scale,
        key_mask=inp.key_mask,
    )  # (B, H, T, Dv)
