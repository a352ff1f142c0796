"""M-RoPE with a scaled rope type (:meth:`MRoPE.deal`): its sections deal the scaled type's frequencies and factor.

Parity with transformers' M-RoPE classes under linear, dynamic, yarn, llama3 and longrope scaling at 3-row
positions is the catalogue's (tests/interop/test_rope_catalogue.py); here the arithmetic and the bad inputs.
"""

import pytest
import torch

from posembed import LongRoPERotary, MRoPE, RotaryEmbedding, YaRNRotary
from posembed.schemes.rotary.axial import axial_cos_sin
from tests.helpers import assert_close

D = 16


@pytest.mark.parametrize("arrangement", ["blocks", "interleaved"])
def test_the_sections_deal_the_scaled_frequencies_and_fold_in_the_factor(arrangement):
    yarn = YaRNRotary(D, factor=4.0, original_max_len=32)
    mrope = MRoPE(D, mrope_section=(4, 2, 2), arrangement=arrangement).deal(yarn)
    plain = MRoPE(D, mrope_section=(4, 2, 2), arrangement=arrangement)
    coords = torch.tensor([[3, 5, 7], [40, 1, 2]])
    expected = axial_cos_sin(coords, yarn.inv_freq, plain.axis_of)  # the blocks / round robin keep frequency order
    for ours, theirs in zip(mrope.cos_sin(coords), expected):
        assert_close(ours, theirs * yarn.attention_scaling)
    assert not torch.allclose(mrope.cos_sin(coords)[0], plain.cos_sin(coords)[0])


def test_text_positions_are_the_scaled_rope():
    longrope = LongRoPERotary(D, short_factor=[1.0] * 8, long_factor=[2.0] * 8, original_max_len=16, factor=4.0)
    mrope = MRoPE(D).deal(longrope)
    for length in (16, 40):  # both sides of the switch: the call's largest coordinate decides
        positions = torch.arange(length)
        coords = positions[:, None].expand(length, 3)
        for ours, theirs in zip(mrope.cos_sin(coords), longrope.cos_sin(positions)):
            assert_close(ours, theirs)
        q, k = torch.randn(1, 2, length, D), torch.randn(1, 2, length, D)
        for ours, theirs in zip(mrope(q, k, position_ids=coords), longrope(q, k, position_ids=positions)):
            assert_close(ours, theirs, atol=1e-6, rtol=1e-6)


def test_deal_refuses_what_is_not_a_rotary_of_its_width():
    with pytest.raises(TypeError, match="frequencies must be a RotaryEmbedding \\(a scaled rope type\\), got MRoPE"):
        MRoPE(D).deal(MRoPE(D))
    with pytest.raises(ValueError, match="frequencies rotate 8 channels, the sections 16"):
        MRoPE(D).deal(RotaryEmbedding(D, rotary_dim=8))


def test_a_dealt_mrope_is_not_saved_as_a_plain_one():
    from posembed.schemes.config import scheme_config

    with pytest.raises(ValueError, match="cannot save MRoPE dealing YaRNRotary's frequencies in a config"):
        scheme_config(MRoPE(D).deal(YaRNRotary(D, factor=4.0, original_max_len=8)))
    assert scheme_config(MRoPE(D))["name"] == "mrope"
