"""A config without ``head_dim`` takes its transformers config class's default, and a bare config's length is the
class's.

transformers 5.23's config classes declare ``head_dim`` as a field; where its default is a number (GPT-OSS 64,
GLM-4 and Qwen3 128, Qwen3-Next 256) a config without the key gets that number, not ``hidden_size //
num_attention_heads``, and the model's rotary embedding rotates that many channels. An explicit ``null`` is
derived (where the class accepts it). A config that states no RoPE field holds its class's parameters, so the
pre-training length of a yarn / llama3 class (GPT-OSS, Ministral 3, Apertus) is the class's, not the config's.
Each case is compared with the model's own rotary embedding.
"""

import copy
import sys

import pytest
import torch

from posembed.interop.rope.model import transformers_config
from posembed.interop.rope.settings import layer_settings, read_rope_settings
from posembed.interop.rope_check.check import check_rope_config
from posembed.interop.rope_check.stated import stated_of
from posembed.interop.zoo import zoo_decoder
from tests.interop.transformers_rope import assert_posembed_is_the_model

transformers = pytest.importorskip("transformers")

#: the shape without head_dim: derived, it would be 16
SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
         "intermediate_size": 64, "vocab_size": 100, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
         "max_position_embeddings": 4096}  # fmt: skip
#: model type -> the head_dim its config class fills in (transformers 5.23)
HEAD_DIMS = {
    "gpt_oss": 64,
    "glm4": 128,
    "qwen3": 128,
    "qwen3_next": 256,
    "helium": 128,
    "ernie4_5": 128,
    "seed_oss": 128,
}


@pytest.mark.parametrize("model_type", HEAD_DIMS)
def test_an_absent_head_dim_is_the_class_default(model_type):
    raw = {"model_type": model_type, **SHAPE, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}
    (settings,) = assert_posembed_is_the_model(raw)
    assert (settings.head_dim, stated_of(raw, settings).head_dim_given) == (HEAD_DIMS[model_type], False)
    (note,) = [t for t in check_rope_config(copy.deepcopy(raw), compare=False).traps if t.code == "head_dim"]
    assert note.severity == "note" and f"fills in its default {HEAD_DIMS[model_type]}, not" in note.message


def test_a_bare_config_rotates_the_class_head_dim():
    """A GPT-OSS config with no RoPE field and no head_dim: the class's yarn over its 64 channels."""
    (settings,) = assert_posembed_is_the_model({"model_type": "gpt_oss", **SHAPE})
    assert (settings.rope_type, settings.head_dim, settings.rotary_dim) == ("yarn", 64, 64)


@pytest.mark.parametrize("model_type", ["ernie4_5", "seed_oss", "llama"])
def test_a_null_or_undeclared_head_dim_is_derived(model_type):
    """An explicit ``head_dim: null`` is derived (these classes accept it), as is one a class has no default for."""
    raw = {
        "model_type": model_type,
        **SHAPE,
        "head_dim": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
    }
    (settings,) = assert_posembed_is_the_model(raw)
    assert settings.head_dim == 16
    del raw["head_dim"]
    assert read_rope_settings(raw)[0].head_dim == HEAD_DIMS.get(model_type, 16)


@pytest.mark.parametrize("model_type", ["jetmoe", "zamba2", "dbrx", "moonshine", "bailing_hybrid"])
def test_head_width_and_length_through_the_config_classes_aliases(model_type):
    """head_dim / heads / max length that the config class aliases (attribute_map) or derives are read from it."""
    config = transformers_config({"model_type": model_type})
    (settings,) = read_rope_settings({"model_type": model_type})
    derived = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    assert settings.head_dim == derived and settings.max_position_embeddings == config.max_position_embeddings


def test_without_transformers_the_dict_is_read_as_written(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    assert layer_settings({"model_type": "gpt_oss", **SHAPE, "rope_theta": 1.5e5}).head_dim == 16  # derived
    assert layer_settings({"model_type": "gpt_oss", **SHAPE, "head_dim": 64, "rope_theta": 1.5e5}).head_dim == 64


#: model type -> (rope_type, the pre-training length) its class's own parameters hold
BARE_LENGTHS = {"gpt_oss": ("yarn", 4096), "ministral3": ("yarn", 16384), "apertus": ("llama3", 8192)}


@pytest.mark.parametrize("model_type", BARE_LENGTHS)
def test_a_bare_config_has_the_class_default_length(model_type):
    """The length of parameters the class filled in is not given by the config: "class default", a note."""
    raw = {"model_type": model_type, **SHAPE, "head_dim": 16, "max_position_embeddings": 131072}  # past the lengths
    (settings,) = assert_posembed_is_the_model(raw)
    assert (settings.rope_type, settings.original_max_len) == BARE_LENGTHS[model_type]
    given = stated_of(raw, settings)
    assert (given.original_source, given.original_given) == ("class default", False)
    traps = [t for t in check_rope_config(copy.deepcopy(raw), compare=False).traps if "original" in t.code]
    assert [(t.code, t.severity) for t in traps] == [("original_missing", "note")]
    assert f"fills in its own {settings.rope_type} parameters" in traps[0].message


def test_stated_parameters_keep_their_own_length():
    raw = {
        "model_type": "gpt_oss",
        **SHAPE,
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 4.0,
            "rope_theta": 1.5e5,
            "original_max_position_embeddings": 1024,
        },
    }
    (settings,) = assert_posembed_is_the_model(raw)
    given = stated_of(raw, settings)
    assert (settings.original_max_len, given.original_source, given.original_given) == (1024, "parameters", True)


def test_the_zoo_decoder_takes_the_class_head_dim():
    """The zoo's model has the head dim its schemes were built for (Qwen3: 128 channels, not 16 // 2)."""
    config = {"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 16, "num_attention_heads": 2,
              "vocab_size": 11, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}  # fmt: skip
    model = zoo_decoder(config)
    assert model(torch.randint(0, 11, (1, 5))).shape == (1, 5, 11)
    assert {s.head_dim for s in model.layer_schemes} == {128}
