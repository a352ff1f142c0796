"""xPos: parity with rotary-embedding-torch (use_xpos=True), relative invariance, causal-only error."""

import pytest
import torch

from posembed import RotaryEmbedding, XPos
from posembed.schemes.base import SCHEMES
from posembed.schemes.rotary.xpos import xpos_zeta
from tests.helpers import assert_close, max_abs_diff

D = 16


def test_registered_and_zeta_formula():
    assert SCHEMES["xpos"] is XPos
    expected = torch.tensor([(2 * i + 0.4 * D) / (1.4 * D) for i in range(D // 2)])
    assert_close(xpos_zeta(D), expected)
    assert_close(XPos(D).zeta, expected)


@pytest.mark.parametrize("length, rotary_dim, scale_base", [(12, D, 512), (33, 8, 16)])
def test_matches_rotary_embedding_torch(length, rotary_dim, scale_base):
    ret = pytest.importorskip("rotary_embedding_torch")
    reference = ret.RotaryEmbedding(dim=rotary_dim, use_xpos=True, xpos_scale_base=scale_base)
    q, k = torch.randn(2, 3, length, D), torch.randn(2, 3, length, D)
    q_ref, k_ref = reference.rotate_queries_and_keys(q, k)
    q_rot, k_rot = XPos(D, rotary_dim=rotary_dim, scale_base=scale_base)(q, k)
    assert_close(q_rot, q_ref)
    assert_close(k_rot, k_ref)
    assert max(max_abs_diff(q_rot, q_ref), max_abs_diff(k_rot, k_ref)) <= 1e-5


def test_explicit_and_shifted_positions_give_the_same_logits():
    xpos = XPos(D, scale_base=32)
    q, k = torch.randn(1, 2, 10, D), torch.randn(1, 2, 10, D)
    default = xpos(q, k)
    logits = default[0] @ default[1].transpose(-1, -2)
    for positions in (torch.arange(10), torch.arange(10) + 1000):
        q_rot, k_rot = xpos(q, k, positions)
        assert_close(q_rot @ k_rot.transpose(-1, -2), logits, atol=1e-4, rtol=1e-4)


def test_logits_decay_relative_to_rope():
    """Pair i of the logit q_n . k_m carries zeta_i^((n - m)/B) on top of RoPE's rotation."""
    scale_base, length = 8, 6
    xpos, rope = XPos(D, scale_base=scale_base), RotaryEmbedding(D, layout="interleaved")
    q, k = torch.randn(1, 1, length, D), torch.randn(1, 1, length, D)
    q_x, k_x = xpos(q, k)
    q_r, k_r = rope(q, k)

    def pair(a, b):  # (..., D/2) per-pair products
        return (a * b).unflatten(-1, (D // 2, 2)).sum(-1)

    n, m = 5, 1
    decay = xpos.zeta ** ((n - m) / scale_base)
    assert_close(pair(q_x[0, 0, n], k_x[0, 0, m]), pair(q_r[0, 0, n], k_r[0, 0, m]) * decay)


def test_causal_only():
    xpos = XPos(D)
    xpos.check_attention(num_heads=4, head_dim=D, causal=True)
    with pytest.raises(ValueError, match="XPos is causal only"):
        xpos.check_attention(num_heads=4, head_dim=D, causal=False)
    with pytest.raises(ValueError, match="head_dim=16, but the attention layer has head_dim=8"):
        xpos.check_attention(num_heads=4, head_dim=8, causal=True)


def test_cached_keys_match_full_sequence():
    xpos = XPos(D, scale_base=16, max_len=4)
    q, k = torch.randn(1, 2, 9, D), torch.randn(1, 2, 9, D)
    full = xpos(q, k, torch.arange(9))
    last = xpos(q[..., -1:, :], k, torch.tensor([8]), torch.arange(9))
    assert_close(last[0], full[0][..., -1:, :])
    assert_close(last[1], full[1])


def test_bad_arguments_and_meta_init():
    with pytest.raises(ValueError, match="scale_base must be positive"):
        XPos(D, scale_base=0)
    with pytest.raises(ValueError, match="head_dim must be even"):
        XPos(9)
    meta = XPos(D, device="meta")
    meta.to_empty(device="cpu")
    meta.reset_parameters()
    assert torch.equal(meta.zeta, XPos(D).zeta) and torch.equal(meta.inv_freq, XPos(D).inv_freq)
    cast = XPos(D).to(torch.bfloat16)
    assert cast.zeta.dtype == torch.float32 and torch.equal(cast.zeta, XPos(D).zeta)
    assert repr(XPos(8)) == "XPos(head_dim=8, base=10000, layout='interleaved', scale_base=512)"
