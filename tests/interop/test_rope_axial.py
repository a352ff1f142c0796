"""Axial vision rotaries (``rope_type == "axial"``) read from the model's own module (posembed.interop.rope.axial)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from posembed.interop.rope.axial import AxialSettings, model_axial, pair_form  # noqa: E402
from posembed.interop.rope.config import rotary_from_hf_config  # noqa: E402
from posembed.schemes.rotary.axial import AxialRotary  # noqa: E402
from posembed.schemes.rotary.pixtral import PixtralRotary  # noqa: E402
from tests.interop import rope_catalogue as catalogue  # noqa: E402
from tests.interop import rope_catalogue_compare as compare  # noqa: E402

#: rotary class -> (num_axes, layout, axis_order, frequency_order, layout_span) its module shows (SETTINGS of issue 32)
PLACEMENTS = {
    "Qwen2VLVisionRotaryEmbedding": (2, "half", (0, 1), "blocks", "head"),
    "Sam3ViTRotaryEmbedding": (2, "interleaved", (0, 1), "blocks", "head"),
    "Sam2VideoVisionRotaryEmbedding": (2, "interleaved", (0, 1), "blocks", "head"),
    "Gemma4VisionRotaryEmbedding": (2, "half", (0, 1), "blocks", "axis"),
    "Step3p7VisionRotaryEmbedding": (2, "half", (1, 0), "blocks", "head"),
    "Inkling2VisionRotaryEmbedding": (2, "interleaved", (1, 0), "blocks", "head"),
    "Kimi_K25VisionRotaryEmbedding": (2, "half", (1, 0), "interleaved", "head"),
    "MiniMaxM3VLVisionRotaryEmbedding": (3, "half", (0, 1, 2), "blocks", "head"),
}


def _pair(rotary: str) -> catalogue.Pair:
    return next(pair for pair in catalogue.catalogue() if pair.rotary_class == rotary)


@pytest.mark.parametrize("rotary", sorted(PLACEMENTS))
def test_placement_read_from_the_module_and_exact(rotary):
    pair = _pair(rotary)
    _, _, sub, _ = compare.default_reference(pair)
    found = model_axial(sub)
    assert (found.num_axes, found.layout, found.axis_order, found.frequency_order, found.layout_span) == PLACEMENTS[
        rotary
    ]
    scheme = rotary_from_hf_config(sub, angles="fp32")
    assert isinstance(scheme, AxialRotary) and scheme.num_axes == found.num_axes
    assert compare.verdict(pair, "default") == (compare.EXACT, "")  # cos / sin and q·k through its attention's function


def test_pixtral_is_read_as_pixtral():
    pair = _pair("PixtralVisionRotaryEmbedding")
    _, _, sub, _ = compare.default_reference(pair)
    assert model_axial(sub).scheme == "rope_pixtral"
    assert isinstance(rotary_from_hf_config(sub, angles="fp32"), PixtralRotary)
    assert compare.verdict(pair, "default") == (compare.EXACT, "")


def test_qwen2_vl_vision_head_width_is_embed_dim_over_heads():
    from transformers import Qwen2VLConfig

    config = Qwen2VLConfig(vision_config={"embed_dim": 64, "num_heads": 4, "depth": 1})
    scheme = rotary_from_hf_config(config, part="vision")
    assert isinstance(scheme, AxialRotary) and scheme.head_dim == 16 and scheme.axis_dim == 8


def test_not_axial_configs_have_no_axial_settings():
    from transformers import LlamaConfig

    assert model_axial(LlamaConfig(hidden_size=64, num_attention_heads=4)) is None


def test_pair_form_reads_three_placements_and_refuses_others():
    pairs = torch.tensor([[0.5, 0.0, 0.25, 0.0], [0.0, 0.5, 0.0, 0.25]])
    assert pair_form(torch.cat([pairs, pairs], -1), 4)[1:] == ("half", "head")
    assert pair_form(pairs.repeat_interleave(2, -1), 4)[1:] == ("interleaved", "head")
    blocks = torch.cat([pairs[:, :2], pairs[:, :2], pairs[:, 2:], pairs[:, 2:]], -1)  # [h, h, w, w]
    form = pair_form(blocks, 4)
    assert form[1:] == ("half", "axis") and torch.equal(form[0], pairs)
    assert pair_form(torch.arange(8.0)[None], 4) is None
    assert AxialSettings._fields[-1] == "scheme"
