"""RoPE: parity with transformers (half layout) and rotary-embedding-torch (interleaved), invariances, errors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed import RotaryEmbedding
from posembed.schemes.base import SCHEMES, Kind
from posembed.schemes.rotary.rope import apply_rotary, rope_cos_sin, rope_inv_freq
from tests.helpers import assert_close, max_abs_diff

transformers = pytest.importorskip("transformers")
from transformers import GPTNeoXConfig, LlamaConfig  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox as neox  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402

B, H, T, D = 2, 3, 11, 16


def _qk(t=T, d=D, dtype=torch.float32):
    return torch.randn(B, H, t, d, dtype=dtype), torch.randn(B, H, t, d, dtype=dtype)


def _logits(q, k):
    return q.double() @ k.double().transpose(-1, -2)


def test_registered_as_rotary():
    assert SCHEMES["rope"] is RotaryEmbedding
    assert RotaryEmbedding(8).kind is Kind.ROTARY


def test_inv_freq_formula():
    expected = torch.tensor([10000.0 ** (-2 * i / D) for i in range(D // 2)])
    assert_close(RotaryEmbedding(D).inv_freq, expected)


def test_half_layout_matches_transformers_llama():
    config = LlamaConfig(hidden_size=H * D, num_attention_heads=H, max_position_embeddings=64)
    reference = llama.LlamaRotaryEmbedding(config)
    q, k = _qk()
    positions = torch.stack([torch.arange(T) + 5, torch.randperm(40)[:T]])  # (B, T), per row
    cos, sin = reference(q, positions)
    q_ref, k_ref = llama.apply_rotary_pos_emb(q, k, cos, sin)
    rope = RotaryEmbedding(D, angles="fp32")  # transformers' float32 angles, bit for bit
    q_rot, k_rot = rope(q, k, positions)
    assert_close(rope.inv_freq, reference.inv_freq)
    assert_close(q_rot, q_ref)
    assert_close(k_rot, k_ref)
    assert max_abs_diff(q_rot, q_ref) <= 1e-6 and max_abs_diff(k_rot, k_ref) <= 1e-6


def test_partial_rotary_matches_transformers_gpt_neox():
    config = GPTNeoXConfig(hidden_size=H * D, num_attention_heads=H, rotary_pct=0.5, max_position_embeddings=64)
    reference = neox.GPTNeoXRotaryEmbedding(config)
    q, k = _qk()
    positions = torch.arange(T)[None].expand(B, T)
    q_ref, k_ref = neox.apply_rotary_pos_emb(q, k, *reference(q, positions))
    q_rot, k_rot = RotaryEmbedding(D, rotary_dim=D // 2)(q, k, positions)
    assert_close(q_rot, q_ref)
    assert_close(k_rot, k_ref)
    assert torch.equal(q_rot[..., D // 2 :], q[..., D // 2 :])  # pass-through untouched


@pytest.mark.parametrize("rotary_dim", [D, 8])
@pytest.mark.parametrize("offset", [0, 7])
def test_interleaved_matches_rotary_embedding_torch(rotary_dim, offset):
    ret = pytest.importorskip("rotary_embedding_torch")
    reference = ret.RotaryEmbedding(dim=rotary_dim)
    q, _ = _qk()
    expected = reference.rotate_queries_or_keys(q, offset=offset)
    rope = RotaryEmbedding(D, rotary_dim=rotary_dim, layout="interleaved")
    actual, _ = rope(q, q, torch.arange(T) + offset)
    assert_close(actual, expected)


def test_layouts_are_a_permutation_apart():
    q, k = _qk()
    half, inter = RotaryEmbedding(D), RotaryEmbedding(D, layout="interleaved")
    perm = torch.arange(D).view(2, D // 2).t().reshape(-1)  # half index of each interleaved channel
    q_h, k_h = half(q, k)
    q_i, k_i = inter(q[..., perm], k[..., perm])
    assert_close(q_i, q_h[..., perm])
    assert_close(_logits(q_i, k_i), _logits(q_h, k_h))


@settings(max_examples=25, deadline=None)
@given(
    shift=st.integers(0, 2000),
    layout=st.sampled_from(["half", "interleaved"]),
    rotary_dim=st.sampled_from([4, 8, D]),
)
def test_logits_depend_only_on_relative_position(shift, layout, rotary_dim):
    gen = torch.Generator().manual_seed(shift)
    q, k = torch.randn(1, 2, 6, D, generator=gen), torch.randn(1, 2, 6, D, generator=gen)
    rope = RotaryEmbedding(D, rotary_dim=rotary_dim, layout=layout)
    positions = torch.tensor([0, 3, 4, 9, 10, 30])
    base = _logits(*rope(q, k, positions))
    shifted = _logits(*rope(q, k, positions + shift))
    # fp32 angles m * theta carry a rounding error ~ m * 1.2e-7 rad, so the tolerance grows with
    # the largest position (each of the D/2 pairs of q and k can move the logit by that much)
    atol = 1e-4 + D * 1.2e-7 * float(positions.max() + shift)
    assert_close(shifted, base, atol=atol, rtol=1e-4)
    assert not torch.allclose(base, _logits(q, k), atol=1e-3)  # positions did act


@pytest.mark.parametrize("max_len", [None, 32])
def test_explicit_arange_equals_default(max_len):
    rope = RotaryEmbedding(D, max_len=max_len)
    q, k = _qk()
    default = rope(q, k)
    explicit = rope(q, k, torch.arange(T), torch.arange(T))
    assert torch.equal(default[0], explicit[0]) and torch.equal(default[1], explicit[1])


def test_batched_positions_equal_per_row():
    rope = RotaryEmbedding(D, rotary_dim=12)
    q, k = _qk()
    positions = torch.stack([torch.arange(T), torch.arange(T) * 3 + 2])
    q_rot, k_rot = rope(q, k, positions)
    for row in range(B):
        q_row, k_row = rope(q[row : row + 1], k[row : row + 1], positions[row])
        assert torch.equal(q_rot[row : row + 1], q_row) and torch.equal(k_rot[row : row + 1], k_row)


def test_cache_slices_equal_on_the_fly_and_beyond_cache_is_computed():
    cached, uncached = RotaryEmbedding(D, max_len=16), RotaryEmbedding(D)
    assert tuple(cached.cos_cached.shape) == (16, D // 2) and cached.cache_size == 16 and uncached.cache_size == 0
    for length, offset in [(8, 0), (5, 9), (10, 12), (40, 0)]:  # the last two run past the cache
        expected = uncached.cos_sin(torch.arange(offset, offset + length))
        actual = cached.cos_sin_range(length, offset)
        assert torch.equal(actual[0], expected[0]) and torch.equal(actual[1], expected[1])
    q, k = _qk(t=40)
    explicit = cached(q, k, torch.arange(40))  # explicit positions past max_len: computed, same values
    assert torch.equal(explicit[0], uncached(q, k)[0]) and torch.equal(explicit[1], uncached(q, k)[1])


def test_cached_cos_sin_is_the_cache_slice_and_refuses_positions_beyond_it():
    rope, plain = RotaryEmbedding(D, max_len=16), RotaryEmbedding(D)
    for length, offset in [(16, 0), (5, 9), (1, 15), (0, 16)]:
        cos, sin = rope.cached_cos_sin(length, offset)
        assert cos.shape == (length, D // 2) and cos.data_ptr() == rope.cos_cached[offset:].data_ptr()
        expected = plain.cos_sin(torch.arange(offset, offset + length))
        assert_close(cos, expected[0], atol=0, rtol=0)
        assert_close(sin, expected[1], atol=0, rtol=0)
    match = r"positions 12 \.\. 16 \(offset \+ length = 17\) run past the cos/sin cache of 16 positions \(max_len=16\)"
    with pytest.raises(ValueError, match=match + ".*pass position_ids.*larger max_len"):
        rope.cached_cos_sin(5, offset=12)
    with pytest.raises(ValueError, match="cache of 0 positions"):
        plain.cached_cos_sin(1)
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        rope.cached_cos_sin(2, offset=-1)
    with pytest.raises(TypeError, match="length must be an int"):
        rope.cached_cos_sin(2.0)


def test_default_positions_beyond_the_cache_raise_in_forward():
    rope = RotaryEmbedding(D, max_len=16)
    q, k = _qk(t=17)
    with pytest.raises(ValueError, match=r"offset \+ length = 17\) run past the cos/sin cache of 16.*position_ids"):
        rope(q, k)
    assert_close(rope(q, k, torch.arange(17))[0], RotaryEmbedding(D)(q, k)[0], atol=0, rtol=0)
    q16, k16 = q[..., :16, :], k[..., :16, :]
    assert_close(rope(q16, k16)[0], RotaryEmbedding(D)(q16, k16)[0], atol=0, rtol=0)  # within: the cache


def test_query_against_cached_keys_matches_full_sequence():
    rope = RotaryEmbedding(D, layout="interleaved")
    q, k = _qk()
    q_full, k_full = rope(q, k)
    q_last, k_all = rope(q[..., -1:, :], k, torch.tensor([T - 1]), torch.arange(T))
    assert torch.equal(q_last, q_full[..., -1:, :]) and torch.equal(k_all, k_full)


def test_bf16_large_positions_use_fp32_math():
    rope = RotaryEmbedding(D)
    q, k = _qk(dtype=torch.bfloat16)
    positions = torch.arange(T) + 100_003  # bf16 cannot represent these positions
    q_rot, _ = rope(q, k, positions)
    cos, sin = rope_cos_sin(positions, rope.inv_freq)
    expected = apply_rotary(q.float(), cos, sin).to(torch.bfloat16)
    assert q_rot.dtype == torch.bfloat16
    assert torch.equal(q_rot, expected)
    rounded = positions.to(torch.bfloat16)  # what bf16 position math would do
    wrong = apply_rotary(q.float(), *rope_cos_sin(rounded, rope.inv_freq)).to(torch.bfloat16)
    assert not torch.equal(q_rot, wrong)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_gradient_is_the_inverse_rotation(layout):
    x = torch.randn(2, 2, 5, 8, dtype=torch.float64, requires_grad=True)
    cos, sin = rope_cos_sin(torch.arange(5), rope_inv_freq(6))
    torch.autograd.gradcheck(lambda t: apply_rotary(t, cos.double(), sin.double(), layout), (x,))
    torch.autograd.gradgradcheck(lambda t: apply_rotary(t, cos.double(), sin.double(), layout), (x,))


def test_gradient_through_cos_sin_falls_back_to_formula():
    x = torch.randn(1, 1, 4, 8, dtype=torch.float64)
    positions = torch.arange(4, dtype=torch.float64)[:, None]

    def rotate(freqs):
        return apply_rotary(x, (positions * freqs).cos(), (positions * freqs).sin(), "interleaved")

    freqs = rope_inv_freq(6).double().requires_grad_()  # partial: 6 of 8 channels
    torch.autograd.gradcheck(rotate, (freqs,))
    with torch.no_grad():
        expected = apply_rotary(x, (positions * freqs).cos(), (positions * freqs).sin(), "interleaved")
        assert torch.equal(rotate(freqs), expected)


def test_meta_device_init_equals_real_init():
    real = RotaryEmbedding(D, max_len=8)
    meta = RotaryEmbedding(D, max_len=8, device="meta")
    assert meta.inv_freq.is_meta
    meta.to_empty(device="cpu")
    meta.reset_parameters()
    assert torch.equal(meta.inv_freq, real.inv_freq) and torch.equal(meta.cos_cached, real.cos_cached)


@pytest.mark.parametrize("cast", [lambda m: m.to(torch.bfloat16), lambda m: m.half(), lambda m: m.double()])
def test_module_dtype_casts_keep_fp32_frequencies(cast):
    real = RotaryEmbedding(D, max_len=8)
    cast_rope = cast(RotaryEmbedding(D, max_len=8))
    for name in ("inv_freq", "cos_cached", "sin_cached"):  # float32 views of int32 bits (Fp32Buffer)
        cast_buffer, buffer = getattr(cast_rope, name), getattr(real, name)
        assert cast_buffer.dtype == torch.float32 and torch.equal(cast_buffer, buffer), name
    assert all(torch.equal(a, b) for a, b in zip(cast_rope.buffers(), real.buffers()))


def test_buffers_are_not_saved():
    assert RotaryEmbedding(D, max_len=8).state_dict() == {}


def test_extra_repr():
    assert repr(RotaryEmbedding(16, rotary_dim=8, max_len=4)) == (
        "RotaryEmbedding(head_dim=16, rotary_dim=8, base=10000, layout='half', max_len=4)"
    )


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"head_dim": 7}, ValueError, "head_dim must be even; got head_dim=7"),
        ({"head_dim": 0}, ValueError, "head_dim must be positive"),
        ({"head_dim": 8, "rotary_dim": 10}, ValueError, "rotary_dim=10 exceeds head_dim=8"),
        ({"head_dim": 8, "rotary_dim": 5}, ValueError, "rotary_dim must be even; got rotary_dim=5"),
        ({"head_dim": 8, "layout": "neox"}, ValueError, "layout must be one of .*'neox'"),
        ({"head_dim": 8, "base": 1.0}, ValueError, "base must be a finite number > 1, got 1.0"),
        ({"head_dim": 8, "base": "1e4"}, TypeError, "base must be a number"),
        ({"head_dim": 8, "max_len": 0}, ValueError, "max_len must be positive"),
    ],
)
def test_bad_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        RotaryEmbedding(**kwargs)


def test_check_attention():
    rope = RotaryEmbedding(16)
    rope.check_attention(num_heads=4, head_dim=16, causal=False)
    with pytest.raises(ValueError, match="head_dim=16, but the attention layer has head_dim=32"):
        rope.check_attention(num_heads=4, head_dim=32, causal=True)


def test_bad_forward_inputs():
    rope = RotaryEmbedding(D)
    q, k = _qk()
    with pytest.raises(ValueError, match="q has head dim 8, but this rotary scheme has head_dim=16"):
        rope(q[..., :8], k)
    with pytest.raises(ValueError, match=r"must have shape \(B, H, T, D\)"):
        rope(q[0], k[0])
    with pytest.raises(TypeError, match="floating-point"):
        rope(q.long(), k)
    with pytest.raises(ValueError, match="k has length 5 but q has length 11; pass k_position_ids"):
        rope(q, k[..., :5, :], torch.arange(T))
    with pytest.raises(ValueError, match=r"position_ids has shape \(4,\); expected \(11,\)"):
        rope(q, k, torch.arange(4))
    with pytest.raises(TypeError, match="position_ids must hold integers"):
        rope(q, k, torch.arange(T).float())
    with pytest.raises(
        ValueError, match=r"position_ids has shape \(11,\); expected \(5,\).*q of shape \(2, 3, 5, 16\)"
    ):
        rope(q[..., :5, :], k[..., :5, :], torch.arange(T))
    with pytest.raises(ValueError, match="layout must be one of"):
        apply_rotary(q, *rope.cos_sin_range(T), layout="x")
    with pytest.raises(ValueError, match="at most half"):
        apply_rotary(q[..., :4], *rope.cos_sin_range(T))


@pytest.mark.parametrize("rows", [3, 4])
def test_per_row_positions_must_match_the_batch(rows):
    rope = RotaryEmbedding(D)
    q, k = _qk()  # batch 2
    positions = torch.arange(T).expand(rows, T)
    with pytest.raises(
        ValueError,
        match=rf"position_ids has shape \({rows}, 11\); expected \(11,\), \(1, 11\) or \(2, 11\).*q of shape",
    ):
        rope(q, k, positions)
    with pytest.raises(ValueError, match=rf"k_position_ids has shape \({rows}, 11\).*k of shape \(2, 3, 11, 16\)"):
        rope(q, k, torch.arange(T), positions)
    one_row = rope(q, k, torch.arange(T)[None] + 3)  # (1, T) broadcasts over the batch
    assert_close(one_row[0], rope(q, k, torch.arange(T) + 3)[0], atol=0, rtol=0)


@pytest.mark.parametrize(
    "max_len, explicit",
    [(None, False), (16, False), (None, True), (16, True)],
    ids=["no_cache", "cache", "per_row", "per_row_with_cache"],
)
def test_compiled_equals_eager_without_graph_breaks(max_len, explicit):
    torch._dynamo.reset()
    rope = RotaryEmbedding(D, rotary_dim=12, max_len=max_len)
    q, k = _qk()
    args = (q, k, torch.stack([torch.arange(T), torch.arange(T) * 2 + 1])) if explicit else (q, k)
    compiled = torch.compile(rope, backend="aot_eager", fullgraph=True)
    for actual, expected in zip(compiled(*args), rope(*args)):
        assert_close(actual, expected)


@pytest.mark.slow
@pytest.mark.parametrize("layout, rotary_dim", [("half", None), ("interleaved", 4)])
def test_compiled_rotation_equals_the_eager_path(layout, rotary_dim):
    """RotaryEmbedding(compiled=True) dispatches to posembed.kernels.rope: same values and gradients."""
    from posembed.kernels import rope as fused_rope

    if not fused_rope.available():
        pytest.skip("torch.compile cannot build kernels on this machine")
    eager = RotaryEmbedding(8, rotary_dim=rotary_dim, layout=layout)
    fast = RotaryEmbedding(8, rotary_dim=rotary_dim, layout=layout, compiled=True)
    q, k = torch.randn(2, 3, 6, 8, requires_grad=True), torch.randn(2, 3, 6, 8, requires_grad=True)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]])
    expected, got = eager(q, k, positions), fast(q, k, positions)
    for a, b in zip(got, expected):
        assert_close(a, b)
    grads = torch.autograd.grad(sum((t * t.detach().sin()).sum() for t in got), (q, k))
    expected_grads = torch.autograd.grad(sum((t * t.detach().sin()).sum() for t in expected), (q, k))
    for a, b in zip(grads, expected_grads):
        assert_close(a, b)


def test_compiled_rotation_falls_back_for_float64(caplog):
    """The kernel covers fp32, bf16 and fp16 (tests/test_fused_rope.py); float64 rotates eagerly."""
    from posembed._utils.logging import forget_logged

    forget_logged()
    rope = RotaryEmbedding(8, compiled=True)
    q = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    with caplog.at_level("WARNING", logger="posembed.schemes.rotary.rotation"):
        out, _ = rope(q, q)
        rope(q, q)
    assert_close(out, RotaryEmbedding(8)(q, q)[0])
    assert caplog.text.count("rotating eagerly") == 1
