import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed import T5RelativeBias
from posembed.schemes.bias.t5 import relative_position_bucket
from tests.helpers import assert_close

t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
x_transformers = pytest.importorskip("x_transformers.x_transformers")

HYPOTHESIS = settings(max_examples=60, deadline=None)


def hf_attention(heads: int, num_buckets: int, max_distance: int, is_decoder: bool):
    from transformers import T5Config

    config = T5Config(
        d_model=16,
        d_kv=4,
        num_heads=heads,
        relative_attention_num_buckets=num_buckets,
        relative_attention_max_distance=max_distance,
        is_decoder=is_decoder,
    )
    return t5.T5Attention(config, has_relative_attention_bias=True, layer_idx=0)


# --- buckets ----------------------------------------------------------------------------------


def test_buckets_worked_example():
    """T5 defaults (32 buckets, 128): 8 exact distances per sign, then log buckets up to 128."""
    relative = torch.tensor([-200, -128, -9, -8, -7, -1, 0, 1, 7, 8, 9, 127, 128, 200])
    buckets = relative_position_bucket(relative, bidirectional=True, num_buckets=32, max_distance=128)
    # keys after the query take buckets 16..31; 9 -> 8 + floor(8 * log(9/8) / log(16)) = 8
    assert buckets.tolist() == [15, 15, 8, 8, 7, 1, 0, 17, 23, 24, 24, 31, 31, 31]
    causal = relative_position_bucket(relative, bidirectional=False, num_buckets=32, max_distance=128)
    assert causal.tolist() == [31, 31, 9, 8, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0]


bucket_configs = st.one_of(
    st.tuples(st.just(True), st.sampled_from([4, 6, 8, 16, 32, 64])),
    st.tuples(st.just(False), st.sampled_from([2, 3, 5, 8, 16, 32])),
)


@HYPOTHESIS
@given(
    config=bucket_configs,
    extra_distance=st.integers(1, 1000),
    relative=st.lists(st.integers(-5000, 5000), min_size=1, max_size=64),
)
def test_buckets_equal_transformers(config, extra_distance, relative):
    bidirectional, num_buckets = config
    max_exact = num_buckets // (4 if bidirectional else 2)
    max_distance = max_exact + extra_distance
    relative = torch.tensor(relative)
    expected = t5.T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    ours = relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(ours, expected)
    assert ours.dtype == torch.long
    assert int(ours.min()) >= 0 and int(ours.max()) < num_buckets


@HYPOTHESIS
@given(config=bucket_configs, relative=st.lists(st.integers(-3000, 3000), min_size=1, max_size=64))
def test_buckets_equal_x_transformers(config, relative):
    """x-transformers' bucket function is the same with causal = not bidirectional."""
    bidirectional, num_buckets = config
    relative = torch.tensor(relative)
    expected = x_transformers.RelativePositionBias._relative_position_bucket(
        relative, causal=not bidirectional, num_buckets=num_buckets, max_distance=128
    )
    ours = relative_position_bucket(relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=128)
    assert torch.equal(ours, expected)


# --- the whole bias ---------------------------------------------------------------------------


@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("q_len,k_len,past", [(40, 40, 0), (1, 37, 36), (5, 50, 45), (6, 6, 300)])
def test_bias_equals_transformers_compute_bias(is_decoder, q_len, k_len, past):
    heads, num_buckets, max_distance = 3, 16, 20
    reference_module = hf_attention(heads, num_buckets, max_distance, is_decoder)
    ours = T5RelativeBias(heads, num_buckets=num_buckets, max_distance=max_distance, bidirectional=not is_decoder)
    with torch.no_grad():
        ours.weight.copy_(reference_module.relative_attention_bias.weight)
    expected = reference_module.compute_bias(q_len, k_len, past_seen_tokens=past)  # (1, H, Tq, Tk)
    bias = ours.bias(torch.arange(q_len) + past, torch.arange(k_len))
    assert bias.shape == (heads, q_len, k_len)
    assert_close(bias, expected[0])


def test_state_dict_loads_transformers_weights():
    reference_module = hf_attention(4, 32, 128, False)
    ours = T5RelativeBias(4)
    ours.load_state_dict({"relative_attention_bias.weight": reference_module.relative_attention_bias.weight})
    assert_close(ours.bias(torch.arange(9), torch.arange(9)), reference_module.compute_bias(9, 9)[0])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_len,k_len", [(24, 24), (4, 30)])
def test_bias_equals_x_transformers_up_to_its_scale(causal, q_len, k_len):
    """x-transformers multiplies its table by ``scale`` (dim_head ** 0.5): W_ours = scale * W_xt."""
    heads, head_dim = 4, 16
    scale = head_dim**0.5
    reference_module = x_transformers.RelativePositionBias(
        scale=scale, causal=causal, num_buckets=16, max_distance=12, heads=heads
    )
    ours = T5RelativeBias(heads, num_buckets=16, max_distance=12, bidirectional=not causal)
    with torch.no_grad():
        ours.weight.copy_(reference_module.relative_attention_bias.weight * scale)
    expected = reference_module(q_len, k_len)
    assert_close(ours.bias(torch.arange(k_len - q_len, k_len), torch.arange(k_len)), expected)


