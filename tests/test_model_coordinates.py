"""Multi-axis rotary schemes (axial, Pixtral, M-RoPE) take coordinates through SelfAttention and the models."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from posembed.nn.attention.layer import SelfAttention
from posembed.nn.model.transformer import Decoder, Encoder
from posembed.schemes.rotary.axial import AxialRotary
from posembed.schemes.rotary.mrope import MRoPE
from posembed.schemes.rotary.mrope_positions import mrope_position_ids
from posembed.schemes.rotary.rope import RotaryEmbedding


def test_attention_with_coordinates_equals_rotating_by_hand():
    torch.manual_seed(0)
    layer = SelfAttention(32, 2, scheme=MRoPE(16, mrope_section=(2, 3, 3)), causal=True)
    x = torch.randn(2, 7, 32)
    types = torch.tensor([[0, 0, 1, 1, 1, 1, 0], [0, 1, 1, 1, 1, 0, 0]])
    coords, _ = mrope_position_ids(types, [(1, 4, 4), (1, 4, 4)])  # (B, T, 3)
    out = layer(x, position_ids=coords)
    q, k, v = layer.qkv_proj(x).view(2, 7, 3, 2, 16).permute(2, 0, 3, 1, 4)
    q, k = layer.scheme(q, k, coords)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 7, 32)
    torch.testing.assert_close(out, layer.out_proj(expected), rtol=0, atol=1e-6)


def test_text_coordinates_equal_plain_positions_in_a_decoder():
    torch.manual_seed(0)
    model = Decoder(17, dim=32, depth=2, num_heads=2, scheme=MRoPE(16, mrope_section=(2, 3, 3)))
    ids = torch.randint(0, 17, (2, 6))
    text = torch.arange(6)[None, :, None].expand(2, 6, 3)  # text tokens: the same position on every axis
    torch.testing.assert_close(model(ids, position_ids=text), model(ids), rtol=0, atol=0)


def test_rows_with_their_own_coordinates_equal_each_row_alone():
    torch.manual_seed(0)
    model = Decoder(17, dim=32, depth=2, num_heads=2, scheme=MRoPE(16, mrope_section=(2, 3, 3)))
    ids = torch.randint(0, 17, (2, 7))
    types = torch.tensor([[0, 0, 1, 1, 1, 1, 0], [0, 1, 1, 1, 1, 0, 0]])
    coords, _ = mrope_position_ids(types, [(1, 4, 4), (1, 4, 4)])
    both = model(ids, position_ids=coords)
    for row in range(2):
        alone = model(ids[row : row + 1], position_ids=coords[row])
        torch.testing.assert_close(both[row : row + 1], alone, rtol=0, atol=1e-6)
    assert not torch.equal(both, model(ids))  # the image coordinates are used (small init: small change)


def test_axial_encoder_is_equivariant_to_moving_patches_with_their_coordinates():
    torch.manual_seed(0)
    model = Encoder(11, dim=32, depth=2, num_heads=2, scheme=AxialRotary(16, num_axes=2))
    grid = torch.stack(torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij"), -1).reshape(12, 2)
    ids = torch.randint(0, 11, (1, 12))
    perm = torch.randperm(12)
    out = model(ids, position_ids=grid)
    moved = model(ids[:, perm], position_ids=grid[perm])
    torch.testing.assert_close(moved, out[:, perm], rtol=0, atol=1e-5)


def test_per_layer_mix_takes_coordinates_in_its_axial_layers():
    torch.manual_seed(0)
    model = Decoder(11, dim=32, depth=2, num_heads=2, schemes=[MRoPE(16, mrope_section=(2, 3, 3)), None])
    ids = torch.randint(0, 11, (1, 5))
    text = torch.arange(5)[:, None].expand(5, 3)
    torch.testing.assert_close(model(ids, position_ids=text), model(ids), rtol=0, atol=0)


def test_wrong_coordinates_are_named():
    model = Decoder(11, dim=32, depth=1, num_heads=2, scheme=MRoPE(16, mrope_section=(2, 3, 3)))
    with pytest.raises(ValueError, match=r"position_ids has shape \(5, 2\); expected coordinates \(5, 3\)"):
        model(torch.randint(0, 11, (1, 5)), position_ids=torch.zeros(5, 2, dtype=torch.long))


def test_one_axis_rotary_still_refuses_coordinates():
    model = Decoder(11, dim=32, depth=1, num_heads=2, scheme=RotaryEmbedding(16))
    with pytest.raises(ValueError, match="position_ids has shape"):
        model(torch.randint(0, 11, (1, 5)), position_ids=torch.zeros(1, 5, 3, dtype=torch.long))
