"""FoX forgetting gates read off the keys: hand values, x-transformers' DataDependentAlibi, backends."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from posembed import SelfAttention
from posembed.schemes.bias.forgetting import ForgettingGate
from tests.helpers import assert_close
from tests.schemes.bias_checks import check_score_mod, check_score_mod_memory, check_self_attention

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def loop_reference(k: torch.Tensor, weight: torch.Tensor, gate_bias: torch.Tensor) -> torch.Tensor:
    """b_ij = sum_{t=j+1..i} log sigmoid(w_h . k_t + b_h) for j <= i, written as a loop (0 above the diagonal)."""
    batch, heads, length, _ = k.shape
    log_f = F.logsigmoid(torch.einsum("bhtd,hd->bht", k, weight) + gate_bias.view(-1, 1))
    out = torch.zeros(batch, heads, length, length, dtype=k.dtype)
    for i in range(length):
        for j in range(i):
            out[:, :, i, j] = log_f[:, :, j + 1 : i + 1].sum(-1)
    return out


def test_three_by_three_by_hand():
    """Gates 1/2, 3/4, 1/4 (w = (1, 0), b = 0, first key coordinates 0, ln 3, -ln 3)."""
    fox = ForgettingGate(1, 2, bias_init=0.0)
    with torch.no_grad():
        fox.weight.copy_(torch.tensor([[1.0, 0.0]]))
    k = torch.tensor([[[[0.0, 5.0], [math.log(3), -1.0], [-math.log(3), 2.0]]]])
    bias = fox.bias(torch.arange(3), torch.arange(3), k, k)[0, 0].detach()
    expected = torch.tensor([[0.0, 0.0, 0.0], [math.log(3 / 4), 0.0, 0.0], [math.log(3 / 16), math.log(1 / 4), 0.0]])
    assert_close(bias.tril(), expected)
    assert_close(bias.triu(1), -bias.tril(-1).T)  # above the diagonal: c_i - c_j, masked by causal attention


def test_equals_x_transformers_data_dependent_alibi():
    """DataDependentAlibi on x = (k of all heads) with a block-diagonal gate equals the key-read gate."""
    from x_transformers.x_transformers import DataDependentAlibi

    heads, head_dim, length = 3, 4, 7
    fox = ForgettingGate(heads, head_dim)
    with torch.no_grad():
        fox.weight.normal_()
        fox.gate_bias.normal_()
    theirs = DataDependentAlibi(heads * head_dim, heads, causal=True)
    linear = theirs.to_forget_gates[0]
    with torch.no_grad():
        linear.weight.copy_(torch.block_diag(*fox.weight.unbind(0)))  # (H, H * D)
        linear.bias.copy_(fox.gate_bias)
    k = torch.randn(2, heads, length, head_dim)
    x = k.transpose(1, 2).reshape(2, length, heads * head_dim)  # (B, T, H * D)
    with torch.no_grad():
        assert_close(fox.bias(torch.arange(length), torch.arange(length), k, k), theirs(x))


def test_gradcheck_float64():
    fox = ForgettingGate(2, 3, dtype=torch.float64)
    pos = torch.arange(5)
    weight = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    gate_bias = torch.randn(2, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 5, 3, dtype=torch.float64, requires_grad=True)

    def f(weight, gate_bias, k):
        return functional_call(fox, {"weight": weight, "gate_bias": gate_bias}, (pos, pos, None, k)).tril()

    assert_close(f(weight, gate_bias, k).detach(), loop_reference(k.detach(), weight.detach(), gate_bias.detach()))
    assert torch.autograd.gradcheck(f, (weight, gate_bias, k))


def test_cache_rows_equal_the_full_bias():
    fox = ForgettingGate(2, 4)
    with torch.no_grad():
        fox.weight.normal_()
    k = torch.randn(2, 2, 12, 4)
    full = fox.bias(torch.arange(12), torch.arange(12), k, k)
    assert_close(fox.bias(torch.arange(9, 12), torch.arange(12), k[:, :, 9:], k), full[:, :, 9:])


def test_score_mod_equals_bias():
    fox = ForgettingGate(4, 8, bias_init=1.0)
    with torch.no_grad():
        fox.weight.normal_()
    pos = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]])
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    check_score_mod(fox, pos, pos, q, k, causal=True, flex=True)
    check_score_mod(fox, torch.arange(4, 6), torch.arange(6), q[:, :, :2], k, causal=True, flex=False)


def test_self_attention_equals_reference():
    weight = torch.randn(2, 8)

    def make():
        fox = ForgettingGate(2, 8, bias_init=0.0)
        with torch.no_grad():
            fox.weight.copy_(weight)
        return fox

    check_self_attention(
        make, lambda q, k: loop_reference(k, weight, torch.zeros(2)), causal=True, backends=("sdpa", "eager", "chunked")
    )


def test_refusals():
    with pytest.raises(ValueError, match="cannot serve bidirectional attention"):
        SelfAttention(8, 2, scheme=ForgettingGate(2, 4), causal=False)
    with pytest.raises(ValueError, match=r"k must have shape \(B, 2, 3, 4\) .* got None"):
        ForgettingGate(2, 4).bias(torch.arange(3), torch.arange(3))
    assert repr(ForgettingGate(2, 4)) == "ForgettingGate(num_heads=2, head_dim=4, bias_init=5.0)"


def test_score_mod_captures_no_t_by_t_tensor():
    check_score_mod_memory(ForgettingGate(2, 8), heads=2, head_dim=8, per_token=1)
