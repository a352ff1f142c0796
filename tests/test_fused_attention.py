"""posembed.kernels.attention against the materialised reference softmax(q k^T / sqrt(D) + bias) v."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.kernels.attention import bias_attention
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.bias.t5 import T5RelativeBias
from tests.helpers import assert_close

B, H, T, D = 2, 4, 37, 8


def _bias_by_hand(scheme, length: int) -> torch.Tensor:
    """``(H, T, T)`` bias written here, not read from ``scheme.bias``: ALiBi from the paper's slopes
    ``2^(-8 h / H)``, T5 from transformers' bucket function and the scheme's table (differentiable)."""
    i = torch.arange(length).view(-1, 1)
    j = torch.arange(length).view(1, -1)
    if isinstance(scheme, ALiBi):
        heads = scheme.num_heads
        slopes = torch.tensor([2.0 ** (-8.0 * h / heads) for h in range(1, heads + 1)]).view(-1, 1, 1)
        distance = -(j - i).abs() if scheme.symmetric else (j - i)
        return slopes * distance.float()
    from transformers.models.t5.modeling_t5 import T5Attention

    buckets = T5Attention._relative_position_bucket(
        j - i, bidirectional=scheme.bidirectional, num_buckets=scheme.num_buckets, max_distance=scheme.max_distance
    )
    return scheme.weight[buckets].permute(2, 0, 1)


def test_bias_by_hand_hand_values():
    assert _bias_by_hand(ALiBi(2), 3)[0].tolist() == [
        [0.0, 0.0625, 0.125],
        [-0.0625, 0.0, 0.0625],
        [-0.125, -0.0625, 0.0],
    ]
    assert _bias_by_hand(ALiBi(2, symmetric=True), 2)[1].tolist() == [[0.0, -(2.0**-8)], [-(2.0**-8), 0.0]]


def _reference(q, k, v, scheme, causal, key_mask=None):
    logits = q @ k.transpose(-1, -2) / D**0.5 + _bias_by_hand(scheme, T)  # (B, H, T, T)
    if causal:
        logits = logits.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    if key_mask is not None:  # padding keys hidden, except from the query at their own index
        hidden = ~key_mask[:, None, None, :] & ~torch.eye(T, dtype=torch.bool)
        logits = logits.masked_fill(hidden, float("-inf"))
    return logits.softmax(-1) @ v


def _run(fn, q, k, v, scheme, grad):
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    params = [p for p in scheme.parameters() if p.requires_grad]
    out = fn(*inputs)
    grads = torch.autograd.grad(out, inputs + params, grad)
    return out.detach(), grads


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    "make_scheme", [ALiBi, lambda h: T5RelativeBias(h, bidirectional=False, num_buckets=8, max_distance=16)]
)
@pytest.mark.parametrize("frozen", [False, True])
def test_matches_materialised_attention_forward_and_gradients(causal, make_scheme, frozen):
    """Both paths: PyTorch's fused CPU kernel per block (no bias gradient) and the eager blocks (T5 learning)."""
    scheme = make_scheme(H)
    scheme.requires_grad_(not frozen)
    q, k, v, grad = torch.randn(4, B, H, T, D).unbind(0)
    out, grads = _run(lambda *x: bias_attention(*x, scheme, causal=causal, block_size=10), q, k, v, scheme, grad)
    expected, expected_grads = _run(lambda *x: _reference(*x, scheme, causal), q, k, v, scheme, grad)
    assert_close(out, expected, atol=2e-6)
    assert len(grads) == len(expected_grads) == 3 + sum(p.requires_grad for p in scheme.parameters())
    for actual, wanted in zip(grads, expected_grads):
        assert_close(actual, wanted, atol=1e-5)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("learned_bias", [False, True])
def test_key_padding_mask_matches_materialised_attention(causal, learned_bias):
    """Padded rows (left- and right-padded) on both paths: fused kernel per row, eager blocks."""
    scheme = T5RelativeBias(H, bidirectional=not causal, num_buckets=8, max_distance=16) if learned_bias else ALiBi(H)
    key_mask = torch.ones(B, T, dtype=torch.bool)
    key_mask[0, -9:] = False  # right padding
    key_mask[1, :5] = False  # left padding
    q, k, v, grad = torch.randn(4, B, H, T, D).unbind(0)
    out, grads = _run(
        lambda *x: bias_attention(*x, scheme, causal=causal, block_size=10, key_mask=key_mask), q, k, v, scheme, grad
    )
    expected, expected_grads = _run(lambda *x: _reference(*x, scheme, causal, key_mask), q, k, v, scheme, grad)
    assert torch.isfinite(out).all()
    assert_close(out, expected, atol=2e-6)
    for actual, wanted in zip(grads, expected_grads):
        assert_close(actual, wanted, atol=1e-5)


