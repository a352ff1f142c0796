"""posembed.kernels.cpu_matmul: the opt-in bf16 matrix products on the CPU, attention kept fp32."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from posembed.kernels.cpu_matmul import bf16_matmuls, bf16_matmuls_enabled, fp32_sdpa
from posembed.nn.attention.inputs import AttentionInputs
from posembed.nn.attention.kernels import sdpa_attention


def _qkv(seed: int = 0, shape=(3, 4, 64, 32)):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, requires_grad=True) for _ in range(3)]


def _attend(fn, q, k, v):
    out = fn(q, k, v)
    grads = torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum(), (q, k, v))
    return out.detach(), grads


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_under_bf16_matmuls_is_the_fp32_kernel_bit_for_bit(causal):
    """The lab's attention path (``sdpa_attention``) inside ``bf16_matmuls`` gives exactly the
    numbers of plain SDPA outside it, forward and gradients (old code: the CPU flash kernel ran
    its own products in bf16)."""
    q, k, v = _qkv()
    scale = 32**-0.5
    want = _attend(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal, scale=scale), q, k, v)
    positions = torch.arange(64)

    def lab(a, b, c):
        return sdpa_attention(AttentionInputs(q=a, k=b, v=c, scale=scale, causal=causal, positions=positions))

    with bf16_matmuls():
        got = _attend(lab, q, k, v)
    assert torch.equal(got[0], want[0])
    for g, w in zip(got[1], want[1]):
        assert torch.equal(g, w)


def test_fp32_sdpa_without_grad_and_with_some_inputs_frozen():
    q, k, v = _qkv(1)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with bf16_matmuls(), torch.no_grad():
        assert torch.equal(fp32_sdpa(q, k, v, causal=True, scale=None), want)
    frozen_k = k.detach()
    with bf16_matmuls():
        out = fp32_sdpa(q, frozen_k, v, causal=True, scale=None)
    gq, gv = torch.autograd.grad(out.sum(), (q, v))
    wq, wv = torch.autograd.grad(F.scaled_dot_product_attention(q, frozen_k, v, is_causal=True).sum(), (q, v))
    assert torch.equal(gq, wq) and torch.equal(gv, wv)


def test_bf16_matmuls_switches_and_restores_also_on_error():
    assert not bf16_matmuls_enabled()
    with pytest.raises(RuntimeError, match="boom"):
        with bf16_matmuls():
            assert bf16_matmuls_enabled()
            raise RuntimeError("boom")
    assert not bf16_matmuls_enabled()
    with bf16_matmuls(False):
        assert not bf16_matmuls_enabled()


def test_bf16_matmuls_rounds_products_within_bf16_precision():
    generator = torch.Generator().manual_seed(2)
    a, b = torch.randn(256, 128, generator=generator), torch.randn(128, 256, generator=generator)
    exact = a.double() @ b.double()
    with bf16_matmuls():
        rounded = a @ b
    scale = (a.double().abs() @ b.double().abs()).max()
    assert float((rounded.double() - exact).abs().max() / scale) < 2 * 2**-8


def test_bf16_matmuls_rejects_a_non_bool():
    with pytest.raises(TypeError, match="enabled must be a bool, got str"):
        with bf16_matmuls("yes"):
            pass
