import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed import ALiBi
from posembed.schemes.bias.alibi import alibi_slopes
from posembed.schemes.bias.relative import relative_positions
from tests.helpers import assert_close

x_transformers = pytest.importorskip("x_transformers.x_transformers")

HYPOTHESIS = settings(max_examples=40, deadline=None)


# --- slopes: exact numbers from the paper / official code -------------------------------------


def test_slopes_eight_heads_are_powers_of_one_half():
    assert ALiBi(8).slopes.tolist() == [2.0**-k for k in range(1, 9)]


def test_slopes_twelve_heads():
    slopes = ALiBi(12).slopes
    assert slopes[:8].tolist() == [2.0**-k for k in range(1, 9)]
    assert_close(slopes[8:], torch.tensor([0.7071, 0.3536, 0.1768, 0.0884]), atol=5e-5, rtol=0)
    assert_close(slopes[8:], torch.tensor([2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]))


def test_slopes_six_heads():
    expected = torch.tensor([0.25, 0.0625, 0.015625, 0.003906, 0.5, 0.125])
    assert_close(ALiBi(6).slopes, expected, atol=5e-7, rtol=0)


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 6, 7, 8, 12, 16, 20, 24, 31, 64])
def test_slopes_equal_x_transformers(heads):
    reference = torch.tensor(x_transformers.AlibiPositionalBias._get_slopes(heads), dtype=torch.float32)
    assert_close(ALiBi(heads).slopes, reference)
    assert len(alibi_slopes(heads)) == heads


def test_slopes_are_a_non_persistent_buffer():
    alibi = ALiBi(4)
    assert "slopes" in dict(alibi.named_buffers())
    assert alibi.state_dict() == {}
    assert list(alibi.parameters()) == []


def test_meta_device_init_then_real_equals_real_init():
    meta = ALiBi(6, device="meta")
    assert meta.slopes.device.type == "meta"
    real = meta.to_empty(device="cpu")
    real.reset_parameters()
    assert torch.equal(real.slopes, ALiBi(6).slopes)


# --- the bias: worked values and both forms ----------------------------------------------------


def test_causal_form_worked_example():
    """Head 0 of ALiBi(2) has slope 1/16: bias = (j - i)/16, the upper triangle holds the same formula."""
    bias = ALiBi(2).bias(torch.arange(4), torch.arange(4))
    expected = torch.tensor(
        [[0.0, 1.0, 2.0, 3.0], [-1.0, 0.0, 1.0, 2.0], [-2.0, -1.0, 0.0, 1.0], [-3.0, -2.0, -1.0, 0.0]]
    )
    assert bias.shape == (2, 4, 4)
    assert bias.dtype == torch.float32
    assert_close(bias[0], expected / 16)
    assert_close(bias[1], expected / 256)


def test_symmetric_form_worked_example():
    bias = ALiBi(2, symmetric=True).bias(torch.arange(3), torch.arange(3))
    expected = -torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    assert_close(bias[0], expected / 16)
    assert_close(bias[1], expected / 256)


def test_forms_agree_on_the_lower_triangle():
    pos = torch.arange(9)
    causal, symmetric = ALiBi(4).bias(pos, pos), ALiBi(4, symmetric=True).bias(pos, pos)
    lower = torch.ones(9, 9, dtype=torch.bool).tril()
    assert_close(causal[:, lower], symmetric[:, lower])
    assert (causal[:, ~lower] > 0).all() and (symmetric[:, ~lower] < 0).all()


def test_bias_dtype_follows_q():
    q = torch.randn(1, 2, 3, 4, dtype=torch.bfloat16)
    assert ALiBi(2).bias(torch.arange(3), torch.arange(3), q).dtype == torch.bfloat16


# --- parity with x-transformers' AlibiPositionalBias (full tensors) ---------------------------


@pytest.mark.parametrize("heads", [4, 6, 12])
@pytest.mark.parametrize("q_len,k_len", [(10, 10), (3, 10), (1, 7)])
def test_symmetric_equals_x_transformers(heads, q_len, k_len):
    """x-transformers builds -m|j - i| with the queries at the end of the keys (a cache)."""
    reference = x_transformers.AlibiPositionalBias(heads=heads)(q_len, k_len)
    ours = ALiBi(heads, symmetric=True).bias(torch.arange(k_len - q_len, k_len), torch.arange(k_len))
    assert_close(ours, reference)


@pytest.mark.parametrize("heads", [4, 6])
def test_causal_form_equals_x_transformers_where_unmasked(heads):
    length = 11
    reference = x_transformers.AlibiPositionalBias(heads=heads)(length, length)
    ours = ALiBi(heads).bias(torch.arange(length), torch.arange(length))
    masked = torch.ones(length, length, dtype=torch.bool).triu(1)
    assert_close(ours.masked_fill(masked, 0.0), reference.masked_fill(masked, 0.0))
    scores = torch.randn(heads, length, length)
    ours_attn = torch.softmax((scores + ours).masked_fill(masked, -math.inf), -1)
    reference_attn = torch.softmax((scores + reference).masked_fill(masked, -math.inf), -1)
    assert_close(ours_attn, reference_attn)


