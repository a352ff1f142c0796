"""The reader takes what the model's own transformers code decides: the pairs its attention's rotation function
rotates (and which way, and which channels), the widths its rotary embedding builds per layer type, the head
width through its config class's aliases, and a multimodal config's text part.

Each layout case rotates random q / k with the model's own rotary embedding and rotation function and compares
the q·kᵀ scores with posembed's scheme built by ``rotary_from_hf_config`` (full tensors).
"""

from __future__ import annotations

import copy
import importlib

import pytest
import torch

from posembed.interop.rope import model as rope_model
from posembed.interop.rope.config import rotary_from_hf_config
from posembed.interop.rope.model import (
    build_config,
    model_own_positions,
    model_part,
    model_rotation,
    transformers_config,
)
from posembed.interop.rope.settings import layer_settings, read_rope_settings
from posembed.interop.rope_check.check import check_rope_config

transformers = pytest.importorskip("transformers")

#: small shapes: head_dim 16, 4 heads
SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 256}
#: families whose attention rotates interleaved pairs though the old hand table said halves (issue 32)
INTERLEAVED = ["cohere", "cohere2", "glm", "glm4", "helium", "ernie4_5", "ernie4_5_moe", "deepseek_v32"]
#: the rotation function each family's (main) attention calls, where it is not apply_rotary_pos_emb
APPLY = {"deepseek_v32": "apply_rotary_pos_emb_interleave"}


def _scores(model_type: str) -> tuple[torch.Tensor, torch.Tensor]:
    """q·kᵀ of random q / k rotated by the model's own rotary embedding and rotation function, and by posembed's."""
    raw = {
        "model_type": model_type,
        **SHAPE,
        "head_dim": 16,
        "qk_rope_head_dim": 16,
    }  # latent classes: qk_rope_head_dim
    config = transformers_config(raw)
    module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    (name,) = [
        n
        for n in dir(module)
        if n.endswith("RotaryEmbedding") and hasattr(getattr(module, n), "compute_default_rope_parameters")
    ]
    embedding = getattr(module, name)(copy.deepcopy(config))
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 12, 16), torch.randn(1, 4, 12, 16)
    positions = torch.arange(12)[None]
    cos, sin = embedding(q, positions)
    apply = getattr(module, APPLY.get(model_type, "apply_rotary_pos_emb"))
    their_q, their_k = apply(q, k, cos, sin)
    scheme = rotary_from_hf_config(raw, angles="fp32")
    our_q, our_k = scheme(q, k, position_ids=positions[0])
    return their_q @ their_k.transpose(-1, -2), our_q @ our_k.transpose(-1, -2)


@pytest.mark.parametrize("model_type", INTERLEAVED)
def test_the_layout_is_the_rotation_function_the_attention_calls(model_type):
    assert (
        layer_settings({"model_type": model_type, **SHAPE, "head_dim": 16, "qk_rope_head_dim": 16}).layout
        == "interleaved"
    )
    theirs, ours = _scores(model_type)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "mistral"])
def test_halves_stay_halves(model_type):
    assert layer_settings({"model_type": model_type, **SHAPE}).layout == "half"
    theirs, ours = _scores(model_type)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_the_probe_reads_direction_and_channels():
    """nanochat turns the other way (cat(x2, -x1)); DeepSeek-V4 rotates the last channels; a rope_interleave switch."""
    assert model_rotation(transformers_config({"model_type": "nanochat"})) == ("half", "reversed", "first")
    assert model_rotation(transformers_config({"model_type": "deepseek_v4"})) == ("interleaved", "forward", "last")
    assert model_rotation(transformers_config({"model_type": "deepseek_v3", "rope_interleave": False}))[0] == "half"
    assert model_rotation(transformers_config({"model_type": "deepseek_v3"}))[0] == "interleaved"


def test_per_layer_head_widths_are_the_models():
    """Gemma 4's full-attention layers span its global_head_dim (512 by default; proportional RoPE turning a
    quarter of it), its sliding ones head_dim (256)."""
    widths = {s.layer_type: (s.head_dim, s.rotary_dim) for s in read_rope_settings({"model_type": "gemma4_text"})}
    config = transformers_config({"model_type": "gemma4_text"})
    module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    embedding = module.Gemma4TextRotaryEmbedding(copy.deepcopy(config))
    assert {layer: head for layer, (head, _) in widths.items()} == {
        layer: 2 * getattr(embedding, f"{layer}_inv_freq").numel() for layer in widths
    }
    assert widths == {"full_attention": (512, 128), "sliding_attention": (256, 256)}  # full: proportional, 0.25


