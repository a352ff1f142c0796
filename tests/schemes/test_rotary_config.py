"""rotary_from_hf_config: every rope type transformers implements for Llama-style models.

For each: ``inv_freq`` and ``attention_scaling`` equal transformers' own rope init function, and
the rotated q, k equal ``apply_rotary_pos_emb`` with cos/sin from ``LlamaRotaryEmbedding``
(full tensors, <= 1e-6 in fp32), at lengths inside and beyond the original context.
"""

from types import SimpleNamespace

import pytest
import torch

from posembed.interop.rope.config import rotary_from_hf_config
from posembed.schemes.rotary import scaling as rs
from posembed.schemes.rotary.longrope import LongRoPERotary
from posembed.schemes.rotary.yarn import YaRNRotary
from tests.helpers import assert_close, max_abs_diff

transformers = pytest.importorskip("transformers")
from transformers import GPTNeoXConfig, LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox as neox  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402

HEADS, HEAD_DIM = 4, 16
LONGROPE_SHORT = [1.0, 1.1, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5]
LONGROPE_LONG = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]

CASES = {
    "default": ({"rope_type": "default", "rope_theta": 10000.0}, 64, rs.RotaryEmbedding),
    "default_theta": ({"rope_type": "default", "rope_theta": 500000.0}, 64, rs.RotaryEmbedding),
    "linear": ({"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}, 64, rs.LinearScalingRotary),
    "dynamic": ({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}, 24, rs.DynamicNTKRotary),
    "yarn": (
        {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "original_max_position_embeddings": 16},
        64,
        YaRNRotary,
    ),
    "yarn_ramp": (  # head_dim 16 at original 4096: correction dims 2.62 and 5.63, a ramp over channels 2..6
        {"rope_type": "yarn", "factor": 8.0, "rope_theta": 10000.0, "original_max_position_embeddings": 4096},
        32768,
        YaRNRotary,
    ),
    "yarn_deepseek": (
        {
            "rope_type": "yarn", "factor": 8.0, "rope_theta": 10000.0, "original_max_position_embeddings": 32,
            "beta_fast": 16, "beta_slow": 2, "mscale": 0.707, "mscale_all_dim": 1.0, "truncate": False,
        },
        256,
        YaRNRotary,
    ),
    "longrope": (
        {
            "rope_type": "longrope", "rope_theta": 10000.0, "short_factor": LONGROPE_SHORT,
            "long_factor": LONGROPE_LONG, "original_max_position_embeddings": 16,
        },
        64,
        LongRoPERotary,
    ),
    "llama3": (
        {
            "rope_type": "llama3", "factor": 8.0, "rope_theta": 500000.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 128,
        },
        1024,
        rs.Llama3Rotary,
    ),
    "proportional": (
        {"rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "factor": 2.0},
        64,
        rs.ProportionalRotary,
    ),
}  # fmt: skip


def _config(case: str) -> LlamaConfig:
    params, max_positions, _ = CASES[case]
    return LlamaConfig(
        hidden_size=HEADS * HEAD_DIM,
        num_attention_heads=HEADS,
        max_position_embeddings=max_positions,
        rope_parameters=dict(params),
    )


def _hf_init(config):
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":
        return llama.LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[rope_type](config)


@pytest.mark.parametrize("case", sorted(CASES))
def test_frequencies_equal_transformers_rope_init(case):
    config = _config(case)
    inv_freq, attention_scaling = _hf_init(config)
    rope = rotary_from_hf_config(config)
    assert type(rope) is CASES[case][2]
    assert_close(rope.inv_freq, inv_freq, atol=0, rtol=1e-6)  # relative: the slow channels are ~1e-5
    assert rope.attention_scaling == pytest.approx(attention_scaling, rel=1e-12)


@pytest.mark.parametrize("case", sorted(CASES))
def test_rotated_qk_equal_apply_rotary_pos_emb(case):
    config = _config(case)
    rope = rotary_from_hf_config(config, angles="fp32")  # transformers' float32 angles, bit for bit
    original = config.rope_parameters.get("original_max_position_embeddings", config.max_position_embeddings)
    for length in (original // 2 + 3, original + 9):  # inside and beyond the original context
        q, k = torch.randn(2, HEADS, length, HEAD_DIM), torch.randn(2, HEADS, length, HEAD_DIM)
        positions = torch.stack([torch.arange(length), torch.arange(length).flip(0)])  # (B, T)
        reference = llama.LlamaRotaryEmbedding(config)  # fresh: its dynamic state starts clean
        q_ref, k_ref = llama.apply_rotary_pos_emb(q, k, *reference(q, positions))
        q_rot, k_rot = rope(q, k, positions)
        assert_close(q_rot, q_ref, msg=f"{case} length {length}")
        assert_close(k_rot, k_ref, msg=f"{case} length {length}")
        assert max(max_abs_diff(q_rot, q_ref), max_abs_diff(k_rot, k_ref)) <= 1e-6


@pytest.mark.parametrize("rope_parameters", [None, {"rope_type": "linear", "factor": 2.0}])
def test_partial_rotary_from_gpt_neox_config(rope_parameters):
    config = GPTNeoXConfig(hidden_size=HEADS * HEAD_DIM, num_attention_heads=HEADS, rotary_pct=0.25,
                           max_position_embeddings=64, rope_parameters=rope_parameters)  # fmt: skip
    rope = rotary_from_hf_config(config)
    assert rope.rotary_dim == 4
    q, k = torch.randn(1, HEADS, 10, HEAD_DIM), torch.randn(1, HEADS, 10, HEAD_DIM)
    positions = torch.arange(10)[None]
    q_ref, k_ref = neox.apply_rotary_pos_emb(q, k, *neox.GPTNeoXRotaryEmbedding(config)(q, positions))
    q_rot, k_rot = rope(q, k, positions)
    assert_close(q_rot, q_ref)
    assert_close(k_rot, k_ref)


def test_older_config_attributes_and_builder_arguments():
    old = SimpleNamespace(hidden_size=32, num_attention_heads=2, max_position_embeddings=64, rope_theta=5000.0,
                          rope_scaling={"type": "linear", "factor": 2.0})  # fmt: skip
    rope = rotary_from_hf_config(old, layout="interleaved", max_len=8)
    assert isinstance(rope, rs.LinearScalingRotary)
    assert (rope.head_dim, rope.base, rope.layout, rope.max_len, rope.factor) == (16, 5000.0, "interleaved", 8, 2.0)


def test_unknown_rope_type_names_the_known_ones():
    config = _config("default")
    config.rope_parameters = {"rope_type": "mrope", "rope_theta": 1e4}
    with pytest.raises(
        ValueError,
        match=(
            "unknown rope_type 'mrope'; known rope types: axial, default, dynamic, linear, "
            "llama3, longrope, proportional, yarn"
        ),
    ):
        rotary_from_hf_config(config)


@pytest.mark.parametrize(
    "case, field",
    [("linear", "factor"), ("dynamic", "factor"), ("yarn", "factor"), ("llama3", "low_freq_factor"),
     ("llama3", "high_freq_factor"), ("longrope", "long_factor")],
)  # fmt: skip
def test_missing_scaling_field_is_named(case, field):
    config = _config(case)
    del config.rope_parameters[field]
    with pytest.raises(ValueError, match=f"rope_type '{config.rope_parameters['rope_type']}' needs rope_parameters "
                                         f"field\\(s\\) {field}"):  # fmt: skip
        rotary_from_hf_config(config)


def test_nested_per_layer_parameters_are_rejected():
    config = SimpleNamespace(hidden_size=32, num_attention_heads=2,
                             rope_parameters={"full_attention": {"rope_type": "default"}})  # fmt: skip
    with pytest.raises(ValueError, match="nested by layer type"):
        rotary_from_hf_config(config)


def test_missing_head_size_fields():
    with pytest.raises(ValueError, match="config needs head_dim, or hidden_size and num_attention_heads"):
        rotary_from_hf_config(SimpleNamespace(rope_parameters={"rope_type": "default"}))


def test_a_mistyped_rope_type_suggests_the_closest():
    config = _config("default")
    config.rope_parameters = {"rope_type": "llama_3", "rope_theta": 1e4, "factor": 8.0}
    with pytest.raises(
        ValueError, match=r"unknown rope_type 'llama_3' \(did you mean 'llama3'\?\); known rope types: "
    ):
        rotary_from_hf_config(config)
