"""Sandwich (Chi et al. 2023): the sinusoidal inner product minus d'/2, scaled by H / (8h)."""

import math

import pytest
import torch

from posembed.schemes.bias.sandwich import Sandwich
from tests.helpers import assert_close
from tests.schemes.bias_checks import check_score_mod, check_score_mod_memory, check_self_attention

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def test_three_by_three_by_hand():
    """H = 2, d' = 4, base 100: w = (0.1, 0.01); head scales 2/8 and 2/16."""
    bias = Sandwich(2, 4, base=100.0).bias(torch.arange(3), torch.arange(3))

    def kernel(d):
        return math.cos(0.1 * d) + math.cos(0.01 * d) - 2

    k1, k2 = kernel(1), kernel(2)
    head0 = [[0, k1 / 4, k2 / 4], [k1 / 4, 0, k1 / 4], [k2 / 4, k1 / 4, 0]]
    head1 = [[0, k1 / 8, k2 / 8], [k1 / 8, 0, k1 / 8], [k2 / 8, k1 / 8, 0]]
    assert_close(bias, torch.tensor([head0, head1]))


def test_equals_the_inner_product_of_sinusoidal_embeddings():
    """p_i . p_j - d'/2 with p = [sin(i w_k), cos(i w_k)]_{k=1..d'/2}, then H / (8h)."""
    dim, heads, length = 16, 4, 20
    k = torch.arange(1, dim // 2 + 1, dtype=torch.float64)
    w = 10000.0 ** (-2 * k / dim)
    angles = torch.arange(length, dtype=torch.float64).view(-1, 1) * w
    p = torch.cat([angles.sin(), angles.cos()], dim=-1)  # (T, d')
    inner = p @ p.T - dim / 2
    scales = torch.tensor([heads / (8.0 * h) for h in range(1, heads + 1)], dtype=torch.float64)
    expected = scales.view(-1, 1, 1) * inner
    assert_close(Sandwich(heads, dim).bias(torch.arange(length), torch.arange(length)), expected.float())


def test_non_positive_and_zero_on_the_diagonal():
    bias = Sandwich(4, 64).bias(torch.arange(50), torch.arange(50))
    assert (bias <= 1e-6).all() and (bias.diagonal(dim1=-2, dim2=-1) == 0).all()


@pytest.mark.parametrize("flex", [True, False])
def test_score_mod_equals_bias(flex):
    scheme = Sandwich(4, 8, base=100.0)
    pos = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 0, 1, 2]])
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    check_score_mod(scheme, pos, pos, q, k, causal=True, flex=flex)
    real = pos.float() * 0.5  # real positions: the cosine sum inline
    check_score_mod(scheme, real, real, q, k, causal=False, flex=False)


@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_equals_reference(causal):
    def reference(q, k):
        d = (torch.arange(6).view(-1, 1) - torch.arange(6)).double()
        kernel = torch.cos(0.1 * d) + torch.cos(0.01 * d) - 2
        return torch.stack([kernel / 4, kernel / 8]).float() * 10

    class Loud(Sandwich):  # a 10x bias so that it visibly moves the output
        def bias(self, *args):
            return super().bias(*args) * 10

    backends = ("sdpa", "eager", "chunked", "fused") if causal else ("sdpa",)
    check_self_attention(lambda: Loud(2, 4, base=100.0), reference, causal=causal, backends=backends)


def test_errors_and_repr():
    with pytest.raises(ValueError, match="dim=5 must be even"):
        Sandwich(2, 5)
    with pytest.raises(ValueError, match="base must be positive, got 0"):
        Sandwich(2, 4, base=0.0)
    assert repr(Sandwich(2, 4)) == "Sandwich(num_heads=2, dim=4, base=10000.0)"


def test_score_mod_captures_no_t_by_t_tensor():
    check_score_mod_memory(Sandwich(2, 16), heads=2, head_dim=8, per_token=2)


def test_score_mod_off_the_cpu_reads_no_range_back_and_equals_the_bias(monkeypatch):
    """Where a host read would sync (CUDA; the device policy mocked here), the score_mod evaluates
    the sum inline from integer positions instead of reading their range for a table."""
    from posembed.schemes.bias import sandwich

    monkeypatch.setattr(sandwich, "host_checks", lambda device: False)
    scheme = Sandwich(2, 16)
    pos = torch.arange(7)
    q, k = torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 8)
    reads = []
    real_item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "__int__", lambda self: reads.append("int") or int(real_item(self)))
    with torch.no_grad():
        scheme.score_mod(pos, pos, q, k)
    assert reads == []
    check_score_mod(scheme, pos, pos, q, k, causal=True, flex=False)  # the inline path, against the bias


CASTS = {
    "half then float": lambda m: m.half().float(),
    "bf16": lambda m: m.to(torch.bfloat16),
    "float": lambda m: m.float(),
    "double": lambda m: m.double(),
}


@pytest.mark.parametrize("cast", CASTS)
def test_dtype_casts_leave_the_float64_constants_exact(cast):
    """``.half()`` used to round the float64 frequencies and head scales to fp16 (and ``.float()``
    to fp32): the bias of a cast module now equals a fresh module's, bit for bit."""
    fresh, cast_module = Sandwich(num_heads=4, dim=64), CASTS[cast](Sandwich(num_heads=4, dim=64))
    assert cast_module.frequencies.dtype == cast_module.head_scales.dtype == torch.float64
    assert torch.equal(cast_module.frequencies, fresh.frequencies)
    assert torch.equal(cast_module.head_scales, fresh.head_scales)
    positions = torch.arange(40)
    assert torch.equal(cast_module.bias(positions, positions), fresh.bias(positions, positions))
    assert torch.equal(cast_module.distance_table(50), fresh.distance_table(50))
    assert cast_module.state_dict() == {}  # rebuilt from the settings, never saved


def test_the_constants_move_with_to_and_survive_to_empty():
    scheme = Sandwich(num_heads=2, dim=8, device="meta")
    assert scheme.frequencies.is_meta and scheme.frequencies.dtype == torch.float64
    scheme.half().to_empty(device="cpu")
    scheme.reset_parameters()
    fresh = Sandwich(num_heads=2, dim=8)
    assert torch.equal(scheme.frequencies, fresh.frequencies) and torch.equal(scheme.head_scales, fresh.head_scales)


def test_a_float64_constant_refuses_another_dtype():
    with pytest.raises(TypeError, match=r"Sandwich.frequencies is a float64 buffer, got a torch.float32 tensor"):
        Sandwich(num_heads=1, dim=2).frequencies = torch.zeros(1)
