"""MRoPE's ``arrangement``, ``section_axes``, ``layout`` and ``rotary_dim`` against every M-RoPE text
rotary of transformers 5.24: full q/k tensors at random 3-row positions, rotated by the module's own
rotation function, and its cos/sin."""

from __future__ import annotations

import importlib

import pytest
import torch

from posembed.schemes.rotary.mrope import MRoPE, mrope_pairs

transformers = pytest.importorskip("transformers")

B, H, T = 2, 3, 13

#: (model type, sub-config, rotary class) -> MRoPE settings
FAMILIES = {
    ("qwen2_vl", "text_config", "Qwen2VLRotaryEmbedding"): dict(arrangement="blocks"),
    ("paddleocr_vl", "text_config", "PaddleOCRRotaryEmbedding"): dict(arrangement="blocks"),
    ("glm4v", "text_config", "Glm4vTextRotaryEmbedding"): dict(arrangement="blocks", layout="interleaved"),
    ("glm4v_moe", "text_config", "Glm4vMoeTextRotaryEmbedding"): dict(arrangement="blocks"),
    ("qwen3_vl", "text_config", "Qwen3VLTextRotaryEmbedding"): dict(arrangement="interleaved"),
    ("qwen3_vl_moe", "text_config", "Qwen3VLMoeTextRotaryEmbedding"): dict(arrangement="interleaved"),
    ("cosmos3_edge", "text_config", "Cosmos3EdgeTextRotaryEmbedding"): dict(arrangement="interleaved"),
    ("hy_v4_vl", "text_config", "HYV4VLRotaryEmbedding"): dict(arrangement="interleaved", layout="interleaved"),
    ("qwen3_5", "text_config", "Qwen3_5TextRotaryEmbedding"): dict(arrangement="interleaved"),
    ("ernie4_5_vl_moe", "text_config", "Ernie4_5_VLMoeTextRotaryEmbedding"):
        dict(arrangement="zipped", section_axes=(1, 2, 0), layout="interleaved"),
}  # fmt: skip


def _theirs(model_type: str, path: str, name: str, zipped: bool):
    """The family's config (with an ``mrope_section`` that fits its width: some class defaults do not),
    modeling module and rotary module."""
    config = getattr(transformers.CONFIG_MAPPING[model_type](), path)
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    half = len(getattr(module, name)(config).inv_freq)
    spatial = half * 3 // 8
    section = [spatial, spatial, half - 2 * spatial] if zipped else [half - 2 * spatial, spatial, spatial]
    config.rope_parameters = {**config.rope_parameters, "mrope_section": section}
    rotary = getattr(module, name)(config)
    assert list(rotary.mrope_section) == section
    return config, module, rotary


