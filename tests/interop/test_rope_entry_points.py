"""The RoPE entry points agree on a config's layout: the builder, the zoo and rope check read
the one :class:`RopeSettings` and take its layout."""

from __future__ import annotations

import pytest

from posembed.interop.rope.config import rotary_from_hf_config
from posembed.interop.rope.settings import read_rope_settings
from posembed.interop.zoo import zoo_schemes

GPTJ = {"model_type": "gptj", "n_embd": 64, "n_head": 4, "rotary_dim": 8, "n_positions": 128, "n_layer": 2}
LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
    "num_hidden_layers": 2,
    "rope_theta": 1e4,
}


@pytest.mark.parametrize("config,layout", [(GPTJ, "interleaved"), (LLAMA, "half")], ids=["gptj", "llama"])
def test_builder_takes_the_settings_layout(config, layout):
    (settings,) = read_rope_settings(config)
    assert settings.layout == layout
    assert rotary_from_hf_config(config).layout == layout


def test_the_zoo_takes_the_settings_layout():
    assert {scheme.layout for scheme in zoo_schemes(LLAMA)} == {"half"}


def test_an_explicit_layout_still_wins():
    assert rotary_from_hf_config(GPTJ, layout="half").layout == "half"


def test_llama4_rotates_interleaved_pairs_through_the_settings():
    config = {
        "model_type": "llama4_text",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "head_dim": 16,
        "max_position_embeddings": 128,
        "num_hidden_layers": 2,
        "rope_theta": 5e5,
    }
    (settings,) = read_rope_settings(config)
    assert settings.layout == "interleaved" and rotary_from_hf_config(config).layout == "interleaved"
    assert {scheme.layout for scheme in zoo_schemes(config) if hasattr(scheme, "layout")} == {"interleaved"}
