"""ShawRelative against the transformers 4.x BertSelfAttention formula, written out here.

transformers 5 removed ``position_embedding_type="relative_key(_query)"`` from modeling_bert;
the reference below is a line-by-line einsum transcription of the 4.x code path.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed import ShawRelative
from posembed.schemes.bias.shaw import distance_index
from tests.helpers import assert_close

MODES = ["relative_key", "relative_key_query"]


def hf4_scores(q, k, table, max_position_embeddings, mode, q_positions=None, k_positions=None, clip=False):
    """transformers 4.x: scores = (q k^T + q·r [+ k·r]) / sqrt(D), r = table[(i - j) + max - 1]."""
    q_len, k_len = q.shape[2], k.shape[2]
    left = (torch.arange(q_len) if q_positions is None else q_positions).view(-1, 1)
    right = (torch.arange(k_len) if k_positions is None else k_positions).view(1, -1)
    distance = left - right
    if clip:  # the posembed extension: beyond the table, reuse its end rows
        distance = distance.clamp(-(max_position_embeddings - 1), max_position_embeddings - 1)
    positional_embedding = table[distance + max_position_embeddings - 1].to(q.dtype)  # (Tq, Tk, D)
    scores = torch.matmul(q, k.transpose(-1, -2))
    relative = torch.einsum("bhld,lrd->bhlr", q, positional_embedding)
    if mode == "relative_key_query":
        relative = relative + torch.einsum("bhrd,lrd->bhlr", k, positional_embedding)
    return (scores + relative) / math.sqrt(q.shape[-1])


def make(heads=3, head_dim=8, max_pos=6, mode="relative_key"):
    """A ShawRelative holding an HF-4-shaped table of 2 * max_pos - 1 rows (max_distance = max_pos - 1)."""
    scheme = ShawRelative(heads, head_dim, max_distance=max_pos - 1, mode=mode)
    with torch.no_grad():
        scheme.weight.normal_()
    return scheme


def ours_scores(scheme, q, k, q_positions, k_positions):
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + scheme.bias(q_positions, k_positions, q, k)


@pytest.mark.parametrize("mode", MODES)
def test_equals_transformers4_formula_within_the_table(mode):
    max_pos, length = 6, 6
    scheme = make(mode=mode, max_pos=max_pos)
    q, k = torch.randn(2, 3, length, 8), torch.randn(2, 3, length, 8)
    pos = torch.arange(length)
    expected = hf4_scores(q, k, scheme.weight, max_pos, mode)
    assert_close(ours_scores(scheme, q, k, pos, pos), expected)


@pytest.mark.parametrize("mode", MODES)
def test_bias_alone_equals_relative_term_over_sqrt_d(mode):
    scheme = make(mode=mode, max_pos=5)
    q, k = torch.randn(1, 3, 4, 8), torch.randn(1, 3, 4, 8)
    pos = torch.arange(4)
    plain = q @ k.transpose(-1, -2) / math.sqrt(8)
    assert_close(scheme.bias(pos, pos, q, k), hf4_scores(q, k, scheme.weight, 5, mode) - plain)


@pytest.mark.parametrize("mode", MODES)
def test_long_inputs_clip_instead_of_crashing(mode):
    """HF 4.x indexes out of its table beyond max_position_embeddings; here distances clip."""
    max_pos, length = 4, 19
    scheme = make(mode=mode, max_pos=max_pos)
    q, k = torch.randn(2, 3, length, 8), torch.randn(2, 3, length, 8)
    pos = torch.arange(length)
    with pytest.raises(IndexError):
        hf4_scores(q, k, scheme.weight, max_pos, mode)
    expected = hf4_scores(q, k, scheme.weight, max_pos, mode, clip=True)
    assert_close(ours_scores(scheme, q, k, pos, pos), expected)


@pytest.mark.parametrize("mode", MODES)
def test_cached_single_query_equals_transformers4_use_cache(mode):
    """HF 4.x with a cache puts the one query at position key_length - 1."""
    scheme = make(mode=mode, max_pos=8)
    q, k = torch.randn(2, 3, 1, 8), torch.randn(2, 3, 7, 8)
    expected = hf4_scores(q, k, scheme.weight, 8, mode, q_positions=torch.tensor([6]))
    assert_close(ours_scores(scheme, q, k, torch.tensor([6]), torch.arange(7)), expected)


@pytest.mark.parametrize("mode", MODES)
def test_batch_positions_equal_rows_one_by_one(mode):
    scheme = make(mode=mode, max_pos=4)
    q, k = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    pos = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2]])
    bias = scheme.bias(pos, pos, q, k)
    assert bias.shape == (2, 3, 5, 5)
    for row in range(2):
        expected = hf4_scores(q[row : row + 1], k[row : row + 1], scheme.weight, 4, mode, pos[row], pos[row], clip=True)
        plain = q[row : row + 1] @ k[row : row + 1].transpose(-1, -2) / math.sqrt(8)
        assert_close(bias[row : row + 1], expected - plain)


@settings(max_examples=30, deadline=None)
@given(
    shift=st.integers(0, 500),
    length=st.integers(1, 9),
    max_distance=st.integers(1, 6),
    mode=st.sampled_from(MODES),
)
def test_bias_depends_only_on_relative_positions(shift, length, max_distance, mode):
    scheme = ShawRelative(2, 4, max_distance=max_distance, mode=mode)
    q, k = torch.randn(1, 2, length, 4), torch.randn(1, 2, length, 4)
    pos = torch.arange(length)
    assert_close(scheme.bias(pos + shift, pos + shift, q, k), scheme.bias(pos, pos, q, k))


def test_distance_index_rows_match_transformers4_layout():
    """Row R + (i - j): with R = max - 1 this is HF 4.x's ``distance + max_position_embeddings - 1``."""
    relative = torch.tensor([3, 1, 0, -1, -3])  # k - q
    assert distance_index(relative, 3).tolist() == [0, 2, 3, 4, 6]
    assert distance_index(torch.tensor([-100, 100]), 3).tolist() == [6, 0]


