"""Every bias scheme's two views agree: the FlexAttention ``score_mod`` and the materialised bias.

Two checks per scheme: the ``score_mod`` evaluated on a broadcast (b, h, q_idx, kv_idx) grid equals
the bias tensor; and FlexAttention with the ``score_mod`` (eager: torch 2.13 runs it on CPU,
forward only; compiling would cost ~20 s) equals SDPA with the bias as ``attn_mask``.
"""

import math
import shutil

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention.flex_attention import flex_attention

from posembed import ALiBi, NoPE, ShawRelative, T5RelativeBias
from tests.helpers import assert_close, max_abs_diff
from tests.schemes.bias_checks import captured_tensors

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

HEADS, HEAD_DIM = 4, 8

SCHEMES = {
    "alibi_causal": lambda: ALiBi(HEADS),
    "alibi_symmetric": lambda: ALiBi(HEADS, symmetric=True),
    "t5_bidirectional": lambda: T5RelativeBias(HEADS, num_buckets=8, max_distance=6, init_std=1.0),
    "t5_causal": lambda: T5RelativeBias(HEADS, num_buckets=6, max_distance=5, bidirectional=False, init_std=1.0),
    "shaw_key": lambda: ShawRelative(HEADS, HEAD_DIM, max_distance=3, init_std=1.0),
    "shaw_key_query": lambda: ShawRelative(HEADS, HEAD_DIM, max_distance=3, mode="relative_key_query", init_std=1.0),
}

# (q_positions, k_positions): shared 1-D, per-row (left padding, packed restart), a cache (Tq < Tk)
POSITIONS = {
    "shared": (torch.arange(12), torch.arange(12)),
    "per_row": (
        torch.tensor([[0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7]]),
        torch.tensor([[0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7]]),
    ),
    "cache": (torch.arange(9, 12), torch.arange(12)),
}


def grid(score_mod, batch: int, q_len: int, k_len: int) -> Tensor:
    """Evaluate a score_mod on every (b, h, q_idx, kv_idx) at once by broadcasting, from score 0."""
    b = torch.arange(batch).view(-1, 1, 1, 1)
    h = torch.arange(HEADS).view(1, -1, 1, 1)
    q_idx = torch.arange(q_len).view(1, 1, -1, 1)
    kv_idx = torch.arange(k_len).view(1, 1, 1, -1)
    return score_mod(torch.zeros(batch, HEADS, q_len, k_len), b, h, q_idx, kv_idx)


def qkv(q_positions: Tensor, k_positions: Tensor, batch: int = 2):
    q = torch.randn(batch, HEADS, q_positions.shape[-1], HEAD_DIM)
    k = torch.randn(batch, HEADS, k_positions.shape[-1], HEAD_DIM)
    v = torch.randn(batch, HEADS, k_positions.shape[-1], HEAD_DIM)
    return q, k, v


@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("scheme_name", list(SCHEMES))
def test_score_mod_grid_equals_bias(scheme_name, positions):
    scheme = SCHEMES[scheme_name]()
    q_pos, k_pos = POSITIONS[positions]
    q, k, _ = qkv(q_pos, k_pos)
    bias = scheme.bias(q_pos, k_pos, q, k)
    values = grid(scheme.score_mod(q_pos, k_pos, q, k), 2, q_pos.shape[-1], k_pos.shape[-1])
    assert_close(values, bias.expand_as(values))
    assert bias.abs().max() > 0.1  # not a vacuous comparison


# one FlexAttention run per scheme (each eager call retraces, ~1 s): the grid test covers every combination
FLEX_CASES = [
    ("alibi_causal", "per_row", True),
    ("alibi_symmetric", "per_row", False),
    ("t5_bidirectional", "per_row", False),
    ("t5_causal", "cache", True),
    ("shaw_key", "cache", False),
    ("shaw_key_query", "per_row", True),
]


@pytest.mark.parametrize("scheme_name,positions,causal", FLEX_CASES)
def test_flex_attention_with_score_mod_equals_sdpa_with_bias(scheme_name, positions, causal):
    scheme = SCHEMES[scheme_name]()
    q_pos, k_pos = POSITIONS[positions]
    q, k, v = qkv(q_pos, k_pos)
    bias = scheme.bias(q_pos, k_pos, q, k)
    score_mod = scheme.score_mod(q_pos, k_pos, q, k)
    if causal:  # queries sit at the end of the keys, as in a cache
        offset = k.shape[2] - q.shape[2]
        allowed = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(offset)
        bias = bias.masked_fill(~allowed, -math.inf)
        unmasked = score_mod

        def score_mod(score, b, h, q_idx, kv_idx):
            return torch.where(kv_idx <= q_idx + offset, unmasked(score, b, h, q_idx, kv_idx), -math.inf)

    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    actual = flex_attention(q, k, v, score_mod=score_mod)
    assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    plain = F.scaled_dot_product_attention(q, k, v, attn_mask=None if not causal else bias.isfinite().float().log())
    assert max_abs_diff(actual.detach(), plain.detach()) > 1e-3  # the bias really changed the output


