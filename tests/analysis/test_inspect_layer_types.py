"""The inspector reads a per-layer-type RoPE config (Gemma 3) through the one RoPE reader."""

from __future__ import annotations

import json

import pytest

from posembed.analysis.scheme_details import load_for_inspect
from posembed.interop.rope.config import rotary_from_hf_config
from posembed.interop.rope.settings import read_rope_settings

pytest.importorskip("transformers")


def _save_gemma3(folder):
    from transformers import Gemma3TextConfig, Gemma3TextModel

    config = Gemma3TextConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=256,
        sliding_window=16,
        layer_types=["sliding_attention", "full_attention"],
    )
    Gemma3TextModel(config).save_pretrained(folder)
    return folder


def test_rotary_sections_for_a_config_with_two_layer_types(tmp_path):
    folder = _save_gemma3(tmp_path / "gemma3")
    source = load_for_inspect(folder)
    assert not any("could not be read" in note for note in source.notes), source.notes

    first = read_rope_settings(json.loads((folder / "config.json").read_text()))[0]
    assert type(source.scheme).__name__ == "RotaryEmbedding"
    assert float(source.scheme.base) == pytest.approx(first.theta)
    assert any("2 layer types" in note for note in source.notes)
    assert f"theta {first.theta:g}" in source.positions
    with pytest.raises(ValueError, match="layer_type"):  # why the inspector no longer goes through from_hf_config
        rotary_from_hf_config(folder)
