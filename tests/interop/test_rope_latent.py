"""Multi-head latent attention configs rotate ``qk_rope_head_dim`` channels per head, in their stated layout.

transformers 5.23's latent attention classes (DeepSeek-V2/V3/V3.2, MiniCPM3, GLM-4-MoE-Lite, Mistral 4, ...) set
``head_dim = qk_rope_head_dim`` (Mistral 4: ``qk_nope_head_dim + qk_rope_head_dim`` with the partial factor
``qk_rope_head_dim / head_dim``), which their rotary embedding reads; YaRN's attention scaling is
``get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)``. DeepSeek-V3's ``rope_interleave`` (default ``True``)
and DeepSeek-V2's complex rotation pair channels (2i, 2i + 1). Each case is compared with the model's own rotary
embedding, and ``rope check`` finds every comparison equal.
"""

import copy
import sys

import pytest
import torch

from posembed.interop.rope.config import rotary_from_settings
from posembed.interop.rope.settings import layer_settings
from posembed.interop.rope_check.check import check_rope_config
from posembed.interop.rope_check.stated import stated_of
from tests.interop.transformers_rope import assert_posembed_is_the_model, built

transformers = pytest.importorskip("transformers")

#: a small latent attention shape: derived, head_dim would be 16; the rotary width is 8
SHAPE = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
         "intermediate_size": 64, "vocab_size": 100, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
         "max_position_embeddings": 163840, "q_lora_rank": 16, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
         "qk_nope_head_dim": 12, "v_head_dim": 12}  # fmt: skip
#: DeepSeek-V3's published YaRN parameters, in the 4.x spelling of its config.json
V3_YARN = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
           "mscale": 1.0, "mscale_all_dim": 1.0}  # fmt: skip
#: the latent classes whose rotary embedding returns cos / sin (DeepSeek-V2's returns complex numbers)
COS_SIN = ["deepseek_v3", "deepseek_v32", "minicpm3", "glm4_moe_lite", "glm_moe_dsa", "youtu", "mistral_large4_text",
           "axk1", "axk2", "bailing_hybrid", "hy_v4"]  # fmt: skip


def deepseek_v3(**rope) -> dict:
    return {"model_type": "deepseek_v3", **SHAPE, "rope_theta": 10000, "rope_scaling": {**V3_YARN, **rope}}


@pytest.mark.parametrize("rope", [{}, {"mscale": 0.707, "mscale_all_dim": 1.0}, {"mscale": 1.0, "mscale_all_dim": 0.5}])
def test_deepseek_v3_yarn_is_the_model(rope):
    """qk_rope_head_dim channels, YaRN with mscale / mscale_all_dim: frequencies, attention scaling, cos / sin."""
    (settings,) = assert_posembed_is_the_model(deepseek_v3(**rope), (1, 9, 4100))
    assert (settings.head_dim, settings.rotary_dim, settings.layout, settings.rope_type) == (
        8,
        8,
        "interleaved",
        "yarn",
    )
    _, embedding = built(deepseek_v3(**rope))
    assert embedding.inv_freq.numel() == settings.rotary_dim // 2


def test_deepseek_v3_check_reports_the_model_width():
    report = check_rope_config(deepseek_v3())
    (layer,) = report.layers
    assert layer.settings.rotary_dim == 8 and all(c.equal for c in layer.comparisons)
    (note,) = [t for t in report.traps if t.code == "head_dim"]
    assert "qk_rope_head_dim = 8" in note.message and "hidden_size // num_attention_heads = 16" in note.message


def test_deepseek_v3_rope_interleave_false_rotates_halves():
    raw = {**deepseek_v3(), "rope_interleave": False}
    (settings,) = assert_posembed_is_the_model(raw)
    assert settings.layout == "half"


