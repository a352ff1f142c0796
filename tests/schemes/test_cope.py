"""CoPE (Golovneva et al. 2024): contextual positions by hand, x-transformers' CoPE, backends."""

import math

import pytest
import torch
from torch.func import functional_call

from posembed import SelfAttention
from posembed.schemes.bias.cope import CoPE
from tests.helpers import assert_close
from tests.schemes.bias_checks import check_self_attention


def loop_reference(q: torch.Tensor, k: torch.Tensor, pos_emb: torch.Tensor) -> torch.Tensor:
    """The paper's definitions written as loops: g_it, p_ij = sum_{t=j..i} g_it, q_i . e(p_ij)."""
    batch, heads, length, dim = q.shape
    npos = pos_emb.shape[0]
    out = torch.zeros(batch, heads, length, length, dtype=q.dtype)
    for i in range(length):
        gates = torch.sigmoid((q[:, :, i : i + 1] * k[:, :, : i + 1]).sum(-1) / math.sqrt(dim))  # (B, H, i + 1)
        for j in range(i + 1):
            p = gates[:, :, j:].sum(-1).clamp(max=npos - 1)  # (B, H)
            lo, hi = p.floor().long(), p.ceil().long()
            w = (p - p.floor()).unsqueeze(-1)
            embedding = pos_emb[lo] * (1 - w) + pos_emb[hi] * w  # (B, H, D)
            out[:, :, i, j] = (q[:, :, i] * embedding).sum(-1)
        out[:, :, i, i + 1 :] = (q[:, :, i : i + 1] * pos_emb[0]).sum(-1)  # p = 0 after the query
    return out


def make(pos_emb, heads=1) -> CoPE:
    pos_emb = torch.as_tensor(pos_emb, dtype=torch.float32)
    cope = CoPE(heads, pos_emb.shape[1], npos_max=pos_emb.shape[0])
    with torch.no_grad():
        cope.pos_emb.copy_(pos_emb)
    return cope


def test_three_by_three_by_hand():
    """k = 0: every gate is 1/2, so p_ij = (i - j + 1) / 2; e = (0, 1, 4), q = (1, 2, -1)."""
    cope = make([[0.0], [1.0], [4.0]])
    q = torch.tensor([1.0, 2.0, -1.0]).view(1, 1, 3, 1)
    k = torch.zeros(1, 1, 3, 1)
    positions = cope.positions(torch.arange(3), torch.arange(3), q, k)[0, 0]
    assert_close(positions, torch.tensor([[0.5, 0.0, 0.0], [1.0, 0.5, 0.0], [1.5, 1.0, 0.5]]))
    # q_i * interpolated e(p): e(0.5) = 0.5, e(1) = 1, e(1.5) = 2.5
    expected = torch.tensor([[0.5, 0.0, 0.0], [2.0, 1.0, 0.0], [-2.5, -1.0, -0.5]])
    assert_close(cope.bias(torch.arange(3), torch.arange(3), q, k)[0, 0].detach(), expected)
    clamped = make([[0.0], [1.0]])  # npos_max = 2: p = 1.5 becomes 1
    assert clamped.bias(torch.arange(3), torch.arange(3), q, k)[0, 0, 2, 0].item() == -1.0


def test_equals_loop_reference():
    cope = CoPE(2, 4, npos_max=4, init_std=1.0)
    q, k = torch.randn(2, 2, 7, 4) * 2, torch.randn(2, 2, 7, 4) * 2  # some p_ij reach the clamp
    pos = torch.arange(7)
    assert_close(cope.bias(pos, pos, q, k).detach(), loop_reference(q, k, cope.pos_emb.detach()))


def test_equals_x_transformers_cope():
    from x_transformers.x_transformers import CoPE as XCoPE

    heads, dim, length, npos = 2, 8, 9, 6
    ours = CoPE(heads, dim, npos_max=npos, init_std=1.0)
    theirs = XCoPE(dim, heads, npos)
    with torch.no_grad():
        theirs.pos_emb.copy_(ours.pos_emb)
    q, k = torch.randn(2, heads, length, dim), torch.randn(2, heads, length, dim)
    logits = q @ k.transpose(-1, -2) / math.sqrt(dim)
    masked = logits.masked_fill(~torch.ones(length, length, dtype=torch.bool).tril(), -torch.finfo(q.dtype).max)
    with torch.no_grad():
        assert_close(ours.bias(torch.arange(length), torch.arange(length), q, k), theirs(q, masked))


def test_gradcheck_float64():
    cope = CoPE(2, 3, npos_max=3, dtype=torch.float64)
    pos = torch.arange(4)
    q = torch.randn(1, 2, 4, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 4, 3, dtype=torch.float64, requires_grad=True)
    pos_emb = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)

    def f(q, k, pos_emb):
        return functional_call(cope, {"pos_emb": pos_emb}, (pos, pos, q, k))

    assert torch.autograd.gradcheck(f, (q, k, pos_emb))


def test_cache_rows_equal_the_full_bias():
    cope = CoPE(2, 4, npos_max=8, init_std=1.0)
    q, k = torch.randn(2, 2, 12, 4), torch.randn(2, 2, 12, 4)
    full = cope.bias(torch.arange(12), torch.arange(12), q, k)
    assert_close(cope.bias(torch.arange(9, 12), torch.arange(12), q[:, :, 9:], k), full[:, :, 9:])


def test_self_attention_equals_reference():
    pos_emb = torch.randn(5, 8)

    def make_scheme():
        cope = CoPE(2, 8, npos_max=5)
        with torch.no_grad():
            cope.pos_emb.copy_(pos_emb)
        return cope

    reference = lambda q, k: loop_reference(q, k, pos_emb)  # noqa: E731
    check_self_attention(make_scheme, reference, causal=True, backends=("sdpa", "eager", "chunked"))


def test_no_flex_view_and_refusals():
    cope = CoPE(2, 4, npos_max=4)
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(NotImplementedError, match="CoPE has no FlexAttention score_mod.*'sdpa', 'eager' or 'chunked'"):
        cope.score_mod(torch.arange(3), torch.arange(3), q, q)
    attn = SelfAttention(8, 2, scheme=cope, causal=True, backend="flex")
    with torch.no_grad(), pytest.raises(NotImplementedError, match="CoPE has no FlexAttention score_mod"):
        attn(torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="cannot serve bidirectional attention"):
        SelfAttention(8, 2, scheme=CoPE(2, 4, npos_max=4), causal=False)
    with pytest.raises(ValueError, match="CoPE reads the queries and keys"):
        cope.bias(torch.arange(3), torch.arange(3))
    assert (CoPE(2, 4, npos_max=4).pos_emb == 0).all()  # the paper's init
    assert repr(cope) == "CoPE(num_heads=2, head_dim=4, npos_max=4)"
