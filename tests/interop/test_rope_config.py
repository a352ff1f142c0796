"""posembed.interop.rope.config: a transformers config as an object, a dict or a path, in either spelling.

Frequencies and attention factors are compared with transformers' own rope init functions
(full tensors); the rotated q/k parity per rope type is in tests/schemes/test_rotary_config.py.
"""

import json

import pytest
import torch

from posembed.interop.rope.config import read_config, rope_parameters, rotary_from_hf_config
from posembed.schemes.rotary import scaling as rs
from tests.helpers import assert_close

transformers = pytest.importorskip("transformers")
from transformers import Gemma3TextConfig, LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402

HEADS, HEAD_DIM = 4, 16
PARAMS = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "linear": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "original_max_position_embeddings": 16},
    "longrope": {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 16,
                 "short_factor": [1.0, 1.1, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5],
                 "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "rope_theta": 500000.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 128},
}  # fmt: skip


def _config(rope_type: str) -> LlamaConfig:
    return LlamaConfig(hidden_size=HEADS * HEAD_DIM, num_attention_heads=HEADS, max_position_embeddings=64,
                       rope_parameters=dict(PARAMS[rope_type]))  # fmt: skip


def _hf_init(config):
    if config.rope_parameters["rope_type"] == "default":
        return llama.LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[config.rope_parameters["rope_type"]](config)


def _v4_dict(config: LlamaConfig) -> dict:
    """The transformers 4.x spelling of the same config: rope_scaling plus a top-level rope_theta."""
    raw = config.to_dict()
    params = dict(raw.pop("rope_parameters"))
    raw["rope_theta"] = params.pop("rope_theta")
    raw["rope_scaling"] = None if params["rope_type"] == "default" else params
    return raw


@pytest.mark.parametrize("rope_type", sorted(PARAMS))
def test_every_form_and_spelling_gives_transformers_frequencies(rope_type, tmp_path):
    config = _config(rope_type)
    inv_freq, attention_scaling = _hf_init(config)
    (tmp_path / "config.json").write_text(json.dumps(_v4_dict(config)))
    forms = {
        "object": config,
        "dict_v5": config.to_dict(),
        "dict_v4": _v4_dict(config),
        "folder": tmp_path,
        "file": str(tmp_path / "config.json"),
    }
    for name, form in forms.items():
        rope = rotary_from_hf_config(form)
        assert_close(rope.inv_freq, inv_freq, msg=f"{rope_type} from {name}")
        assert rope.attention_scaling == pytest.approx(attention_scaling, rel=1e-12), name
        assert rope.base == PARAMS[rope_type]["rope_theta"], name


def test_per_layer_type_parameters_need_layer_type():
    config = Gemma3TextConfig(head_dim=16, num_attention_heads=2, hidden_size=64)
    with pytest.raises(ValueError, match=r"nested by layer type \((sliding_attention, full_attention|"
                                         r"full_attention, sliding_attention)\); pass layer_type="):  # fmt: skip
        rotary_from_hf_config(config)
    for layer_type, params in config.rope_parameters.items():
        rope = rotary_from_hf_config(config, layer_type=layer_type)
        assert rope.base == params["rope_theta"] and rope.head_dim == 16
        if params["rope_type"] == "default":
            expected = 1.0 / (params["rope_theta"] ** (torch.arange(0, 16, 2, dtype=torch.int64).float() / 16))
            assert_close(rope.inv_freq, expected)
    with pytest.raises(ValueError, match=r"layer_type='chunked' is not in config.rope_parameters; layer types: "):
        rotary_from_hf_config(config, layer_type="chunked")
    with pytest.raises(ValueError, match="not nested by layer type"):
        rotary_from_hf_config(_config("default"), layer_type="full_attention")


def test_nested_dict_with_a_scaled_layer_type():
    raw = {"head_dim": 8, "max_position_embeddings": 64, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}  # fmt: skip
    full = rotary_from_hf_config(raw, layer_type="full_attention")
    assert isinstance(full, rs.LinearScalingRotary) and (full.factor, full.base) == (8.0, 1e6)
    assert type(rotary_from_hf_config(raw, layer_type="sliding_attention")) is rs.RotaryEmbedding


def test_builder_arguments_pass_through():
    rope = rotary_from_hf_config(_config("linear"), layout="interleaved", max_len=8, angles="fp32")
    assert (rope.layout, rope.max_len, rope.angles) == ("interleaved", 8, "fp32")
    assert rope_parameters({"rope_theta": 5e5})["rope_theta"] == 5e5
    assert rope_parameters({})["rope_type"] == "default"


def test_path_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no transformers config at .*config.json"):
        rotary_from_hf_config(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a JSON list, not a config object"):
        read_config(tmp_path)


def test_a_config_that_is_not_utf8_is_a_value_error_naming_the_file(tmp_path):
    # Latin-1 'é' (0xe9) at offset 36: was a bare UnicodeDecodeError naming neither the file nor what was expected
    (tmp_path / "config.json").write_bytes('{"model_type": "llama", "name": "caf\u00e9"}'.encode("latin-1"))
    for given in (tmp_path, tmp_path / "config.json", str(tmp_path)):
        with pytest.raises(ValueError) as caught:
            read_config(given)
        assert str(caught.value) == (
            f"{tmp_path / 'config.json'} is not UTF-8 JSON: byte 0xe9 at offset 36 cannot be decoded (invalid "
            "continuation byte); a transformers config.json is a UTF-8 JSON object, as from_pretrained reads it"
        )
    with pytest.raises(ValueError, match="config.json is not UTF-8 JSON: byte 0xe9"):
        rotary_from_hf_config(tmp_path)