def test_dtype_follows_q_and_table_is_learned():
    scheme = ShawRelative(2, 4, max_distance=3)
    q = torch.randn(1, 2, 3, 4, dtype=torch.bfloat16)
    assert scheme.bias(torch.arange(3), torch.arange(3), q, q).dtype == torch.bfloat16
    q32 = torch.randn(1, 2, 3, 4)
    scheme.bias(torch.arange(3), torch.arange(3), q32, q32).sum().backward()
    assert scheme.weight.grad is not None and scheme.weight.grad.abs().sum() > 0
    assert scheme.weight.shape == (7, 4)
    assert "mode='relative_key'" in repr(scheme)
    assert ShawRelative.needs_qk is True and scheme.max_positions is None


# --- bad input --------------------------------------------------------------------------------


def test_unknown_mode():
    with pytest.raises(
        ValueError, match="unknown Shaw mode 'absolute'; choose one of relative_key, relative_key_query"
    ):
        ShawRelative(2, 4, max_distance=3, mode="absolute")


@pytest.mark.parametrize("bad", [0, -1])
def test_non_positive_sizes(bad):
    with pytest.raises(ValueError, match=f"max_distance must be positive, got {bad}"):
        ShawRelative(2, 4, max_distance=bad)
    with pytest.raises(ValueError, match=f"num_heads must be positive, got {bad}"):
        ShawRelative(bad, 4, max_distance=3)
    with pytest.raises(ValueError, match=f"head_dim must be positive, got {bad}"):
        ShawRelative(2, bad, max_distance=3)


def test_missing_q_or_k():
    scheme = ShawRelative(2, 4, max_distance=3)
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="ShawRelative reads the queries and keys: pass q"):
        scheme.bias(torch.arange(3), torch.arange(3))
    with pytest.raises(ValueError, match="ShawRelative reads the queries and keys"):
        scheme.score_mod(torch.arange(3), torch.arange(3), q, None)


def test_q_of_wrong_shape():
    scheme = ShawRelative(2, 4, max_distance=3)
    with pytest.raises(ValueError, match=r"q has shape \(1, 3, 3, 4\); expected \(B, 2, 3, 4\)"):
        scheme.bias(torch.arange(3), torch.arange(3), torch.randn(1, 3, 3, 4), torch.randn(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"k has shape \(1, 2, 5, 4\); expected \(B, 2, 3, 4\)"):
        scheme.bias(torch.arange(3), torch.arange(3), torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4))


def test_positions_of_mismatched_batch():
    scheme = ShawRelative(2, 4, max_distance=3)
    q = torch.randn(2, 2, 3, 4)
    with pytest.raises(ValueError, match="q_positions has batch size 3 but q has batch size 2"):
        scheme.bias(torch.zeros(3, 3, dtype=torch.long), torch.arange(3), q, q)
    with pytest.raises(ValueError, match="batch size 2 but k_positions has batch size 1"):
        scheme.bias(torch.zeros(2, 3, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long), q, q)


def test_head_count_and_head_dim_mismatch_with_attention():
    scheme = ShawRelative(2, 4, max_distance=3)
    with pytest.raises(ValueError, match=r"num_heads=2.*num_heads=4"):
        scheme.check_attention(num_heads=4, head_dim=4, causal=False)
    with pytest.raises(ValueError, match=r"head_dim=4.*head_dim=8"):
        scheme.check_attention(num_heads=2, head_dim=8, causal=False)
    scheme.check_attention(num_heads=2, head_dim=4, causal=True)
