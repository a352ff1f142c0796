"""YaRN: the attention factor, the NTK-by-parts ramp, meta-device init, errors (parity: test_rotary_config)."""

import math

import pytest
import torch

from posembed import YaRNRotary
from posembed.schemes.rotary.rope import rope_inv_freq
from posembed.schemes.rotary.yarn import yarn_attention_factor
from tests.helpers import assert_close

D = 16


def _ramped(plain: torch.Tensor, factor: float, low: float, high: float) -> torch.Tensor:
    """Frequencies kept below channel ``low``, divided by ``factor`` above ``high``, linear in the channel between."""
    ramp = ((torch.arange(plain.numel(), dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return (plain.double() * (1 - ramp) + plain.double() / factor * ramp).float()


def test_yarn_attention_factor_and_ramp():
    assert yarn_attention_factor(4.0) == pytest.approx(0.1 * math.log(4.0) + 1)
    assert yarn_attention_factor(1.0) == 1.0
    assert yarn_attention_factor(4.0, mscale=1.0, mscale_all_dim=1.0) == 1.0
    # correction dims D ln(L / (2 pi beta)) / (2 ln base) = 10.47 (beta 32) and 22.51 (beta 1): ramp over 10..23
    rope = YaRNRotary(64, factor=8.0, original_max_len=4096)
    plain = rope_inv_freq(64)
    assert rope.attention_scaling == pytest.approx(0.1 * math.log(8.0) + 1)
    assert_close(rope.inv_freq[:11], plain[:11], atol=0, rtol=1e-6)  # fast dims (and the ramp's first): kept
    assert_close(rope.inv_freq[23:], plain[23:] / 8.0, atol=0, rtol=1e-6)  # slow dims (and its last): interpolated
    assert_close(rope.inv_freq, _ramped(plain, 8.0, 10, 23), atol=0, rtol=1e-6)  # channels 11..22: (i - 10) / 13
    overridden = YaRNRotary(64, factor=8.0, original_max_len=4096, attention_factor=1.5)
    assert overridden.attention_scaling == 1.5


def test_yarn_ramp_channels_at_head_dim_128():
    """original 4096, head_dim 128, factor 8: correction dims 20.94 and 45.03, so the truncated ramp
    runs from channel 20 (kept) to 46 (interpolated), each channel between a 26th further."""
    plain = rope_inv_freq(128)
    rope = YaRNRotary(128, factor=8.0, original_max_len=4096)
    ratio = plain / rope.inv_freq
    assert torch.equal(ratio[:21], torch.ones(21)) and torch.allclose(ratio[46:], torch.full((18,), 8.0))
    assert_close(rope.inv_freq, _ramped(plain, 8.0, 20, 46), atol=0, rtol=1e-6)
    assert rope.inv_freq[33].item() == pytest.approx(
        plain[33].item() * (0.5 + 0.5 / 8), rel=1e-6
    )  # (33 - 20) / 26 = 1/2
    assert rope.inv_freq[21].item() == pytest.approx(plain[21].item() * (25 / 26 + 1 / 26 / 8), rel=1e-6)
    assert rope.inv_freq[45].item() == pytest.approx(plain[45].item() * (1 / 26 + 25 / 26 / 8), rel=1e-6)
    untruncated = YaRNRotary(128, factor=8.0, original_max_len=4096, truncate=False)
    low = 128 * math.log(4096 / (32 * 2 * math.pi)) / (2 * math.log(10000.0))
    high = 128 * math.log(4096 / (1 * 2 * math.pi)) / (2 * math.log(10000.0))
    assert (round(low, 4), round(high, 4)) == (20.9445, 45.0269)
    assert_close(untruncated.inv_freq, _ramped(plain, 8.0, low, high), atol=0, rtol=1e-6)


@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_equals_transformers_where_the_ramp_spans_channels(truncate):
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama import modeling_llama as llama

    from posembed.interop.rope.config import rotary_from_hf_config

    params = {"rope_type": "yarn", "factor": 8.0, "rope_theta": 10000.0, "original_max_position_embeddings": 4096,
              "truncate": truncate}  # fmt: skip
    config = transformers.LlamaConfig(hidden_size=256, num_attention_heads=2, max_position_embeddings=32768,
                                      rope_parameters=dict(params))  # fmt: skip
    theirs, their_scaling = ROPE_INIT_FUNCTIONS["yarn"](config)
    ratio = rope_inv_freq(128) / theirs
    assert int(((ratio > 1 + 1e-6) & (ratio < 8 - 1e-5)).sum()) >= 24  # the case really ramps (not collapsed)
    ours = YaRNRotary(128, factor=8.0, original_max_len=4096, truncate=truncate, angles="fp32")
    assert_close(ours.inv_freq, theirs, atol=0, rtol=1e-6)  # every channel, the ramp's included
    assert ours.attention_scaling == pytest.approx(their_scaling, rel=1e-12)
    built = rotary_from_hf_config(config, angles="fp32")
    assert type(built) is YaRNRotary and torch.equal(built.inv_freq, ours.inv_freq)
    positions = torch.tensor([[0, 1, 100, 4095, 4096, 20000, 32767]])  # (B, T): inside and past the original length
    q, k = torch.randn(1, 2, 7, 128), torch.randn(1, 2, 7, 128)
    q_ref, k_ref = llama.apply_rotary_pos_emb(q, k, *llama.LlamaRotaryEmbedding(config)(q, positions))
    q_rot, k_rot = ours(q, k, positions)
    assert_close(q_rot, q_ref)  # transformers' fp32 angles: equal to 2.4e-7 at position 32767
    assert_close(k_rot, k_ref)


def test_yarn_attention_factor_scales_logits_by_its_square():
    rope = YaRNRotary(D, factor=4.0, original_max_len=16)
    q = torch.randn(1, 1, 5, D)
    q_rot, k_rot = rope(q, q)
    ratio = q_rot.norm(dim=-1) / q.norm(dim=-1)
    assert_close(ratio, torch.full_like(ratio, rope.attention_scaling))


def test_meta_init_equals_real_init_and_repr():
    rope = YaRNRotary(D, factor=4.0, original_max_len=16, max_len=8, device="meta")
    rope.to_empty(device="cpu")
    rope.reset_parameters()
    real = YaRNRotary(D, factor=4.0, original_max_len=16, max_len=8)
    assert torch.equal(rope.inv_freq, real.inv_freq) and torch.equal(rope.cos_cached, real.cos_cached)
    assert "factor=4, original_max_len=16" in repr(real) and "attention_scaling=1.13863" in repr(real)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"beta_fast": 1, "beta_slow": 2}, ValueError, "beta_fast=1 must be"),
        ({"factor": 0.5}, ValueError, "factor must be a finite number >= 1.0, got 0.5"),
        ({"original_max_len": 0}, ValueError, "original_max_len must be a positive int"),
        ({"attention_factor": "x"}, TypeError, "attention_factor must be a number"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        YaRNRotary(D, **{"factor": 2.0, "original_max_len": 8, **kwargs})


def test_attention_factor_at_small_factors_and_deepseek_halves():
    assert yarn_attention_factor(2.0) == pytest.approx(0.1 * math.log(2.0) + 1)  # s = 2 already scales
    assert yarn_attention_factor(1.5) == pytest.approx(0.1 * math.log(1.5) + 1)
    assert yarn_attention_factor(0.5) == 1.0  # s <= 1: no scaling
    ratio = (0.1 * 0.707 * math.log(8.0) + 1) / (0.1 * 1.0 * math.log(8.0) + 1)
    assert yarn_attention_factor(8.0, mscale=0.707, mscale_all_dim=1.0) == pytest.approx(ratio, rel=1e-12)
    plain = 0.1 * math.log(8.0) + 1
    for one in ({"mscale": 0.707}, {"mscale_all_dim": 0.707}):  # one of the two alone: the plain factor
        assert yarn_attention_factor(8.0, **one) == pytest.approx(plain, rel=1e-12)
        assert YaRNRotary(64, factor=8.0, original_max_len=4096, **one).attention_scaling == pytest.approx(
            plain, rel=1e-12
        )


def test_the_function_defaults_are_the_papers_and_the_class_s():
    from posembed.schemes.rotary.yarn import yarn_inv_freq

    rope = YaRNRotary(128, factor=8.0, original_max_len=4096)
    assert (rope.beta_fast, rope.beta_slow, rope.truncate) == (32.0, 1.0, True)
    assert torch.equal(yarn_inv_freq(128, 10000.0, 8.0, 4096), rope.inv_freq)
    assert torch.equal(yarn_inv_freq(128, 10000.0, 8.0, 4096, 32.0, 1.0, True), rope.inv_freq)


def _transformers_yarn(params: dict) -> torch.Tensor | None:
    """transformers' yarn inv_freq at head_dim 16, factor 4 (None without transformers)."""
    try:
        import transformers
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    except ImportError:
        return None
    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=16384,
                                      rope_parameters={"rope_type": "yarn", "factor": 4.0, **params})  # fmt: skip
    return ROPE_INIT_FUNCTIONS["yarn"](config)[0]


def test_ramp_bounds_clamped_to_the_rotary_dims():
    """beta_fast 10 000 puts the lower bound below channel 0 (clamped to 0) and base 10 the upper one at
    ceil(22.5) = 23, clamped to rotary_dim - 1 = 15: the ramp is i / 15 over the 8 channels."""
    plain = rope_inv_freq(16, 10.0)
    rope = YaRNRotary(16, base=10.0, factor=4.0, original_max_len=4096, beta_fast=10000.0)
    assert_close(rope.inv_freq, _ramped(plain, 4.0, 0, 15), atol=0, rtol=1e-6)
    theirs = _transformers_yarn({"rope_theta": 10.0, "beta_fast": 10000.0, "original_max_position_embeddings": 4096})
    assert theirs is None or torch.equal(rope.inv_freq, theirs)


def test_a_collapsed_ramp_keeps_channel_0_and_interpolates_the_rest():
    """original length 4 < 2 pi: both bounds truncate to channel 0, the ramp is widened by 0.001 (transformers)."""
    plain = rope_inv_freq(16)
    rope = YaRNRotary(16, factor=4.0, original_max_len=4)
    expected = torch.cat([plain[:1], plain[1:] / 4.0])
    assert_close(rope.inv_freq, expected, atol=0, rtol=1e-6)
    assert bool(torch.isfinite(rope.inv_freq).all())
    theirs = _transformers_yarn({"rope_theta": 10000.0, "original_max_position_embeddings": 4})
    assert theirs is None or torch.equal(rope.inv_freq, theirs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"beta_fast": 2, "beta_slow": 2}, ValueError, "beta_fast=2 must be greater than beta_slow=2"),
        ({"factor": 0.999}, ValueError, "factor must be a finite number >= 1.0, got 0.999"),
        ({"attention_factor": -0.1}, ValueError, "attention_factor must be a finite number >= 0.0, got -0.1"),
    ],
)
def test_the_bounds_of_the_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        YaRNRotary(D, **{"factor": 2.0, "original_max_len": 8, **kwargs})


def test_the_smallest_accepted_arguments():
    assert_close(
        YaRNRotary(D, factor=1.0, original_max_len=8).inv_freq, rope_inv_freq(D), atol=0, rtol=1e-6
    )  # s = 1: RoPE
    assert YaRNRotary(D, factor=1.5, original_max_len=8).factor == 1.5
    assert YaRNRotary(D, factor=2.0, original_max_len=8, attention_factor=0.5).attention_scaling == 0.5
    assert YaRNRotary(D, factor=2.0, original_max_len=8, attention_factor=0.0).attention_scaling == 0.0