def test_block_size_does_not_change_the_result():
    q, k, v = torch.randn(3, B, H, T, D).unbind(0)
    one = bias_attention(q, k, v, ALiBi(H), causal=True, block_size=T)
    for block in (1, 7, 16):
        assert_close(bias_attention(q, k, v, ALiBi(H), causal=True, block_size=block), one, atol=2e-6)


def test_no_scheme_equals_sdpa():
    q, k, v = torch.randn(3, B, H, T, D).unbind(0)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(bias_attention(q, k, v, None, causal=True, block_size=8), expected, atol=2e-6)


def test_nope_adds_no_bias_and_equals_sdpa():
    """NoPE declares no bias and no head count: the kernel runs it as plain attention, not a head-count error."""
    from posembed.schemes.bias.nope import NoPE

    q, k, v = torch.randn(3, B, H, T, D).unbind(0)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(bias_attention(q, k, v, NoPE(), causal=True, block_size=8), expected, atol=2e-6)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"q": torch.randn(B, H, T)}, ValueError, r"must be \(B, H, T, D\)"),
        ({"k": torch.randn(B, H, T, D + 1)}, ValueError, "do not fit together"),
        ({"scheme": ALiBi(H + 1)}, ValueError, "num_heads=5 but q has 4 heads"),
        ({"scheme": torch.nn.Linear(2, 2)}, TypeError, "takes a bias scheme"),
        ({"block_size": 0}, ValueError, "block_size must be a positive int, got 0"),
        ({"q_positions": torch.arange(T + 1)}, ValueError, "1-D positions shared across the batch"),
        (
            {"k": torch.randn(B, H, T + 1, D), "v": torch.randn(B, H, T + 1, D)},
            ValueError,
            "causal attention needs Tq == Tk",
        ),
        ({"key_mask": torch.ones(B, T)}, TypeError, "key_mask must be a bool tensor"),
        (
            {"key_mask": torch.ones(B, T - 1, dtype=torch.bool)},
            ValueError,
            r"key_mask has shape \(2, 36\); expected \(B, Tk\) = \(2, 37\)",
        ),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, error, match):
    args = {
        "q": torch.randn(B, H, T, D),
        "k": torch.randn(B, H, T, D),
        "v": torch.randn(B, H, T, D),
        "scheme": ALiBi(H),
    }
    args |= kwargs
    with pytest.raises(error, match=match):
        bias_attention(args.pop("q"), args.pop("k"), args.pop("v"), args.pop("scheme"), causal=True, **args)


@settings(max_examples=15, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 11), min_size=1, max_size=3),
    causal=st.booleans(),
    left=st.booleans(),
    block=st.integers(1, 12),
    seed=st.integers(0, 2**16),
)
def test_property_any_padding_and_block_size_matches_the_reference(lengths, causal, left, block, seed):
    """Rows of any real length (left- or right-padded), any block size: the masked softmax."""
    g = torch.Generator().manual_seed(seed)
    batch, length, heads = len(lengths), 11, 2
    key_mask = torch.zeros(batch, length, dtype=torch.bool)
    for row, real in enumerate(lengths):
        if left:
            key_mask[row, length - real :] = True
        else:
            key_mask[row, :real] = True
    q, k, v = torch.randn(3, batch, heads, length, 4, generator=g).unbind(0)
    scheme = ALiBi(heads, symmetric=not causal)
    logits = q @ k.transpose(-1, -2) / 2.0 + _bias_by_hand(scheme, length)
    hidden = ~key_mask[:, None, None, :] & ~torch.eye(length, dtype=torch.bool)
    if causal:
        hidden = hidden | torch.ones(length, length, dtype=torch.bool).triu(1)
    expected = logits.masked_fill(hidden, float("-inf")).softmax(-1) @ v
    actual = bias_attention(q, k, v, scheme, causal=causal, block_size=block, key_mask=key_mask)
    assert_close(actual, expected, atol=2e-6)
