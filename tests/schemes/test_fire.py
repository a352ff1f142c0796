"""FIRE (Li et al. 2024): f(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1); causal."""

import math

import pytest
import torch
from torch.func import functional_call

from posembed import SelfAttention
from posembed.schemes.bias.fire import FIRE, fire_inputs
from tests.helpers import assert_close
from tests.schemes.bias_checks import check_score_mod, check_score_mod_memory, check_self_attention

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def simple_fire(dtype=torch.float32) -> FIRE:
    """One hidden unit, f(x) = (2 relu(x), 1/2 - relu(x)), c = 1, L = 1."""
    fire = FIRE(2, hidden=1, threshold=1.0, dtype=dtype)
    with torch.no_grad():
        fire.mlp_in.weight.fill_(1.0)
        fire.mlp_in.bias.zero_()
        fire.mlp_out.weight.copy_(torch.tensor([[2.0], [-1.0]]))
        fire.mlp_out.bias.copy_(torch.tensor([0.0, 0.5]))
    return fire


def test_three_by_three_by_hand():
    """x_ij = log(1 + i - j) / log(1 + max(1, i)); keys after the query get x = 0."""
    r = math.log(2) / math.log(3)
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, r, 0.0]])
    bias = simple_fire().bias(torch.arange(3), torch.arange(3))
    assert_close(bias.detach(), torch.stack([2 * x, 0.5 - x]))


def test_inputs_are_progressively_interpolated_into_zero_one():
    pos = torch.arange(0, 4000, 37)
    distance = (pos.view(-1, 1) - pos).float()
    x = fire_inputs(distance, pos.float().view(-1, 1), torch.tensor(1.0), torch.tensor(64.0))
    assert x.min() >= 0 and x.max() <= 1 + 1e-6
    assert_close(x.diagonal(), torch.zeros(len(pos)))  # i = j
    assert_close(x[pos >= 64, 0], torch.ones(int((pos >= 64).sum())))  # j = 0, i >= L: psi(i)/psi(i)


def test_gradcheck_float64_all_parameters():
    fire = FIRE(2, hidden=3, threshold=2.5, init_c=0.7, dtype=torch.float64)
    pos = torch.arange(5)
    names = [name for name, _ in fire.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in fire.parameters())

    def f(*values):
        return functional_call(fire, dict(zip(names, values)), (pos, pos))

    assert f(*params).dtype == torch.float64
    assert torch.autograd.gradcheck(f, params)


def test_score_mod_equals_bias():
    fire = FIRE(4, hidden=5, threshold=3.0)
    pos = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 0, 1, 2]])
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    check_score_mod(fire, pos, pos, q, k, causal=True, flex=True)
    check_score_mod(fire, torch.arange(4, 6), torch.arange(6), q[:, :, :2], k, causal=True, flex=False)


def test_self_attention_equals_reference():
    r = math.log(2) / math.log(3)

    def reference(q, k):
        length = q.shape[2]
        i = torch.arange(length).view(-1, 1).float()
        d = (i - torch.arange(length)).clamp(min=0)
        x = torch.log1p(d) / torch.log1p(i.clamp(min=1))
        return torch.stack([2 * x, 0.5 - x])

    assert_close(reference(torch.zeros(1, 1, 3, 1), None)[0, 2, 1], torch.tensor(2 * r))
    check_self_attention(simple_fire, reference, causal=True, backends=("sdpa", "eager", "chunked", "fused"))


def test_refuses_bidirectional_attention():
    with pytest.raises(ValueError, match="FIRE normalises i - j .* cannot serve bidirectional attention"):
        SelfAttention(8, 2, scheme=FIRE(2), causal=False)


def test_errors_and_repr():
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        FIRE(2, threshold=0.0)
    assert repr(FIRE(2, hidden=4)).startswith("FIRE(\n  num_heads=2, hidden=4, threshold=512.0, init_c=1.0")


def test_score_mod_captures_no_t_by_t_tensor():
    check_score_mod_memory(FIRE(2, hidden=8), heads=2, head_dim=8, per_token=1)
