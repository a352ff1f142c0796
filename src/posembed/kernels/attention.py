"""Memory-efficient attention with a bias scheme: no ``(H, T, T)`` tensor, forward or backward.

The FlashAttention recipe (Dao et al. 2022) in blocks of query rows, in plain PyTorch:

- forward: per block of ``r`` query rows, logits ``(B, H, r, Tk)``, the scheme's bias for
  those rows only (ALiBi, T5: Press et al. 2022, Raffel et al. 2020), the row log-sum-exp and
  the output; only q, k, v, the output and the log-sum-exp ``(B, H, T)`` are saved;
- backward: per block, the probabilities are recomputed from the saved log-sum-exp and the
  gradients of q, k, v and of the scheme's parameters (T5's bucket table) are accumulated;
- causal: a block of rows ``[s, e)`` only looks at keys ``[0, e)``, so half the work of a dense
  masked kernel is skipped.

Peak memory is ``O(B H r Tk)`` instead of ``O(B H T Tk)``. It covers self- or cross-attention
with 1-D positions shared across the batch, an optional key padding mask (self-attention), no
attention dropout, and schemes whose bias does not read q/k (not Shaw ``relative_key``);
anything else belongs on the attention module's other backends.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from posembed._utils.torch_private import flash_cpu_ops
from posembed.kernels.masks import visible_keys
from posembed.schemes.base import BiasScheme

__all__ = ["bias_attention"]


def bias_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scheme: BiasScheme | None = None,
    *,
    causal: bool = False,
    q_positions: Tensor | None = None,
    k_positions: Tensor | None = None,
    block_size: int | None = None,
    scale: float | None = None,
    key_mask: Tensor | None = None,
) -> Tensor:
    """``softmax(scale * q k^T + bias + causal mask) v`` in query blocks, with a recomputing backward.

    Args:
        q, k, v: queries, keys, values.
        scheme: a bias scheme (``scheme.bias(q_pos, k_pos)`` gives ``(H, Tq, Tk)``), or ``None``.
        causal: key ``j`` is visible to query ``i`` only when ``j <= i`` (by index).
        q_positions, k_positions: ``(Tq,)`` / ``(Tk,)`` positions for the bias; default ``arange``.
        block_size: query rows per block (memory ``~ B * H * block_size * Tk`` floats); default
            512 on the fused-kernel path, 128 when the bias has parameters to train (that path
            keeps several block-sized temporaries and the bias's own graph alive at once).
        scale: logit scale; default ``1 / sqrt(D)``.
        key_mask: ``(B, Tk)`` bool, True for real tokens (self-attention only). Padding keys
            are hidden from every query except the one at their own index, so no row is empty
            (the rule of :func:`posembed.kernels.masks.visible_keys`).

    Shape:
        q ``(B, H, Tq, D)``, k ``(B, H, Tk, D)``, v ``(B, H, Tk, Dv)`` -> ``(B, H, Tq, Dv)``.

    >>> from posembed.schemes.bias.alibi import ALiBi
    >>> q, k, v = torch.randn(3, 1, 2, 5, 4).unbind(0)
    >>> out = bias_attention(q, k, v, ALiBi(2), causal=True, block_size=2)
    >>> bias = ALiBi(2).bias(torch.arange(5), torch.arange(5))
    >>> mask = torch.ones(5, 5, dtype=torch.bool).tril()
    >>> causal_bias = bias.masked_fill(~mask, -float("inf"))
    >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal_bias)
    >>> bool(torch.allclose(out, ref, atol=1e-6))
    True
    """
    _check(q, k, v, scheme, causal, block_size)
    _check_key_mask(key_mask, q, k)
    q_positions = torch.arange(q.shape[-2], device=q.device) if q_positions is None else q_positions
    k_positions = torch.arange(k.shape[-2], device=k.device) if k_positions is None else k_positions
    if q_positions.shape != (q.shape[-2],) or k_positions.shape != (k.shape[-2],):
        raise ValueError(
            f"q_positions {tuple(q_positions.shape)} and k_positions {tuple(k_positions.shape)} must be "
            f"({q.shape[-2]},) and ({k.shape[-2]},): 1-D positions shared across the batch"
        )
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    params = [p for p in scheme.parameters() if p.requires_grad] if scheme is not None else []
    if block_size is None:
        block_size = 512 if _use_flash(q, tuple(params)) else 128
    plan = _Plan(scheme, causal, block_size, scale, q_positions, k_positions, key_mask)
    return _BiasAttention.apply(q, k, v, plan, *params)


def _check_key_mask(key_mask: Tensor | None, q: Tensor, k: Tensor) -> None:
    if key_mask is None:
        return
    if key_mask.dtype != torch.bool:
        raise TypeError(f"key_mask must be a bool tensor (True = real token), got {key_mask.dtype}")
    if key_mask.shape != (k.shape[0], k.shape[-2]):
        raise ValueError(
            f"key_mask has shape {tuple(key_mask.shape)}; expected (B, Tk) = ({k.shape[0]}, {k.shape[-2]})"
        )
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"key_mask needs self-attention (Tq == Tk), got Tq={q.shape[-2]} and Tk={k.shape[-2]}")


def _check(q: Tensor, k: Tensor, v: Tensor, scheme, causal: bool, block_size: int | None) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be (B, H, T, D); got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape[:3] != v.shape[:3] or q.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not fit together")
    if scheme is not None and (not isinstance(scheme, BiasScheme) or scheme.needs_qk):
        raise TypeError(f"bias_attention takes a bias scheme that does not read q/k, got {type(scheme).__name__}")
    if scheme is not None and scheme.adds_bias and scheme.num_heads != q.shape[1]:  # NoPE: no bias, no heads
        raise ValueError(f"{type(scheme).__name__} has num_heads={scheme.num_heads} but q has {q.shape[1]} heads")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal attention needs Tq == Tk, got {q.shape[-2]} and {k.shape[-2]}")
    if block_size is not None and (isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1):
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")


class _Plan:
    """The non-tensor arguments, and the per-block logits both passes share."""

    def __init__(self, scheme, causal, block_size, scale, q_positions, k_positions, key_mask=None):
        self.scheme, self.causal, self.block_size, self.scale = scheme, causal, block_size, scale
        self.q_positions, self.k_positions, self.key_mask = q_positions, k_positions, key_mask

    def batches(self, batch: int) -> list[slice]:
        """The fused kernel runs the whole batch at once, or row by row when a padding mask
        differs per row (a per-row additive mask would hold ``B`` times the block's bias)."""
        if self.key_mask is None:
            return [slice(None)]
        return [slice(b, b + 1) for b in range(batch)]

    def hidden(self, start: int, stop: int, kend: int, rows: slice = slice(None)) -> Tensor | None:
        """Bool ``(B|1, 1, r, kend)``: True where query ``i`` may not see key ``j`` (causal, padding)."""
        if not self.causal and self.key_mask is None:
            return None
        q_idx = torch.arange(start, stop, device=self.q_positions.device)
        key_mask = None if self.key_mask is None else self.key_mask[rows]
        return ~visible_keys(q_idx, kend, self.causal, key_mask)

    def blocks(self, length: int, keys: int):
        for start in range(0, length, self.block_size):
            stop = min(start + self.block_size, length)
            yield start, stop, (stop if self.causal else keys)

    def bias(self, start: int, stop: int, kend: int) -> Tensor | None:
        if self.scheme is None:
            return None
        return self.scheme.bias(self.q_positions[start:stop], self.k_positions[:kend])  # (H, r, kend)

    def logits(self, q_blk: Tensor, k: Tensor, start: int, stop: int, kend: int, bias: Tensor | None) -> Tensor:
        scores = torch.matmul(q_blk, k[:, :, :kend].transpose(-1, -2)).mul_(self.scale)  # (B, H, r, kend)
        if bias is not None:
            scores += bias.to(scores.dtype)
        hidden = self.hidden(start, stop, kend)
        if hidden is not None:
            scores.masked_fill_(hidden, float("-inf"))
        return scores

    def mask(self, start: int, stop: int, kend: int, like: Tensor, rows: slice = slice(None)) -> Tensor | None:
        """Bias plus ``-inf`` where hidden, for one block (and batch ``rows``): ``(1, H|1, r, kend)``."""
        bias = self.bias(start, stop, kend)
        mask = None if bias is None else bias.to(like.dtype)[None]
        hidden = self.hidden(start, stop, kend, rows)
        if hidden is not None:
            mask = (like.new_zeros(()) if mask is None else mask).masked_fill(hidden, float("-inf"))
        return mask


def _use_flash(q: Tensor, params: tuple) -> bool:
    """PyTorch's fused CPU kernel per block, when no bias parameter needs a gradient from it and
    this torch has the kernel (:func:`posembed._utils.torch_private.flash_cpu_ops`)."""
    return (
        q.device.type == "cpu"
        and q.dtype in (torch.float32, torch.bfloat16)
        and not params
        and flash_cpu_ops() is not None
    )


class _BiasAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, plan: _Plan, *params):
        ctx.plan, ctx.flash = plan, _use_flash(q, params)
        if ctx.flash:
            return _flash_forward(ctx, q, k, v, plan)
        out = q.new_empty(*q.shape[:-1], v.shape[-1])  # (B, H, Tq, Dv)
        lse = q.new_empty(q.shape[:-1])  # (B, H, Tq)
        for start, stop, kend in plan.blocks(q.shape[-2], k.shape[-2]):
            scores = plan.logits(q[:, :, start:stop], k, start, stop, kend, plan.bias(start, stop, kend))
            lse[:, :, start:stop] = torch.logsumexp(scores, dim=-1)
            probs = scores.sub_(lse[:, :, start:stop, None]).exp_()
            torch.matmul(probs, v[:, :, :kend], out=out[:, :, start:stop])
        ctx.save_for_backward(q, k, v, out, lse, *params)
        ctx.plan = plan
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.flash:
            return _flash_backward(ctx, grad_out.contiguous())
        q, k, v, out, lse, *params = ctx.saved_tensors
        plan = ctx.plan
        grad_out = grad_out.contiguous()
        delta = (grad_out * out).sum(-1)  # (B, H, Tq): rowsum(dO * O)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dparams = [torch.zeros_like(p) for p in params]
        for start, stop, kend in plan.blocks(q.shape[-2], k.shape[-2]):
            with torch.enable_grad():
                bias = plan.bias(start, stop, kend)
            q_blk, g_blk = q[:, :, start:stop], grad_out[:, :, start:stop]
            probs = plan.logits(q_blk, k, start, stop, kend, None if bias is None else bias.detach())
            probs = probs.sub_(lse[:, :, start:stop, None]).exp_()  # (B, H, r, kend)
            dv[:, :, :kend] += torch.matmul(probs.transpose(-1, -2), g_blk)
            dscores = torch.matmul(g_blk, v[:, :, :kend].transpose(-1, -2))
            dscores = dscores.sub_(delta[:, :, start:stop, None]).mul_(probs)  # dS = P * (dP - delta)
            if dparams:
                for total, part in zip(dparams, torch.autograd.grad(bias, params, dscores.sum(0).to(bias.dtype))):
                    total += part
            dq[:, :, start:stop] = torch.matmul(dscores, k[:, :, :kend]).mul_(plan.scale)
            dk[:, :, :kend] += torch.matmul(dscores.transpose(-1, -2), q_blk).mul_(plan.scale)
        return (dq, dk, dv, None, *dparams)


