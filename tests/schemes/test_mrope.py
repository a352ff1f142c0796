"""Qwen2-VL's M-RoPE: full-tensor parity with transformers' Qwen2VLRotaryEmbedding, and the position ids
of interleaved text and images equal to ``Qwen2VLModel.get_rope_index``."""

from __future__ import annotations

import pytest
import torch

from posembed.schemes.rotary.mrope import MRoPE, default_mrope_section
from posembed.schemes.rotary.mrope_positions import IMAGE, TEXT, VIDEO, mrope_position_ids, vision_positions
from posembed.schemes.rotary.rope import RotaryEmbedding
from tests.helpers import assert_close

qwen2_vl = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")

SECTION = [2, 3, 3]  # head_dim 16: 8 frequencies = 2 time + 3 rows + 3 columns
THETA = 1e6


@pytest.fixture(scope="module")
def model():
    """A tiny Qwen2-VL (random weights) built from transformers' own config class."""
    from transformers import Qwen2VLConfig

    text = dict(
        hidden_size=32,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=16,
        num_hidden_layers=1,
        vocab_size=64,
        bos_token_id=None,
        eos_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": THETA, "mrope_section": SECTION},
    )
    vision = dict(
        depth=1,
        embed_dim=16,
        hidden_size=32,
        num_heads=2,
        mlp_ratio=1,
        spatial_merge_size=2,
        patch_size=4,
        temporal_patch_size=2,
    )
    config = Qwen2VLConfig(text_config=text, vision_config=vision, bos_token_id=None, eos_token_id=None)
    return qwen2_vl.Qwen2VLModel(config).eval()


def _types(*runs: tuple[int, int]) -> torch.Tensor:
    return torch.cat([torch.full((n,), kind) for kind, n in runs])


def test_positions_equal_get_rope_index_text_image_text(model):
    """Text, one image of grid (1, 4, 4) after the 2 x 2 merge (8 x 8 patches), text."""
    types = _types((TEXT, 3), (IMAGE, 16), (TEXT, 2))[None]  # (1, 21)
    grids = torch.tensor([[1, 8, 8]])
    expected, expected_deltas = model.get_rope_index(torch.zeros_like(types), types, image_grid_thw=grids)
    positions, deltas = mrope_position_ids(types, grids, spatial_merge_size=2)
    assert torch.equal(positions.permute(2, 0, 1), expected) and torch.equal(deltas, expected_deltas)
    assert positions[0, :3].tolist() == [[0, 0, 0], [1, 1, 1], [2, 2, 2]]  # text: the same position on every axis
    assert positions[0, 3].tolist() == [3, 3, 3] and positions[0, 18].tolist() == [3, 6, 6]
    assert positions[0, 19:].tolist() == [[7, 7, 7], [8, 8, 8]]  # text resumes at 3 + max(4, 4)


def test_positions_equal_get_rope_index_batch_padding_video(model):
    """Two rows: left padding, an image and a video (2 frames) of non-square grids."""
    row0 = _types((TEXT, 1), (IMAGE, 6), (TEXT, 2), (VIDEO, 8), (TEXT, 1))  # 18 tokens
    row1 = _types((TEXT, 2), (TEXT, 3), (IMAGE, 4), (TEXT, 9))  # 2 of them padding
    types = torch.stack([row0, row1])
    mask = torch.ones_like(types)
    mask[1, :2] = 0
    images, videos = torch.tensor([[1, 4, 6], [1, 4, 4]]), torch.tensor([[2, 4, 4]])
    expected, expected_deltas = model.get_rope_index(
        torch.zeros_like(types), types, image_grid_thw=images, video_grid_thw=videos, attention_mask=mask
    )
    positions, deltas = mrope_position_ids(types, images, videos, spatial_merge_size=2, attention_mask=mask)
    assert torch.equal(positions.permute(2, 0, 1), expected) and torch.equal(deltas, expected_deltas)


@pytest.mark.parametrize("angles", ["fp32", "exact"])
def test_rotation_equals_transformers(model, angles):
    torch.manual_seed(0)
    types = torch.stack([_types((TEXT, 3), (IMAGE, 16), (TEXT, 2)), _types((TEXT, 21))])
    positions, _ = mrope_position_ids(types, torch.tensor([[1, 8, 8]]))  # (B, T, 3)
    q, k = torch.randn(2, 2, 21, 16), torch.randn(2, 2, 21, 16)
    cos, sin = model.language_model.rotary_emb(q, positions.permute(2, 0, 1))  # (B, T, D)
    q_ref, k_ref = qwen2_vl.apply_rotary_pos_emb(q, k, cos, sin)
    mrope = MRoPE(16, mrope_section=SECTION, base=THETA, angles=angles)
    q_rot, k_rot = mrope(q, k, positions)
    assert_close(q_rot, q_ref)
    assert_close(k_rot, k_ref)
    if angles == "fp32":  # transformers' float32 angles: cos/sin bit for bit
        ours_cos, ours_sin = mrope.cos_sin(positions)
        assert torch.equal(torch.cat([ours_cos] * 2, -1), cos) and torch.equal(torch.cat([ours_sin] * 2, -1), sin)


def test_text_only_is_plain_rope():
    q, k = torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
    positions = torch.arange(10, 16)
    for a, b in zip(MRoPE(16, base=THETA)(q, k, positions), RotaryEmbedding(16, base=THETA)(q, k, positions)):
        assert torch.equal(a, b)


def test_sections_pick_axes():
    mrope = MRoPE(16, mrope_section=SECTION)
    cos, _ = mrope.cos_sin(torch.tensor([[0, 5, 0]]))  # only the rows move
    moved = ~torch.isclose(cos[0], torch.ones(8))
    assert moved.tolist() == [False, False, True, True, True, False, False, False]
    assert default_mrope_section(128) == (16, 24, 24) and sum(default_mrope_section(12)) == 6


def test_vision_positions_and_builder_errors():
    assert vision_positions(0, (2, 2, 2), 1)[:, 0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    with pytest.raises(
        ValueError, match="a run of 3 vision tokens .* does not match its grid \\(1, 4, 4\\) / merge 2: 4 tokens"
    ):
        mrope_position_ids(_types((IMAGE, 3))[None], [(1, 4, 4)])
    with pytest.raises(ValueError, match="more image runs than grids given"):
        mrope_position_ids(_types((IMAGE, 4))[None])
    with pytest.raises(ValueError, match="token_types holds 3"):
        mrope_position_ids(torch.tensor([[3]]))


def test_errors():
    with pytest.raises(ValueError, match=r"summing to head_dim / 2 = 8; got mrope_section=\[2, 3, 4\]"):
        MRoPE(16, mrope_section=[2, 3, 4])
    with pytest.raises(ValueError, match="three non-negative ints"):
        MRoPE(16, mrope_section=[2.0, 3, 3])
    with pytest.raises(ValueError, match=r"position_ids has shape \(2, 5, 2\); expected coordinates \(5, 3\)"):
        MRoPE(16)(torch.randn(2, 1, 5, 16), torch.randn(2, 1, 5, 16), torch.zeros(2, 5, 2, dtype=torch.long))