def test_flex_attention_with_a_block_mask():
    """The attention module's path: score_mod plus a causal block mask from create_block_mask."""
    from torch.nn.attention.flex_attention import create_block_mask

    scheme = ALiBi(HEADS)
    pos = torch.arange(16)
    q, k, v = qkv(pos, pos)
    block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: kv_idx <= q_idx, None, None, 16, 16, device="cpu")
    actual = flex_attention(q, k, v, score_mod=scheme.score_mod(pos, pos), block_mask=block_mask)
    causal_bias = scheme.bias(pos, pos).masked_fill(~torch.ones(16, 16, dtype=torch.bool).tril(), -math.inf)
    assert_close(actual, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_bias), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scheme_name", list(SCHEMES))
def test_score_mod_captures_no_t_by_t_tensor(scheme_name):
    """Memory of a score_mod: positions, per-head slopes, a distance table, or (B, H, T, 2R + 1) logits."""
    scheme = SCHEMES[scheme_name]()
    length = 256
    pos = torch.arange(length)
    q, k, _ = qkv(pos, pos, batch=1)
    tensors = captured_tensors(scheme.score_mod(pos, pos, q, k))
    assert tensors, "the closure should capture its small tables"
    largest = max(t.numel() for t in tensors)
    assert largest <= HEADS * length * 7 < length * length


def test_nope_has_neither_view():
    assert NoPE().score_mod(torch.arange(3), torch.arange(3)) is None
    assert NoPE().bias(torch.arange(3), torch.arange(3)) is None


def test_score_mod_in_bfloat16():
    scheme = SCHEMES["t5_bidirectional"]()
    pos = torch.arange(12)
    q, k, v = (t.to(torch.bfloat16) for t in qkv(pos, pos))
    bias = scheme.bias(pos, pos, q, k)
    assert bias.dtype == torch.bfloat16
    actual = flex_attention(q, k, v, score_mod=scheme.score_mod(pos, pos, q, k))
    assert_close(actual, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))


# --- the compiled kernel, in CI ----------------------------------------------------------------


@pytest.mark.skipif(
    not any(shutil.which(cxx) for cxx in ("g++", "c++", "clang++")), reason="torch.compile on CPU needs a C++ compiler"
)
def test_compiled_flex_attention_smallest_case(caplog):
    """``SelfAttention(compile_flex=True)`` really compiles FlexAttention and equals the paper's ALiBi.

    One small shape only: a cold compile costs 10-25 s on the test machine. The reference is
    written here: softmax(q k^T / sqrt(D) + m_h (j - i)) over the visible keys, slopes 2^-4, 2^-8
    (Press et al.: 2^(-8 h / H) for H = 2).
    """
    import logging

    from posembed.nn.attention.backends import _compiled_flex
    from posembed.nn.attention.layer import SelfAttention

    torch.manual_seed(0)
    heads, head_dim, length = 2, 4, 5
    attn = SelfAttention(heads * head_dim, heads, scheme=ALiBi(heads), causal=True, backend="flex", compile_flex=True)
    x = torch.randn(2, length, heads * head_dim)
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, -2:] = 0  # right padding
    before = _compiled_flex.cache_info().misses + _compiled_flex.cache_info().hits
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="posembed.nn.attention.backends"):
        out = attn(x, attention_mask=mask)
        assert attn.backend_for(x, attention_mask=mask) == "flex"
    assert _compiled_flex.cache_info().misses + _compiled_flex.cache_info().hits == before + 1  # the compiled path
    assert "runs uncompiled" not in caplog.text

    def heads_of(linear):
        return linear(x).view(2, length, heads, head_dim).transpose(1, 2)  # (B, H, T, D)

    with torch.no_grad():
        q, k, v = heads_of(attn.q_proj), heads_of(attn.k_proj), heads_of(attn.v_proj)
        slopes = torch.tensor([2.0**-4, 2.0**-8]).view(1, heads, 1, 1)
        i = torch.arange(length).view(-1, 1)
        j = torch.arange(length).view(1, -1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + slopes * (j - i).float()
        # causal, real keys only, and a query always sees itself (posembed.kernels.masks' rule)
        visible = ((j <= i) & mask.bool().view(2, 1, 1, length)) | (i == j)
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
        expected = attn.out_proj((probs @ v).transpose(1, 2).reshape(2, length, heads * head_dim))
    assert_close(out, expected, atol=1e-5, rtol=1e-5)
