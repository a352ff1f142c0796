"""RotaryEmbedding's ``direction`` and ``channels`` settings against the transformers modules that need them.

NanoChat turns every pair the other way (``rotate_half`` is ``cat(x2, -x1)``); DeepSeek-V4 rotates
interleaved pairs in the *last* ``rotary_dim`` channels of each head. Full tensors, transformers'
own rotary module and rotation function, ``angles="fp32"``.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from posembed.schemes.rotary.rope import RotaryEmbedding
from posembed.schemes.rotary.rotation import apply_rotary, apply_rotary_placed

transformers = pytest.importorskip("transformers")

B, H, T = 2, 3, 11


def _theirs(model_type: str, rotary: str):
    config = transformers.CONFIG_MAPPING[model_type]()
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    return config, module, getattr(module, rotary)(config)


def test_nanochat_turns_the_other_way():
    config, module, rotary = _theirs("nanochat", "NanoChatRotaryEmbedding")
    head_dim = rotary.inv_freq.numel() * 2
    positions = torch.arange(3, 3 + T)[None].expand(B, T)
    q, k = torch.randn(B, H, T, head_dim), torch.randn(B, H, T, head_dim)
    cos, sin = rotary(q, positions)
    their_q, their_k = module.apply_rotary_pos_emb(q, k, cos, sin)
    ours = RotaryEmbedding(head_dim, base=config.rope_parameters["rope_theta"], direction="reversed", angles="fp32")
    our_q, our_k = ours(q, k, position_ids=positions)
    torch.testing.assert_close(our_q, their_q, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(our_k, their_k, rtol=1e-6, atol=1e-6)
    forward_q, _ = RotaryEmbedding(head_dim, base=config.rope_parameters["rope_theta"], angles="fp32")(
        q, k, position_ids=positions
    )
    assert not torch.allclose(forward_q, their_q, atol=1e-2)  # the setting is what makes it equal


@pytest.mark.parametrize("layer", ["main", "compress"])
def test_deepseek_v4_rotates_the_last_channels_interleaved(layer):
    config, module, rotary = _theirs("deepseek_v4", "DeepseekV4RotaryEmbedding")
    params = config.rope_parameters[layer]
    rotary_dim = getattr(rotary, f"{layer}_inv_freq").numel() * 2
    assert rotary_dim == int(config.head_dim * params["partial_rotary_factor"])
    positions = torch.arange(T)[None].expand(B, T) * 7
    x = torch.randn(B, H, T, config.head_dim)
    cos, sin = rotary(x, positions, layer)
    theirs = module.apply_rotary_pos_emb(x, cos, sin)
    ours = RotaryEmbedding(config.head_dim, rotary_dim=rotary_dim, base=params["rope_theta"], layout="interleaved",
                           channels="last", angles="fp32")  # fmt: skip
    our_x, _ = ours(x, x, position_ids=positions)
    torch.testing.assert_close(our_x, theirs, rtol=1e-6, atol=1e-6)
    assert torch.equal(our_x[..., : config.head_dim - rotary_dim], x[..., : config.head_dim - rotary_dim])


def test_reversed_is_the_inverse_turn_and_last_is_a_channel_shift():
    x = torch.randn(B, H, T, 10)
    angles = torch.randn(T, 3)
    cos, sin = angles.cos(), angles.sin()
    back = apply_rotary_placed(apply_rotary(x, cos, sin), cos, sin, direction="reversed")
    torch.testing.assert_close(back, x, rtol=1e-5, atol=1e-5)
    last = apply_rotary_placed(x, cos, sin, "interleaved", channels="last")
    shifted = apply_rotary(x.roll(6, -1), cos, sin, "interleaved").roll(-6, -1)
    torch.testing.assert_close(last, shifted)


def test_the_settings_are_checked_and_shown():
    with pytest.raises(ValueError, match="direction must be one of .* got 'backwards'"):
        RotaryEmbedding(8, direction="backwards")
    with pytest.raises(ValueError, match="channels must be one of .* got 'middle'"):
        RotaryEmbedding(8, channels="middle")
    assert "direction='reversed', channels='last'" in repr(
        RotaryEmbedding(8, rotary_dim=4, direction="reversed", channels="last")
    )
    assert "direction" not in repr(RotaryEmbedding(8))


def test_a_gradient_flows_through_the_last_channels():
    x = torch.randn(1, 1, T, 8, requires_grad=True)
    q, _ = RotaryEmbedding(8, rotary_dim=4, channels="last", direction="reversed")(x, x)
    q.pow(2).sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach(), rtol=1e-5, atol=1e-5)  # a rotation keeps the norm


def test_an_odd_frequency_width_is_transformers_ceil():
    """GLM-4V-MoE's text rotary: head_dim 42, partial 0.5 -> dim 21 -> 11 frequencies over 22 channels."""
    config, module, rotary = _theirs("glm4_moe", "Glm4MoeRotaryEmbedding")
    config.head_dim, config.rope_parameters = 42, {**config.rope_parameters, "partial_rotary_factor": 0.5}
    rotary = type(rotary)(config)
    positions = torch.arange(T)[None] * 5
    q = torch.randn(1, H, T, 42)
    cos, sin = rotary(q, positions)
    their_q, _ = module.apply_rotary_pos_emb(q, q, cos, sin)
    ours = RotaryEmbedding(42, frequency_dim=21, base=config.rope_parameters["rope_theta"], angles="fp32")
    assert ours.rotary_dim == 22 and "frequency_dim=21" in repr(ours)
    torch.testing.assert_close(ours(q, q, position_ids=positions)[0], their_q, rtol=1e-6, atol=1e-6)
    with pytest.raises(
        ValueError, match="frequency_dim=21 gives 11 frequencies, which rotate 22 channels; rotary_dim=20"
    ):
        RotaryEmbedding(42, frequency_dim=21, rotary_dim=20)
    from posembed.schemes.rotary.scaling import LinearScalingRotary, NTKAwareRotary

    with pytest.raises(ValueError, match=r"an odd frequency_dim \(21\) .* NTKAwareRotary does not take it"):
        NTKAwareRotary(42, factor=2.0, frequency_dim=21)
    linear = LinearScalingRotary(
        42, factor=2.0, frequency_dim=21, base=config.rope_parameters["rope_theta"], angles="fp32"
    )
    torch.testing.assert_close(
        linear.inv_freq, ours.inv_freq / 2.0
    )  # transformers' linear init divides the 21-wide ones
