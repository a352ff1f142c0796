"""Layout converter: a converted q/k projection with interleaved RoPE gives the original logits."""

import pytest
import torch

from posembed import RotaryEmbedding
from posembed.schemes.rotary.layout import half_to_interleaved_qk_weight, interleaved_to_half_qk_weight
from tests.helpers import assert_close

HEADS, D, C, T = 3, 8, 24, 7


def _logits(x, wq, wk, bq, bk, rope, heads=HEADS, head_dim=D):
    def project(w, b):
        return (x @ w.t() + b).view(1, T, heads, head_dim).transpose(1, 2)  # (B, H, T, D)

    q, k = rope(project(wq, bq), project(wk, bk))
    return q @ k.transpose(-1, -2)


@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_half_to_interleaved_keeps_attention_logits(rotary_dim):
    x = torch.randn(1, T, C)
    wq, wk = torch.randn(HEADS * D, C), torch.randn(HEADS * D, C)
    bq, bk = torch.randn(HEADS * D), torch.randn(HEADS * D)
    half = RotaryEmbedding(D, rotary_dim=rotary_dim, layout="half")
    inter = RotaryEmbedding(D, rotary_dim=rotary_dim, layout="interleaved")
    convert = lambda w: half_to_interleaved_qk_weight(w, HEADS, D, rotary_dim=rotary_dim)  # noqa: E731
    expected = _logits(x, wq, wk, bq, bk, half)
    actual = _logits(x, convert(wq), convert(wk), convert(bq), convert(bk), inter)
    assert_close(actual, expected, atol=1e-5)
    # and the logits really depend on the layout: unconverted weights give others
    assert not torch.allclose(_logits(x, wq, wk, bq, bk, inter), expected, atol=1e-3)


def test_interleaved_to_half_keeps_attention_logits_and_round_trips():
    x = torch.randn(1, T, C)
    wq, wk, zero = torch.randn(HEADS * D, C), torch.randn(HEADS * D, C), torch.zeros(HEADS * D)
    meta_logits = _logits(x, wq, wk, zero, zero, RotaryEmbedding(D, layout="interleaved"))
    hf_q, hf_k = interleaved_to_half_qk_weight(wq, HEADS, D), interleaved_to_half_qk_weight(wk, HEADS, D)
    assert_close(_logits(x, hf_q, hf_k, zero, zero, RotaryEmbedding(D)), meta_logits, atol=1e-5)
    assert torch.equal(half_to_interleaved_qk_weight(hf_q, HEADS, D), wq)


def test_matches_transformers_convert_script_permutation():
    """convert_llama_weights_to_hf: w.view(H, D/2, 2, C).transpose(1, 2).reshape(H*D, C)."""
    w = torch.randn(HEADS * D, C)
    expected = w.view(HEADS, D // 2, 2, C).transpose(1, 2).reshape(HEADS * D, C)
    assert torch.equal(interleaved_to_half_qk_weight(w, HEADS, D), expected)


def test_bad_shapes():
    with pytest.raises(ValueError, match=r"weight has shape \(20, 4\); expected .* = \(24, ...\) rows"):
        half_to_interleaved_qk_weight(torch.zeros(20, 4), HEADS, D)
    with pytest.raises(ValueError, match="rotary_dim must be even and <= head_dim=8, got 10"):
        half_to_interleaved_qk_weight(torch.zeros(24, 4), HEADS, D, rotary_dim=10)
