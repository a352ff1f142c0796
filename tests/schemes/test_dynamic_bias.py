"""Dynamic position bias: an MLP of the (log-)distance, against hand values and x-transformers."""

import math

import pytest
import torch
from torch import nn
from torch.func import functional_call

from posembed.schemes.bias.dynamic import DynamicPositionBias
from tests.helpers import assert_close
from tests.schemes.bias_checks import check_score_mod, check_score_mod_memory, check_self_attention

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def silu(x: float) -> float:
    return x / (1 + math.exp(-x))


def simple_dpb(log_distances: bool = False) -> DynamicPositionBias:
    """depth 1, hidden 1: b(d) = (silu(d), 1 - 2 silu(d)) for d = i - j (or its log form)."""
    dpb = DynamicPositionBias(2, hidden=1, depth=1, log_distances=log_distances)
    with torch.no_grad():
        dpb.mlp[0].weight.fill_(1.0)
        dpb.mlp[0].bias.zero_()
        dpb.mlp[2].weight.copy_(torch.tensor([[1.0], [-2.0]]))
        dpb.mlp[2].bias.copy_(torch.tensor([0.0, 1.0]))
    return dpb


@pytest.mark.parametrize("log_distances", [False, True])
def test_three_by_three_by_hand(log_distances):
    def g(d: int) -> float:  # the MLP's input for d = i - j
        return math.copysign(math.log1p(abs(d)), d) if log_distances else float(d)

    s = {d: silu(g(d)) for d in (-2, -1, 0, 1, 2)}
    head0 = [[s[0], s[-1], s[-2]], [s[1], s[0], s[-1]], [s[2], s[1], s[0]]]
    expected = torch.tensor([head0, [[1 - 2 * v for v in row] for row in head0]])
    assert_close(simple_dpb(log_distances).bias(torch.arange(3), torch.arange(3)).detach(), expected)
    assert abs(silu(1.0) - 0.7310586) < 1e-7 and abs(silu(-2.0) + 0.2384058) < 1e-7


def copy_from_x_transformers(ours: DynamicPositionBias, theirs) -> None:
    """Copy x-transformers' weights layer by layer (its first LayerNorm has a gain only)."""

    def layers(module):
        return [
            m
            for m in module.modules()
            if isinstance(m, nn.Linear) or type(m).__name__ == "LayerNorm" and m is not module
        ]

    mine = [m for m in ours.mlp if isinstance(m, (nn.Linear, nn.LayerNorm))]
    theirs_ = [m for m in layers(theirs.mlp) if not (isinstance(m, nn.LayerNorm) and not m.elementwise_affine)]
    assert len(mine) == len(theirs_)
    with torch.no_grad():
        for a, b in zip(mine, theirs_):
            if isinstance(a, nn.Linear):
                a.weight.copy_(b.weight)
                a.bias.copy_(b.bias)
            elif hasattr(b, "gamma"):
                a.weight.copy_(b.gamma)
                a.bias.zero_()
            else:
                a.weight.copy_(b.weight)
                a.bias.copy_(b.bias)


@pytest.mark.parametrize("log_distances,norm", [(False, False), (True, True)])
def test_equals_x_transformers(log_distances, norm):
    from x_transformers.x_transformers import DynamicPositionBias as XDynamicPositionBias

    theirs = XDynamicPositionBias(8, heads=4, depth=2, log_distance=log_distances, norm=norm)
    for p in theirs.parameters():  # not the identity init: make LayerNorm gains matter
        p.data.normal_()
    ours = DynamicPositionBias(4, hidden=8, depth=2, log_distances=log_distances, norm=norm)
    copy_from_x_transformers(ours, theirs)
    with torch.no_grad():
        assert_close(ours.bias(torch.arange(10), torch.arange(10)), theirs(10, 10))
        assert_close(ours.bias(torch.arange(7, 10), torch.arange(10)), theirs(3, 10))  # queries at the end


def test_gradcheck_float64():
    dpb = DynamicPositionBias(2, hidden=3, depth=2, log_distances=True, norm=True, dtype=torch.float64)
    pos = torch.arange(4)
    names = [name for name, _ in dpb.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in dpb.parameters())

    def f(*values):
        return functional_call(dpb, dict(zip(names, values)), (pos, pos))

    assert torch.autograd.gradcheck(f, params)


def test_compiled_path_without_host_sync_equals_table_path(monkeypatch):
    import posembed.schemes.bias.dynamic as module

    dpb = DynamicPositionBias(3, hidden=4, depth=2)
    pos = torch.tensor([[0, 1, 2, 5], [3, 4, 5, 6]])
    table = dpb.bias(pos, pos)
    monkeypatch.setattr(module, "values_readable", lambda x: False)
    assert_close(dpb.bias(pos, pos), table)


def test_score_mod_equals_bias():
    dpb = DynamicPositionBias(4, hidden=6, depth=2, log_distances=True)
    pos = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 0, 1, 2]])
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    check_score_mod(dpb, pos, pos, q, k, causal=False, flex=True)
    check_score_mod(dpb, torch.arange(4, 6), torch.arange(6), q[:, :, :2], k, causal=True, flex=False)


@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_equals_reference(causal):
    def reference(q, k):
        d = (torch.arange(6).view(-1, 1) - torch.arange(6)).float()
        s = torch.nn.functional.silu(d)
        return torch.stack([s, 1 - 2 * s])

    backends = ("sdpa", "eager", "chunked", "fused") if causal else ("sdpa",)
    check_self_attention(simple_dpb, reference, causal=causal, backends=backends)


def test_errors_and_repr():
    with pytest.raises(ValueError, match="depth must be positive, got 0"):
        DynamicPositionBias(2, depth=0)
    with pytest.raises(TypeError, match="norm must be a bool"):
        DynamicPositionBias(2, norm=1)
    assert "log_distances=True" in repr(DynamicPositionBias(2, log_distances=True))


def test_score_mod_captures_no_t_by_t_tensor():
    check_score_mod_memory(DynamicPositionBias(2, hidden=8), heads=2, head_dim=8, per_token=2)