def test_batch_positions_equal_rows_one_by_one():
    scheme = T5RelativeBias(2, num_buckets=8, max_distance=10)
    q_pos = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 2], [7, 8, 9, 10]])
    k_pos = q_pos + torch.tensor([[0], [0], [-3]])
    bias = scheme.bias(q_pos, k_pos)
    assert bias.shape == (3, 2, 4, 4)
    for row in range(3):
        assert_close(bias[row], scheme.bias(q_pos[row], k_pos[row]))


def test_distance_table_covers_every_distance():
    scheme = T5RelativeBias(2, num_buckets=8, max_distance=10, bidirectional=True)
    table = scheme.distance_table()
    assert table.shape == (21, 2)
    far = torch.tensor([-10_000, -11, -10, 10, 11, 10_000])
    direct = scheme.weight[relative_position_bucket(far, bidirectional=True, num_buckets=8, max_distance=10)]
    assert_close(table[far.clamp(-10, 10) + 10], direct)


def test_bias_is_differentiable_in_the_table():
    scheme = T5RelativeBias(2, num_buckets=8, max_distance=10)
    scheme.bias(torch.arange(3), torch.arange(3)).sum().backward()
    # 3 x 3 distances k - q: 0 three times (bucket 0), -1 twice (1), -2 once (2), +1 twice (5), +2 once (6)
    expected = torch.zeros(8)
    expected[[0, 1, 2, 4, 5, 6]] = torch.tensor([3.0, 2.0, 1.0, 0.0, 2.0, 1.0])
    assert_close(scheme.weight.grad[:, 0], expected)


def test_dtype_and_defaults():
    scheme = T5RelativeBias(4)
    assert (scheme.num_buckets, scheme.max_distance, scheme.bidirectional) == (32, 128, True)
    assert scheme.bias(torch.arange(2), torch.arange(2)).dtype == torch.float32
    q = torch.randn(1, 4, 2, 8, dtype=torch.float16)
    assert scheme.bias(torch.arange(2), torch.arange(2), q).dtype == torch.float16
    assert scheme.max_positions is None and T5RelativeBias.extrapolates is True
    assert "num_buckets=32" in repr(scheme)


def test_init_std():
    scheme = T5RelativeBias(64, num_buckets=64, init_std=0.5)
    assert math.isclose(float(scheme.weight.detach().std()), 0.5, rel_tol=0.1)


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("num_buckets", [5, 31, 2])
def test_bidirectional_bucket_count_must_be_even_and_at_least_four(num_buckets):
    with pytest.raises(ValueError, match=f"num_buckets={num_buckets}.*even and >= 4"):
        T5RelativeBias(2, num_buckets=num_buckets)


def test_causal_bucket_count_at_least_two():
    with pytest.raises(ValueError, match="num_buckets=1: a causal T5 bias needs num_buckets >= 2"):
        T5RelativeBias(2, num_buckets=1, bidirectional=False)
    T5RelativeBias(2, num_buckets=3, max_distance=4, bidirectional=False)


@pytest.mark.parametrize("bad", [0, -5])
def test_non_positive_sizes(bad):
    with pytest.raises(ValueError, match=f"num_heads must be positive, got {bad}"):
        T5RelativeBias(bad)
    with pytest.raises(ValueError, match=f"max_distance must be positive, got {bad}"):
        T5RelativeBias(2, max_distance=bad)
    with pytest.raises(ValueError, match=f"num_buckets must be positive, got {bad}"):
        T5RelativeBias(2, num_buckets=bad)


def test_max_distance_must_exceed_exact_buckets():
    with pytest.raises(ValueError, match="max_distance=8 must exceed the 8 exact buckets"):
        T5RelativeBias(2, num_buckets=32, max_distance=8)


def test_bidirectional_must_be_bool():
    with pytest.raises(TypeError, match="bidirectional must be a bool, got 'no'"):
        T5RelativeBias(2, bidirectional="no")


def test_head_count_mismatch_with_attention():
    with pytest.raises(ValueError, match=r"T5RelativeBias was built for num_heads=4.*num_heads=6"):
        T5RelativeBias(4).check_attention(num_heads=6, head_dim=8, causal=False)


def test_causal_form_refuses_bidirectional_attention():
    from posembed.nn.attention.layer import SelfAttention

    causal = T5RelativeBias(2, bidirectional=False)
    causal.check_attention(num_heads=2, head_dim=8, causal=True)
    T5RelativeBias(2).check_attention(num_heads=2, head_dim=8, causal=False)
    T5RelativeBias(2).check_attention(num_heads=2, head_dim=8, causal=True)  # two-sided buckets, masked: allowed
    match = (
        r"T5RelativeBias\(bidirectional=False\) is the causal.*needs T5RelativeBias\(num_heads, bidirectional=True\)"
    )
    with pytest.raises(ValueError, match=match):
        causal.check_attention(num_heads=2, head_dim=8, causal=False)
    with pytest.raises(ValueError, match=match):
        SelfAttention(16, 2, scheme=causal, causal=False)


def test_bad_positions():
    scheme = T5RelativeBias(2)
    with pytest.raises(TypeError, match="q_positions must hold integers"):
        scheme.bias(torch.arange(3.0), torch.arange(3))
    with pytest.raises(ValueError, match="batch size 2 but k_positions has batch size 1"):
        scheme.bias(torch.zeros(2, 3, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long))
