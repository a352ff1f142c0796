"""SelfAttention's softmax scale: one number (``softmax_scale``), explicit or declared by the scheme,
applied by every backend; float64 attention stays float64."""

from __future__ import annotations

import math

import pytest
import torch

from posembed.nn.attention.layer import SelfAttention
from posembed.nn.model.transformer import Block
from posembed.schemes.base import PositionScheme
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.bias.deberta import DebertaRelative
from posembed.schemes.rotary.rope import RotaryEmbedding
from tests.helpers import assert_close

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

DIM, HEADS, HEAD_DIM, LENGTH = 16, 2, 8, 7


def hand_written(attn: SelfAttention, x: torch.Tensor, scale: float, mask: torch.Tensor, positions: torch.Tensor):
    """``softmax(scale q k^T + ALiBi bias + causal and padding masks) v`` through the layer's projections."""
    batch = x.shape[0]

    def heads(t):
        return t.view(batch, LENGTH, HEADS, HEAD_DIM).transpose(1, 2)  # (B, H, T, D)

    q, k, v = heads(attn.q_proj(x)), heads(attn.k_proj(x)), heads(attn.v_proj(x))
    if isinstance(attn.scheme, RotaryEmbedding):
        q, k = attn.scheme(q, k, positions)
    scores = q @ k.transpose(-1, -2) * scale  # (B, H, T, T)
    if isinstance(attn.scheme, ALiBi):
        scores = scores + attn.scheme.bias(positions, positions)
    i = torch.arange(LENGTH)
    allowed = (i[None, :] <= i[:, None]) & mask.bool()[:, None, None, :]
    allowed = allowed | torch.eye(LENGTH, dtype=torch.bool)  # a query always sees itself
    scores = scores.masked_fill(~allowed, float("-inf"))
    return attn.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, LENGTH, DIM))


@pytest.mark.parametrize("scheme_id", ["none", "rope", "alibi"])
def test_explicit_scale_on_every_backend(scheme_id):
    scheme = {"none": None, "rope": RotaryEmbedding(HEAD_DIM), "alibi": ALiBi(HEADS)}[scheme_id]
    scale = 0.9  # far from 1/sqrt(8) = 0.35: a backend that ignored it would be off
    attn = SelfAttention(DIM, HEADS, scheme=scheme, causal=True, scale=scale, chunk_size=3)
    assert attn.softmax_scale == scale
    x = torch.randn(3, LENGTH, DIM)
    mask = torch.ones(3, LENGTH, dtype=torch.long)
    mask[1, :2], mask[2, -3:] = 0, 0  # left and right padding
    positions = torch.arange(LENGTH)
    with torch.no_grad():
        expected = hand_written(attn, x, scale, mask, positions)
        default = hand_written(attn, x, 1 / math.sqrt(HEAD_DIM), mask, positions)
        assert (expected - default).abs().max() > 1e-3, "vacuous: the scale changed nothing"
        backends = ("eager", "sdpa", "chunked", "flex") + (("fused",) if scheme_id == "alibi" else ())
        for backend in backends:
            attn.backend = backend
            out = attn(x, attention_mask=mask)
            assert attn.backend_for(x, attention_mask=mask) == backend
            real = mask.bool()
            assert_close(out[real], expected[real], atol=1e-5, rtol=1e-5, msg=backend)


def test_default_scale_and_who_decides_it():
    assert SelfAttention(DIM, HEADS).softmax_scale == 1 / math.sqrt(HEAD_DIM)
    assert SelfAttention(DIM, HEADS, scheme=ALiBi(HEADS), causal=True).softmax_scale == 1 / math.sqrt(HEAD_DIM)
    assert SelfAttention(DIM, HEADS, untied_dim=4).softmax_scale == 1 / math.sqrt(2 * HEAD_DIM)  # TUPE
    assert SelfAttention(DIM, HEADS, untied_dim=4, scale=0.5).softmax_scale == 0.5  # explicit wins
    deberta = DebertaRelative(DIM, HEADS, HEAD_DIM, position_buckets=4, max_relative_positions=16)
    assert SelfAttention(DIM, HEADS, scheme=deberta).softmax_scale == deberta.scale == 1 / math.sqrt(3 * HEAD_DIM)
    assert SelfAttention(DIM, HEADS, scheme=deberta, scale=0.25).softmax_scale == 0.25
    assert PositionScheme.attention_scale(ALiBi(HEADS), 9) == 1 / 3
    block = Block(DIM, HEADS, scale=0.5)  # Block hands attention options through
    assert block.attn.softmax_scale == 0.5 and "scale=0.5" in repr(block.attn)
    assert "scale" not in repr(SelfAttention(DIM, HEADS))


def test_untied_with_explicit_scale_scales_both_terms():
    attn = SelfAttention(DIM, HEADS, untied_dim=6, causal=True, backend="eager", scale=0.3)
    x, p = torch.randn(2, LENGTH, DIM), torch.randn(LENGTH, 6)

    def heads(t):
        return t.view(-1, LENGTH, HEADS, HEAD_DIM).transpose(1, 2)

    q, k, v = heads(attn.q_proj(x)), heads(attn.k_proj(x)), heads(attn.v_proj(x))
    scores = (q @ k.transpose(-1, -2) + heads(attn.pos_q(p)) @ heads(attn.pos_k(p)).transpose(-1, -2)) * 0.3
    i = torch.arange(LENGTH)
    scores = scores.masked_fill(i[None, :] > i[:, None], float("-inf"))
    expected = attn.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, LENGTH, DIM))
    with torch.no_grad():
        assert_close(attn(x, position_vectors=p), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "scale,error,match",
    [
        (0.0, ValueError, "scale must be a finite number > 0.*got 0.0"),
        (-0.5, ValueError, "scale must be a finite number >= 0.0, got -0.5"),
        (float("nan"), ValueError, "scale must be a finite number"),
        (float("inf"), ValueError, "scale must be a finite number"),
        ("0.5", TypeError, "scale must be a number, got '0.5'"),
        (True, TypeError, "scale must be a number, got True"),
    ],
)
def test_bad_scale(scale, error, match):
    with pytest.raises(error, match=match):
        SelfAttention(DIM, HEADS, scale=scale)


def test_float64_attention_stays_float64():
    """The eager and chunked backends' softmax upcasts half types to float32 but never rounds float64 down."""
    attn = SelfAttention(DIM, HEADS, scheme=ALiBi(HEADS), causal=True, dtype=torch.float64, chunk_size=3)
    x = torch.randn(2, LENGTH, DIM, dtype=torch.float64)
    mask = torch.tensor([[1] * LENGTH, [0, 0] + [1] * (LENGTH - 2)])
    with torch.no_grad():
        expected = hand_written(attn, x, 1 / math.sqrt(HEAD_DIM), mask, torch.arange(LENGTH))
        for backend in ("eager", "chunked", "sdpa"):
            attn.backend = backend
            out = attn(x, attention_mask=mask)
            assert out.dtype == torch.float64
            real = mask.bool()
            assert_close(out[real], expected[real], msg=backend)  # float64: 1e-10