def test_deepseek_v2_is_the_model():
    """DeepSeek-V2's embedding returns (cos + i sin) x attention scaling over interleaved pairs."""
    raw = {
        "model_type": "deepseek_v2",
        **SHAPE,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 1e4,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "mscale": 0.707,
            "mscale_all_dim": 1.0,
        },
    }
    (settings,) = assert_posembed_is_the_model(raw)
    assert (settings.head_dim, settings.rotary_dim, settings.layout) == (8, 8, "interleaved")
    _, embedding = built(raw)
    positions = torch.arange(4100)
    freqs_cis = embedding(torch.zeros(1, 1, 8), positions[None])[0]
    cos, sin = rotary_from_settings(settings, angles="fp32").cos_sin(positions)
    torch.testing.assert_close(cos, freqs_cis.real.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sin, freqs_cis.imag.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", COS_SIN)
@pytest.mark.parametrize(
    "rope",
    [
        None,
        {"rope_type": "default", "rope_theta": 5e4},
        {
            "rope_type": "yarn",
            "rope_theta": 1e4,
            "factor": 8.0,
            "original_max_position_embeddings": 4096,
            "mscale": 0.707,
            "mscale_all_dim": 1.0,
        },
    ],
)
def test_every_latent_class_is_the_model(model_type, rope):
    raw = {"model_type": model_type, **SHAPE, **({"rope_parameters": rope} if rope else {})}
    (settings,) = assert_posembed_is_the_model(raw, (1, 9))
    assert (settings.head_dim, settings.rotary_dim) == (8, 8)


def test_mistral4_rotates_a_share_of_its_qk_head_dim():
    """Mistral 4: head_dim = qk_nope + qk_rope = 20, the partial factor 8 / 20 (its class default is yarn)."""
    for raw in (
        {"model_type": "mistral4", **SHAPE},
        {
            "model_type": "mistral4",
            **SHAPE,
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 1e4,
                "factor": 8.0,
                "original_max_position_embeddings": 4096,
            },
        },
    ):
        (settings,) = assert_posembed_is_the_model(raw, (1, 9))
        assert (settings.head_dim, settings.rotary_dim, settings.layout) == (20, 8, "interleaved")


def test_an_absent_qk_rope_head_dim_is_the_class_default():
    raw = {k: v for k, v in deepseek_v3().items() if k not in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    (settings,) = assert_posembed_is_the_model(raw)
    assert (settings.head_dim, stated_of(raw, settings).head_dim_given) == (64, False)


def test_latent_is_read_from_the_config_object():
    """The field a class sets head_dim from, read from the object transformers builds: DeepSeek-V3 qk_rope_head_dim,
    Mistral 4 qk_nope_head_dim + qk_rope_head_dim; LongCat's own head_dim field and Llama are not latent."""
    assert layer_settings(copy.deepcopy(deepseek_v3())).latent == "qk_rope_head_dim"
    assert layer_settings({"model_type": "mistral4", **SHAPE}).latent == "qk_head_dim"
    assert layer_settings({"model_type": "longcat_flash", **SHAPE, "head_dim": 32}).latent is None
    assert layer_settings({"model_type": "llama", **SHAPE, "rope_theta": 1e4}).latent is None


def test_without_transformers_the_dict_is_read_as_written(monkeypatch):
    """No class to ask: a stated qk_rope_head_dim is the rotary head, rope_interleave the layout; without it the
    shipped table's default for the type (DeepseekV3Config's rope_interleave=True: what transformers reads too)."""
    expected = layer_settings(copy.deepcopy(deepseek_v3()))
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    settings = layer_settings({**copy.deepcopy(deepseek_v3()), "rope_interleave": True})
    assert (settings.head_dim, settings.rotary_dim, settings.layout) == (expected.head_dim, 8, "interleaved")
    assert layer_settings(copy.deepcopy(deepseek_v3())).layout == expected.layout == "interleaved"
    assert layer_settings({**copy.deepcopy(deepseek_v3()), "rope_interleave": False}).layout == "half"
    assert (
        layer_settings(
            {"model_type": "minicpm3", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 1e4}
        ).head_dim
        == 16
    )


def test_glm4_moe_lite_reads_a_stated_head_dim_as_qk_rope_head_dim():
    """Its attribute_map aliases head_dim to qk_rope_head_dim: a stated head_dim is the rotary width, and wins."""
    for extra in ({"head_dim": 16}, {"head_dim": 16, "qk_rope_head_dim": 8}):
        raw = {"model_type": "glm4_moe_lite", **{k: v for k, v in SHAPE.items() if k != "qk_rope_head_dim"}, **extra}
        (settings,) = assert_posembed_is_the_model(raw, (1, 9))
        assert (settings.head_dim, settings.rotary_dim) == (16, 16)