def test_batch_positions_equal_x_transformers_custom_positions():
    heads = 6
    q_pos = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2]])  # second row left-padded
    k_pos = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [0, 0, 0, 1, 2, 3, 4]])
    reference = x_transformers.AlibiPositionalBias(heads=heads).forward_custom_pos(q_pos, k_pos)
    ours = ALiBi(heads, symmetric=True).bias(q_pos, k_pos)
    assert ours.shape == (2, heads, 5, 7)
    assert_close(ours, reference)


def test_shared_1d_positions_broadcast_against_batched_positions():
    alibi = ALiBi(3)
    k_pos = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])
    bias = alibi.bias(torch.tensor([2, 3]), k_pos)
    assert bias.shape == (2, 3, 2, 4)
    assert_close(bias[1], alibi.bias(torch.tensor([2, 3]), k_pos[1]))


# --- properties -------------------------------------------------------------------------------

positions_1d = st.lists(st.integers(0, 400), min_size=1, max_size=12).map(torch.tensor)


@HYPOTHESIS
@given(heads=st.integers(1, 16), q_pos=positions_1d, k_pos=positions_1d, symmetric=st.booleans())
def test_bias_is_monotone_non_increasing_in_distance(heads, q_pos, k_pos, symmetric):
    bias = ALiBi(heads, symmetric=symmetric).bias(q_pos, k_pos)  # (H, Tq, Tk)
    relative = relative_positions(q_pos, k_pos)
    keep = torch.ones_like(relative, dtype=torch.bool) if symmetric else relative <= 0
    distance = relative.abs()[keep]
    order = torch.argsort(distance, stable=True)
    for head in bias[:, keep]:
        values = head[order]
        assert (values[1:] <= values[:-1]).all()
        same = distance[order][1:] == distance[order][:-1]
        assert torch.equal(values[1:][same], values[:-1][same])


@HYPOTHESIS
@given(
    heads=st.integers(1, 16),
    q_pos=positions_1d,
    k_pos=positions_1d,
    shift=st.integers(-100, 10_000),
    symmetric=st.booleans(),
)
def test_bias_is_translation_invariant(heads, q_pos, k_pos, shift, symmetric):
    alibi = ALiBi(heads, symmetric=symmetric)
    assert_close(alibi.bias(q_pos + shift, k_pos + shift), alibi.bias(q_pos, k_pos))


def test_extrapolates_and_has_no_length_limit():
    assert ALiBi.extrapolates is True
    assert ALiBi(4).max_positions is None
    assert ALiBi(2).bias(torch.tensor([100_000]), torch.arange(100_000 - 3, 100_001)).shape == (2, 1, 4)


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -2])
def test_non_positive_head_count(bad):
    with pytest.raises(ValueError, match=f"num_heads must be positive, got {bad}"):
        ALiBi(bad)


@pytest.mark.parametrize("bad", [2.0, "4", True])
def test_non_int_head_count(bad):
    with pytest.raises(TypeError, match="num_heads must be an int"):
        ALiBi(bad)


def test_symmetric_must_be_bool():
    with pytest.raises(TypeError, match="symmetric must be a bool"):
        ALiBi(4, symmetric="yes")


def test_head_count_mismatch_with_attention():
    with pytest.raises(ValueError, match=r"num_heads=8.*num_heads=4"):
        ALiBi(8).check_attention(num_heads=4, head_dim=16, causal=True)
    ALiBi(8).check_attention(num_heads=8, head_dim=16, causal=True)


def test_causal_form_refuses_bidirectional_attention():
    with pytest.raises(ValueError, match=r"symmetric=True"):
        ALiBi(4).check_attention(num_heads=4, head_dim=16, causal=False)
    ALiBi(4, symmetric=True).check_attention(num_heads=4, head_dim=16, causal=False)


def test_positions_of_mismatched_batch():
    with pytest.raises(ValueError, match="batch size 2 but k_positions has batch size 3"):
        ALiBi(2).bias(torch.zeros(2, 4, dtype=torch.long), torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="batch size 2 but k_positions has batch size 3"):
        ALiBi(2).score_mod(torch.zeros(2, 4, dtype=torch.long), torch.zeros(3, 4, dtype=torch.long))


def test_positions_of_bad_rank_or_type():
    with pytest.raises(ValueError, match=r"q_positions must have shape \(T,\) or \(B, T\), got \(1, 2, 3\)"):
        ALiBi(2).bias(torch.zeros(1, 2, 3, dtype=torch.long), torch.arange(3))
    with pytest.raises(TypeError, match="k_positions must hold real numbers, got dtype torch.bool"):
        ALiBi(2).bias(torch.arange(3), torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        ALiBi(2).bias([0, 1], torch.arange(2))
