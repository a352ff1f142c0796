import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed import ALiBi, NoPE, ShawRelative, T5RelativeBias
from posembed.schemes.base import SCHEMES, Kind
from tests.helpers import assert_close, max_abs_diff


def test_nope_adds_nothing():
    nope = NoPE()
    q = torch.randn(2, 3, 4, 8)
    assert nope.bias(torch.arange(4), torch.arange(4)) is None
    assert nope.bias(torch.arange(4), torch.arange(4), q, q) is None
    assert nope(torch.arange(4), torch.arange(4)) is None
    assert nope.score_mod(torch.arange(4), torch.arange(4), q, q) is None


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads, head_dim", [(1, 7), (3, 5), (12, 2), (64, 1)])
def test_nope_accepts_any_attention_layer_and_changes_nothing(heads, head_dim, causal):
    """Any head count / odd head dim / either mask is accepted, and the layer equals one without a scheme."""
    from posembed.nn.attention.layer import SelfAttention

    assert NoPE().check_attention(num_heads=heads, head_dim=head_dim, causal=causal) is None
    torch.manual_seed(heads)
    plain = SelfAttention(heads * head_dim, heads, scheme=None, causal=causal)
    with_nope = SelfAttention(heads * head_dim, heads, scheme=NoPE(), causal=causal)
    with_nope.load_state_dict(plain.state_dict())
    x = torch.randn(2, 5, heads * head_dim)
    positions = torch.tensor([9, 0, 3, 3, 7])  # arbitrary positions: NoPE ignores them
    expected = plain(x)
    assert_close(with_nope(x, position_ids=positions), expected, atol=1e-6, rtol=1e-6)
    # contrast: a scheme with a head-count contract does refuse a mismatched layer
    with pytest.raises(
        ValueError, match=rf"built for num_heads={heads + 1}, but the attention layer has num_heads={heads}"
    ):
        ALiBi(heads + 1, symmetric=True).check_attention(num_heads=heads, head_dim=head_dim, causal=causal)


def test_nope_is_a_registered_bias_scheme_without_state():
    nope = NoPE()
    assert SCHEMES["nope"] is NoPE and nope.kind is Kind.BIAS
    assert list(nope.parameters()) == [] and list(nope.buffers()) == []
    assert nope.max_positions is None and NoPE.extrapolates is True and NoPE.needs_qk is False
    assert nope.num_heads is None


def attend(x, bias=None):
    """Bidirectional self-attention of x (B, H, T, D) with itself as queries, keys and values."""
    return F.scaled_dot_product_attention(x, x, x, attn_mask=bias)


@settings(max_examples=25, deadline=None)
@given(length=st.integers(2, 10), seed=st.integers(0, 2**16))
def test_without_positions_attention_is_permutation_equivariant(length, seed):
    """Seed 001's question: with NoPE, permuting the tokens permutes the outputs, nothing else."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 2, length, 4, generator=generator)
    perm = torch.randperm(length, generator=generator)
    pos = torch.arange(length)
    bias = NoPE().bias(pos, pos)
    assert_close(attend(x[:, :, perm], bias), attend(x, bias)[:, :, perm], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ALiBi(2, symmetric=True),
        lambda: T5RelativeBias(2, num_buckets=8, max_distance=6, init_std=1.0),
        lambda: ShawRelative(2, 4, max_distance=3, init_std=1.0),
    ],
    ids=["alibi", "t5_bias", "shaw"],
)
def test_every_bias_scheme_breaks_permutation_equivariance(make):
    scheme = make()
    x = 2 * torch.randn(1, 2, 6, 4)
    perm = torch.tensor([2, 0, 1, 5, 3, 4])
    pos = torch.arange(6)
    with torch.no_grad():
        permuted = attend(x[:, :, perm], scheme.bias(pos, pos, x[:, :, perm], x[:, :, perm]))
        reference = attend(x, scheme.bias(pos, pos, x, x))[:, :, perm]
    assert max_abs_diff(permuted, reference) > 1e-2
