"""KERPLE (Chi et al. 2022): exact values of both kernels, clamping, gradients, backends."""

import math

import pytest
import torch
from torch.func import functional_call

from posembed.schemes.bias.kerple import KERPLE_EPS, Kerple
from tests.helpers import assert_close
from tests.schemes.bias_checks import check_score_mod, check_score_mod_memory, check_self_attention

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

L2, L3, L5 = math.log(2), math.log(3), math.log(5)


def make(kernel: str, r1=(2.0, 0.5), r2=(1.0, 2.0), dtype=torch.float32) -> Kerple:
    scheme = Kerple(len(r1), kernel=kernel, dtype=dtype)
    with torch.no_grad():
        scheme.r1.copy_(torch.tensor(r1))
        scheme.r2.copy_(torch.tensor(r2))
    return scheme


def test_log_kernel_by_hand():
    """-r1 log(1 + r2 |i - j|): head 0 (r1=2, r2=1), head 1 (r1=1/2, r2=2)."""
    bias = make("log").bias(torch.arange(3), torch.arange(3))
    head0 = [[0, -2 * L2, -2 * L3], [-2 * L2, 0, -2 * L2], [-2 * L3, -2 * L2, 0]]
    head1 = [[0, -L3 / 2, -L5 / 2], [-L3 / 2, 0, -L3 / 2], [-L5 / 2, -L3 / 2, 0]]
    assert_close(bias.detach(), torch.tensor([head0, head1]))


def test_power_kernel_by_hand():
    """-r1 |i - j|^r2: head 0 (2 |d|), head 1 (|d|^2 / 2)."""
    bias = make("power").bias(torch.arange(3), torch.arange(3))
    head0 = [[0, -2, -4], [-2, 0, -2], [-4, -2, 0]]
    head1 = [[0, -0.5, -2], [-0.5, 0, -0.5], [-2, -0.5, 0]]
    assert_close(bias.detach(), torch.tensor([head0, head1], dtype=torch.float32))


def test_parameters_are_clamped_to_their_ranges():
    scheme = make("power", r1=(-1.0,), r2=(3.0,))
    r1, r2 = scheme.coefficients()
    assert r1.item() == pytest.approx(KERPLE_EPS) and r2.item() == 2.0
    assert make("log", r1=(1.0,), r2=(3.0,)).coefficients()[1].item() == 3.0  # no upper bound for log


@pytest.mark.parametrize("kernel", ["log", "power"])
def test_gradcheck_float64(kernel):
    scheme = make(kernel, dtype=torch.float64)
    pos = torch.arange(5)

    def f(r1, r2):
        return functional_call(scheme, {"r1": r1, "r2": r2}, (pos, pos))

    r1 = torch.tensor([0.7, 1.3], dtype=torch.float64, requires_grad=True)
    r2 = torch.tensor([0.4, 1.6], dtype=torch.float64, requires_grad=True)
    assert f(r1, r2).dtype == torch.float64
    assert torch.autograd.gradcheck(f, (r1, r2))


def test_cache_rows_and_batched_positions_equal_the_full_bias():
    scheme = make("log")
    full = scheme.bias(torch.arange(12), torch.arange(12))
    assert_close(scheme.bias(torch.arange(9, 12), torch.arange(12)), full[:, 9:])
    batched = scheme.bias(torch.arange(12).expand(3, 12), torch.arange(12).expand(3, 12))
    assert batched.shape == (3, 2, 12, 12)
    assert_close(batched, full.expand(3, -1, -1, -1))
    assert (
        scheme.bias(torch.arange(3), torch.arange(3), torch.zeros(1, 2, 3, 4, dtype=torch.bfloat16)).dtype
        == torch.bfloat16
    )


@pytest.mark.parametrize("kernel,flex", [("log", True), ("power", False)])
def test_score_mod_equals_bias(kernel, flex):
    scheme = make(kernel, r1=(2.0, 0.5, 1.0, 0.3), r2=(1.0, 2.0, 0.5, 1.5))
    q_pos = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 0, 1, 2]])
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    check_score_mod(scheme, q_pos, q_pos, q, k, causal=False, flex=flex)
    check_score_mod(scheme, torch.arange(4, 6), torch.arange(6), q[:, :, :2], k, causal=True, flex=False)


@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_equals_reference(causal):
    def reference(q, k):
        distance = (torch.arange(6).view(-1, 1) - torch.arange(6)).abs().float()
        return torch.stack([-2.0 * torch.log1p(distance), -0.5 * torch.log1p(2.0 * distance)])

    backends = ("sdpa", "eager", "chunked", "fused") if causal else ("sdpa", "chunked")
    check_self_attention(lambda: make("log"), reference, causal=causal, backends=backends)


def test_errors_and_repr():
    with pytest.raises(ValueError, match="unknown KERPLE kernel 'cubic'"):
        Kerple(2, kernel="cubic")
    with pytest.raises(ValueError, match="num_heads must be positive, got 0"):
        Kerple(0)
    assert repr(Kerple(2, kernel="power")) == "Kerple(num_heads=2, kernel='power')"
    scheme = Kerple(3)
    assert ((scheme.r1 >= KERPLE_EPS) & (scheme.r1 <= 1) & (scheme.r2 >= KERPLE_EPS) & (scheme.r2 <= 2)).all()


def test_score_mod_captures_no_t_by_t_tensor():
    check_score_mod_memory(Kerple(2), heads=2, head_dim=8, per_token=1)
