"""Pixtral's 2-D RoPE: full-tensor parity with transformers' PixtralVisionRotaryEmbedding + apply_rotary_pos_emb."""

from __future__ import annotations

import pytest
import torch

from posembed.schemes.rotary.pixtral import PixtralRotary, patch_coordinates, pixtral_frequencies
from tests.helpers import assert_close

pixtral = pytest.importorskip("transformers.models.pixtral.modeling_pixtral")

GRIDS = [(3, 4), (2, 5)]  # two images, in patches (rows, columns)


def _transformers(head_dim: int, theta: float = 10000.0):
    from transformers import PixtralVisionConfig

    config = PixtralVisionConfig(
        hidden_size=2 * head_dim, num_attention_heads=2, intermediate_size=8, num_hidden_layers=1,
        image_size=64, patch_size=8, rope_parameters={"rope_type": "axial", "rope_theta": theta},
    )  # fmt: skip
    return pixtral.PixtralVisionRotaryEmbedding(config)


@pytest.mark.parametrize("head_dim, theta", [(16, 10000.0), (24, 500.0)])
def test_equals_transformers(head_dim, theta):
    torch.manual_seed(0)
    positions = patch_coordinates(GRIDS)  # (T, 2), as PixtralVisionModel.forward stacks them
    q, k = torch.randn(1, 2, positions.shape[0], head_dim), torch.randn(1, 2, positions.shape[0], head_dim)
    reference = _transformers(head_dim, theta)
    cos, sin = reference(q, positions)  # (T, D)
    q_ref, k_ref = pixtral.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=0)
    rope = PixtralRotary(head_dim, base=theta, angles="fp32")
    q_rot, k_rot = rope(q, k, positions)
    assert_close(q_rot, q_ref)
    assert_close(k_rot, k_ref)
    ours_cos, ours_sin = rope.cos_sin(positions)  # (T, D/2): transformers repeats it for the two halves
    assert torch.equal(torch.cat([ours_cos, ours_cos], -1), cos) and torch.equal(
        torch.cat([ours_sin, ours_sin], -1), sin
    )
    assert torch.equal(rope.inv_freq, reference.inv_freq)
    exact = PixtralRotary(head_dim, base=theta)(q, k, positions)  # small angles: exact mode agrees too
    assert_close(exact[0], q_ref) and assert_close(exact[1], k_ref)


def test_patch_coordinates_equal_transformers_meshgrid():
    expected = []
    for rows, columns in GRIDS:
        h, w = torch.meshgrid(torch.arange(rows), torch.arange(columns), indexing="ij")
        expected.append(torch.stack([h.flatten(), w.flatten()], dim=-1))
    assert torch.equal(patch_coordinates(GRIDS), torch.cat(expected))


def test_rows_use_even_frequencies_columns_odd():
    inv_freq, axis_of = pixtral_frequencies(8)
    full = 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8)
    assert torch.equal(inv_freq, torch.cat([full[0::2], full[1::2]])) and axis_of.tolist() == [0, 0, 1, 1]
    rope = PixtralRotary(8)
    cos, _ = rope.cos_sin(torch.tensor([[0, 3]]))  # row 0: the row pairs do not turn
    assert torch.equal(cos[0, :2], torch.ones(2)) and not torch.equal(cos[0, 2:], torch.ones(2))


def test_scores_depend_only_on_patch_offsets():
    torch.manual_seed(1)
    rope = PixtralRotary(16)
    positions = patch_coordinates([(3, 3)])
    q, k = torch.randn(1, 2, 9, 16), torch.randn(1, 2, 9, 16)
    scores = lambda p: (lambda a, b: a @ b.transpose(-1, -2))(*rope(q, k, p))  # noqa: E731
    assert_close(scores(positions), scores(positions + torch.tensor([5, 11])), atol=1e-4, rtol=1e-4)


def test_errors():
    with pytest.raises(ValueError, match="head_dim must be even; got head_dim=7"):
        PixtralRotary(7)
    with pytest.raises(ValueError, match=r"position_ids has shape \(4, 3\); expected coordinates \(4, 2\)"):
        PixtralRotary(8)(torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8), torch.zeros(4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="height must be positive, got 0"):
        patch_coordinates([(0, 2)])