def _flash_forward(ctx, q: Tensor, k: Tensor, v: Tensor, plan: _Plan) -> Tensor:
    out = q.new_empty(*q.shape[:-1], v.shape[-1])  # (B, H, Tq, Dv)
    lses = []
    for start, stop, kend in plan.blocks(q.shape[-2], k.shape[-2]):
        for b in plan.batches(q.shape[0]):
            mask = plan.mask(start, stop, kend, q, b)
            block, lse = flash_cpu_ops()[0](
                q[b, :, start:stop], k[b, :, :kend], v[b, :, :kend], attn_mask=mask, scale=plan.scale
            )
            out[b, :, start:stop] = block
            lses.append(lse)
    ctx.save_for_backward(q, k, v, out, *lses)
    return out


def _flash_backward(ctx, grad_out: Tensor):
    q, k, v, out, *lses = ctx.saved_tensors
    plan = ctx.plan
    dq, dk, dv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
    blocks = [
        (start, stop, kend, b)
        for start, stop, kend in plan.blocks(q.shape[-2], k.shape[-2])
        for b in plan.batches(q.shape[0])
    ]
    for (start, stop, kend, b), lse in zip(blocks, lses):
        rows = slice(start, stop)
        dq_blk, dk_part, dv_part = flash_cpu_ops()[1](
            grad_out[b, :, rows],
            q[b, :, rows],
            k[b, :, :kend],
            v[b, :, :kend],
            out[b, :, rows],
            lse,
            0.0,
            False,
            attn_mask=plan.mask(start, stop, kend, q, b),
            scale=plan.scale,
        )
        dq[b, :, rows] = dq_blk
        dk[b, :, :kend] += dk_part
        dv[b, :, :kend] += dv_part
    return (dq, dk, dv, None)
