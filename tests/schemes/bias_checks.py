"""Checks shared by the learned / data-dependent bias schemes' tests (KERPLE, Sandwich, FIRE, CoPE, ...).

- :func:`check_self_attention`: ``SelfAttention`` with the scheme equals a hand-written
  ``softmax(q k^T / sqrt(D) + bias + mask) v`` on every backend that serves it, and trains;
- :func:`check_score_mod`: the FlexAttention ``score_mod`` evaluated on a broadcast grid equals
  the materialised bias, and (optionally) FlexAttention with it equals SDPA with the bias.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from posembed import SelfAttention
from tests.helpers import assert_close, max_abs_diff

ReferenceBias = Callable[[Tensor, Tensor], Tensor]


def reference_attention(attn: SelfAttention, x: Tensor, bias: Tensor, causal: bool) -> Tensor:
    """``softmax(q k^T / sqrt(D) + bias [+ causal mask]) v`` through the layer's own projections."""
    batch, length, dim = x.shape
    heads, head_dim = attn.num_heads, attn.head_dim

    def split(t: Tensor) -> Tensor:
        return t.view(batch, length, heads, head_dim).transpose(1, 2)  # (B, H, T, D)

    q, k, v = split(attn.q_proj(x)), split(attn.k_proj(x)), split(attn.v_proj(x))
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + bias
    if causal:
        scores = scores.masked_fill(~torch.ones(length, length, dtype=torch.bool).tril(), -math.inf)
    out = torch.softmax(scores, dim=-1) @ v  # (B, H, T, D)
    return attn.out_proj(out.transpose(1, 2).reshape(batch, length, dim))


def layer_qk(attn: SelfAttention, x: Tensor) -> tuple[Tensor, Tensor]:
    """The layer's projected ``(q, k)``, ``(B, H, T, D)`` each."""
    batch, length, _ = x.shape
    shape = (batch, length, attn.num_heads, attn.head_dim)
    return attn.q_proj(x).view(shape).transpose(1, 2), attn.k_proj(x).view(shape).transpose(1, 2)


def check_self_attention(
    make_scheme: Callable[[], torch.nn.Module],
    reference_bias: ReferenceBias,
    *,
    causal: bool,
    backends: tuple[str, ...],
    dim: int = 16,
    heads: int = 2,
    length: int = 6,
) -> None:
    """Forward on every backend equals the reference; backward reaches the scheme's parameters."""
    torch.manual_seed(0)
    x = torch.randn(2, length, dim)
    for backend in backends:
        torch.manual_seed(1)
        attn = SelfAttention(dim, heads, scheme=make_scheme(), causal=causal, backend=backend, chunk_size=4)
        q, k = layer_qk(attn, x)
        with torch.no_grad():
            expected = reference_attention(attn, x, reference_bias(q, k), causal)
            plain = reference_attention(attn, x, torch.zeros(()), causal)
        actual = attn(x)
        assert attn.backend_for(x) == backend, (backend, attn.backend_for(x))
        assert_close(actual.detach(), expected, atol=1e-5, rtol=1e-5, msg=f"backend {backend!r}")
        assert max_abs_diff(actual.detach(), plain) > 1e-4, "the bias did not change the output"
        actual.square().sum().backward()
        learned = [p for p in attn.scheme.parameters() if p.requires_grad]
        for param in learned:
            assert param.grad is not None and torch.isfinite(param.grad).all(), f"{backend}: no finite gradient"
        if learned:
            assert any(p.grad.abs().sum() > 0 for p in learned), f"{backend}: all scheme gradients are zero"


def grid(score_mod, batch: int, heads: int, q_len: int, k_len: int) -> Tensor:
    """A score_mod on every (b, h, q_idx, kv_idx) at once by broadcasting, from score 0."""
    b = torch.arange(batch).view(-1, 1, 1, 1)
    h = torch.arange(heads).view(1, -1, 1, 1)
    q_idx = torch.arange(q_len).view(1, 1, -1, 1)
    kv_idx = torch.arange(k_len).view(1, 1, 1, -1)
    return score_mod(torch.zeros(batch, heads, q_len, k_len), b, h, q_idx, kv_idx)


def check_score_mod(scheme, q_pos: Tensor, k_pos: Tensor, q: Tensor, k: Tensor, *, causal: bool, flex: bool) -> None:
    """Grid of the score_mod equals the bias; with ``flex``, FlexAttention equals SDPA with the bias."""
    with torch.no_grad():
        bias = scheme.bias(q_pos, k_pos, q, k)
        score_mod = scheme.score_mod(q_pos, k_pos, q, k)
        values = grid(score_mod, q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        assert_close(values, bias.expand_as(values), atol=1e-5, rtol=1e-5)
        assert bias.abs().max() > 0.01, "vacuous comparison"
        if not flex:
            return
        from torch.nn.attention.flex_attention import flex_attention

        v = torch.randn_like(k)
        offset = k.shape[2] - q.shape[2]
        if causal:  # queries at the end of the keys, as in a cache
            allowed = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(offset)
            bias = bias.masked_fill(~allowed, -math.inf)
            unmasked = score_mod

            def score_mod(score, b, h, q_idx, kv_idx):
                return torch.where(kv_idx <= q_idx + offset, unmasked(score, b, h, q_idx, kv_idx), -math.inf)

        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        actual = flex_attention(q, k, v, score_mod=score_mod)
        assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def captured_tensors(fn, seen=None) -> list[Tensor]:
    """Every tensor a closure captures, through nested closures."""
    seen = set() if seen is None else seen
    found = []
    for cell in getattr(fn, "__closure__", None) or ():
        value = cell.cell_contents
        if isinstance(value, Tensor):
            found.append(value)
        elif callable(value) and id(value) not in seen:
            seen.add(id(value))
            found.extend(captured_tensors(value, seen))
    return found


def check_score_mod_memory(scheme, heads: int, head_dim: int, per_token: int) -> None:
    """At T = 256 the score_mod holds at most ``H * T * per_token`` numbers per tensor: no ``T x T`` one."""
    length = 256
    pos = torch.arange(length)
    q, k = torch.randn(1, heads, length, head_dim), torch.randn(1, heads, length, head_dim)
    with torch.no_grad():
        tensors = captured_tensors(scheme.score_mod(pos, pos, q, k))
    assert tensors, "the closure should capture its small tables"
    assert max(t.numel() for t in tensors) <= heads * length * per_token < length * length