@pytest.mark.parametrize("family", list(FAMILIES), ids=[f[0] for f in FAMILIES])
def test_mrope_settings_equal_transformers(family):
    config, module, rotary = _theirs(*family, zipped=FAMILIES[family]["arrangement"] == "zipped")
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    frequency_dim = int(head_dim * config.rope_parameters.get("partial_rotary_factor", 1.0))  # odd for GLM-4V-MoE
    gen = torch.Generator().manual_seed(1)
    positions = torch.randint(0, 4000, (3, B, T), generator=gen)  # (axis, B, T), distinct on every axis
    q, k = torch.randn(B, H, T, head_dim, generator=gen), torch.randn(B, H, T, head_dim, generator=gen)
    cos, sin = rotary(q, positions)
    their_q, their_k = module.apply_rotary_pos_emb(q, k, cos, sin)
    ours = MRoPE(head_dim, frequency_dim=frequency_dim, mrope_section=list(rotary.mrope_section),
                 base=config.rope_parameters["rope_theta"], angles="fp32", **FAMILIES[family])  # fmt: skip
    our_q, our_k = ours(q, k, positions.permute(1, 2, 0))
    torch.testing.assert_close(our_q, their_q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(our_k, their_k, rtol=1e-5, atol=1e-5)
    our_cos, _ = ours.cos_sin(positions.permute(1, 2, 0))
    assert torch.equal(our_cos.repeat_interleave(2, -1), cos) or torch.equal(torch.cat([our_cos] * 2, -1), cos)
    blocks = MRoPE(head_dim, frequency_dim=frequency_dim, mrope_section=list(rotary.mrope_section), angles="fp32",
                   base=config.rope_parameters["rope_theta"], layout=ours.layout)  # fmt: skip
    if FAMILIES[family]["arrangement"] != "blocks":  # the setting is what makes it equal
        assert not torch.allclose(blocks(q, k, positions.permute(1, 2, 0))[0], their_q, atol=1e-3)


def test_text_positions_are_plain_rope_in_every_arrangement():
    from posembed.schemes.rotary.rope import RotaryEmbedding

    q = torch.randn(1, 2, 9, 32)
    plain, _ = RotaryEmbedding(32, layout="interleaved")(q, q)
    for arrangement, axes in (("blocks", (0, 1, 2)), ("interleaved", (0, 1, 2)), ("zipped", (1, 2, 0))):
        ours, _ = MRoPE(32, mrope_section=[6, 6, 4], arrangement=arrangement, section_axes=axes, layout="interleaved")(
            q, q
        )
        torch.testing.assert_close(ours, plain)


def test_partial_mrope_passes_the_rest_through():
    q = torch.randn(1, 2, 5, 16)
    coords = torch.randint(0, 50, (5, 3))
    ours, _ = MRoPE(16, rotary_dim=8, mrope_section=[2, 1, 1])(q, q, coords)
    assert torch.equal(ours[..., 8:], q[..., 8:]) and not torch.equal(ours[..., :8], q[..., :8])


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="arrangement must be one of .* got 'spiral'"):
        MRoPE(16, arrangement="spiral")
    with pytest.raises(ValueError, match=r"section_axes must order the axes 0, 1, 2 .* got \(0, 0, 1\)"):
        MRoPE(16, section_axes=(0, 0, 1))
    with pytest.raises(ValueError, match="summing to rotary_dim / 2 = 4"):
        MRoPE(16, rotary_dim=8, mrope_section=[2, 3, 3])
    with pytest.raises(ValueError, match="must be equal; got"):
        mrope_pairs((2, 1, 1), "zipped")
    with pytest.raises(ValueError, match="arrangement must be one of"):
        mrope_pairs((2, 1, 1), "spiral")
    assert "arrangement='zipped', section_axes=(1, 2, 0)" in repr(
        MRoPE(16, mrope_section=[2, 2, 4], arrangement="zipped", section_axes=(1, 2, 0))
    )


def test_batched_text_positions_are_transformers_text_positions():
    """transformers' text ``position_ids`` ``(B, T)`` (expanded to three rows inside the module) are taken as they
    come."""
    family = ("qwen3_vl", "text_config", "Qwen3VLTextRotaryEmbedding")
    config, module, rotary = _theirs(*family, zipped=False)
    head_dim = config.head_dim
    positions = torch.stack([torch.arange(T), torch.arange(T) * 3 + 2])  # (B, T)
    q, k = torch.randn(B, H, T, head_dim), torch.randn(B, H, T, head_dim)
    their_q, their_k = module.apply_rotary_pos_emb(q, k, *rotary(q, positions))
    ours = MRoPE(head_dim, mrope_section=list(rotary.mrope_section), base=config.rope_parameters["rope_theta"],
                 angles="fp32", arrangement="interleaved")  # fmt: skip
    our_q, our_k = ours(q, k, positions)
    torch.testing.assert_close(our_q, their_q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(our_k, their_k, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"position_ids has shape \(3, 13\)"):
        ours(q, k, positions.repeat(3, 1)[:3])  # neither (B, T) nor coordinates