def test_a_multimodal_config_reads_its_text_model():
    config = transformers.CONFIG_MAPPING["qwen2_vl"]().to_dict()
    config["text_config"]["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 5e5,
        "mrope_section": [16, 24, 24],
    }
    scheme = rotary_from_hf_config(config)
    assert type(scheme).__name__ == "MRoPE" and scheme.base == 5e5 and scheme.mrope_section == (16, 24, 24)
    report = check_rope_config(config)
    assert report.model_type == "qwen2_vl_text" and report.layers[0].settings.theta == 5e5
    assert model_part(config, "vision")["model_type"] == "qwen2_vl_vision"
    with pytest.raises(ValueError, match="the config has no audio_config"):
        model_part(config, "audio")


def test_without_transformers_a_multimodal_config_still_descends(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)  # import transformers now raises ImportError
    raw = {"model_type": "qwen2_vl", "text_config": {**SHAPE, "rope_theta": 1e6}}
    assert layer_settings(raw).theta == 1e6 and model_part(raw) == {**SHAPE, "rope_theta": 1e6}


@pytest.mark.parametrize(("model_type", "cls", "args"), [
    ("efficientloftr", "EfficientLoFTRRotaryEmbedding", "x"),
    ("eomt_dinov3", "EomtDinov3RotaryEmbedding", "pixel_values"),
])  # fmt: skip
def test_a_rotary_that_computes_its_own_positions_is_refused_with_its_family(model_type, cls, args):
    """Their forwards take no positions (a feature map, pixels) and give no fixed grid: posembed refuses rather than
    read a 1-D RoPE (Llama 4's vision tower, whose table is its patch grid's, is read: test_rope_axial_grid.py)."""
    config = transformers.CONFIG_MAPPING[model_type]()
    with pytest.raises(
        ValueError, match=rf"its rotary embedding computes its own positions \({cls}\.forward\({args}\)\)"
    ):
        rotary_from_hf_config(config)
    assert model_own_positions(config) == f"{cls}.forward({args})"


def test_a_rotary_that_takes_positions_is_read():
    llama4 = transformers.CONFIG_MAPPING["llama4"]()
    assert model_own_positions(llama4.text_config) is None and model_own_positions(transformers.LlamaConfig()) is None
    assert rotary_from_hf_config(llama4).head_dim == 128  # the top-level config: its language model's
    assert model_own_positions(llama4.vision_config) == "Llama4VisionRotaryEmbedding.forward(hidden_states)"
    vision = rotary_from_hf_config(llama4, part="vision")  # its own patch grid's axial RoPE (test_rope_axial_grid.py)
    assert (type(vision).__name__, vision.head_dim, vision.axis_order) == ("AxialRotary", 48, (1, 0))


def test_the_config_object_is_built_once_per_dict_and_handed_out_as_copies(monkeypatch):
    """transformers' class builds a dict once (in the dict's order: the layer types'), each caller gets its own copy;
    a dict JSON would change (a tuple) is built as it is, a config the class refuses raises again."""
    raw = {
        "model_type": "gemma3_text",
        **SHAPE,
        "head_dim": 16,
        "bos_token_id": 901,
        "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        },
    }
    calls = []
    cls = type(build_config({"model_type": "gemma3_text"}))
    built = cls.from_dict.__func__
    monkeypatch.setattr(cls, "from_dict", classmethod(lambda c, d, **kw: calls.append(1) or built(c, d, **kw)))
    first, second = build_config(raw), build_config(copy.deepcopy(raw))
    assert len(calls) == 1 and first is not second and first.to_dict() == second.to_dict()
    first.rope_parameters["full_attention"]["factor"] = 2.0  # a caller's edit stays its own
    assert build_config(raw).rope_parameters["full_attention"]["factor"] == 8.0 and len(calls) == 1
    assert list(build_config(raw).rope_parameters) == ["sliding_attention", "full_attention"]
    assert [s.layer_type for s in read_rope_settings(raw)] == ["sliding_attention", "full_attention"]
    tupled = {
        **raw,
        "layer_types": ("sliding_attention", "full_attention"),
    }  # the class refuses a tuple: not made a list
    with pytest.raises(Exception, match="expected a list, got tuple"):
        build_config(tupled)
    assert transformers_config(tupled) is None and len(calls) == 3  # refused each time, never cached
    assert rope_model.build_config({"model_type": "no such model"}) is None
