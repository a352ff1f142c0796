"""The model zoo: for every family in ``posembed.interop.zoo.FAMILIES``, posembed built from the family's
own transformers config computes the positional quantities of the model's own code (tiny configs,
random weights). Rotary schemes are built with ``angles="fp32"`` (transformers' float32 angles) so that
cos/sin can be compared bit for bit; ``angles="exact"`` differs from them by float32's angle rounding."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from posembed.interop.zoo import (
    FAMILIES,
    ZOO_TABLE_MARKER,
    load_positional_weights,
    position_offset,
    zoo_family,
    zoo_scheme,
    zoo_schemes,
    zoo_table_markdown,
)  # fmt: skip
from posembed.schemes.bias.nope import NoPE
from tests.helpers import assert_close

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore")

T = 12
SMALL = dict(hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=16, vocab_size=64)


def _rope_equal(scheme, cos, sin, positions):
    """posembed's cos/sin (``(…, r/2)``) equal transformers' ``(…, D)`` halves, bit for bit."""
    ours_cos, ours_sin = scheme.cos_sin(positions)
    half = ours_cos.shape[-1]
    assert torch.equal(cos[..., :half], ours_cos) and torch.equal(cos[..., half : 2 * half], ours_cos)
    assert torch.equal(sin[..., :half], ours_sin) and torch.equal(sin[..., half : 2 * half], ours_sin)


def _decoder_rope(config_cls, module_path, cls_name, **extra):
    config = config_cls(**{**SMALL, "num_key_value_heads": 1, **extra})
    module = getattr(pytest.importorskip(module_path), cls_name)(config)
    positions = torch.arange(T)[None].expand(2, T) + torch.tensor([[0], [1000]])  # (B, T), long positions too
    cos, sin = module(torch.zeros(1), positions)
    scheme = zoo_scheme(config, angles="fp32")
    _rope_equal(scheme, cos, sin, positions)
    q, k = torch.randn(2, 2, T, scheme.head_dim), torch.randn(2, 2, T, scheme.head_dim)
    reference = pytest.importorskip(module_path).apply_rotary_pos_emb(q, k, cos, sin)
    for ours, theirs in zip(scheme(q, k, positions), reference):
        assert_close(ours, theirs)
    return scheme


def check_learned(model_type):
    config_cls, model_cls = {
        "bert": ("BertConfig", "BertModel"),
        "roberta": ("RobertaConfig", "RobertaModel"),
        "gpt2": ("GPT2Config", "GPT2Model"),
    }[model_type]
    if model_type == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_head=2, n_layer=1, n_positions=40, vocab_size=64)
    else:
        config = getattr(transformers, config_cls)(**{**SMALL, "max_position_embeddings": 40, "pad_token_id": 1})
    model = getattr(transformers, model_cls)(config).eval()
    scheme = zoo_scheme(config)
    load_positional_weights(scheme, model, model_type)
    table = model.wpe if model_type == "gpt2" else model.embeddings.position_embeddings
    assert torch.equal(scheme.weight, table.weight)
    input_ids = torch.tensor([[5, 6, 7, 8, 1, 1]])  # RoBERTa: 1 is padding
    if model_type == "roberta":
        from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

        expected_ids = RobertaEmbeddings.create_position_ids_from_input_ids(input_ids, padding_idx=1)
        ours_ids = torch.arange(4) + position_offset(config)
        assert torch.equal(expected_ids[0, :4], ours_ids) and position_offset(config) == 2
    else:
        ours_ids = torch.arange(6)
        assert position_offset(config) == 0
    assert torch.equal(scheme(ours_ids), table(ours_ids))


def check_rope(model_type):
    cases = {
        "llama": ("LlamaConfig", "llama", "LlamaRotaryEmbedding", {}),
        "mistral": ("MistralConfig", "mistral", "MistralRotaryEmbedding", {}),
        "qwen2": ("Qwen2Config", "qwen2", "Qwen2RotaryEmbedding", {}),
        "qwen3": ("Qwen3Config", "qwen3", "Qwen3RotaryEmbedding", {"head_dim": 16}),
        "gemma": ("GemmaConfig", "gemma", "GemmaRotaryEmbedding", {"head_dim": 16}),
        "phi3": ("Phi3Config", "phi3", "Phi3RotaryEmbedding", {"partial_rotary_factor": 0.5}),
        "gpt_neox": ("GPTNeoXConfig", "gpt_neox", "GPTNeoXRotaryEmbedding", {"rotary_pct": 0.25}),
    }
    config_name, module, cls, extra = cases[model_type]
    scheme = _decoder_rope(
        getattr(transformers, config_name), f"transformers.models.{module}.modeling_{module}", cls, **extra
    )
    if model_type in ("phi3", "gpt_neox"):
        assert scheme.rotary_dim < scheme.head_dim  # partial rotary reached the scheme


def check_layer_types(model_type):
    if model_type == "gemma3_text":
        config = transformers.Gemma3TextConfig(
            **{**SMALL, "num_hidden_layers": 6, "head_dim": 16, "num_key_value_heads": 1, "sliding_window_pattern": 3}
        )
        from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding as Rotary
    else:
        config = transformers.ModernBertConfig(**{**SMALL, "num_hidden_layers": 6})
        from transformers.models.modernbert.modeling_modernbert import ModernBertRotaryEmbedding as Rotary
    module = Rotary(config)
    positions = torch.arange(T)[None] + 500
    schemes = zoo_schemes(config, angles="fp32")
    assert len(schemes) == config.num_hidden_layers and len({s.base for s in schemes}) == 2
    for layer, layer_type in enumerate(config.layer_types):
        cos, sin = module(torch.zeros(1), positions, layer_type)
        _rope_equal(schemes[layer], cos, sin, positions)
        assert schemes[layer].base == config.rope_parameters[layer_type]["rope_theta"]
    with pytest.raises(ValueError, match="use zoo_schemes"):
        zoo_scheme(config)


def check_llama4(model_type):
    config = transformers.Llama4TextConfig(
        **{**SMALL, "num_hidden_layers": 4, "head_dim": 16, "num_key_value_heads": 1}
    )
    from transformers.models.llama4.modeling_llama4 import Llama4TextRotaryEmbedding, apply_rotary_emb

    positions = torch.arange(T)[None] + 300
    freqs_cis = Llama4TextRotaryEmbedding(config)(torch.zeros(1), positions)  # (1, T, D/2) complex
    schemes = zoo_schemes(config, angles="fp32")
    assert [isinstance(s, NoPE) for s in schemes] == [not use for use in config.no_rope_layers]
    rope = next(s for s in schemes if not isinstance(s, NoPE))
    cos, sin = rope.cos_sin(positions)
    assert_close(cos, freqs_cis.real) and assert_close(sin, freqs_cis.imag)
    q, k = torch.randn(1, T, 2, 16), torch.randn(1, T, 2, 16)  # Llama 4 rotates (B, T, H, D)
    q_ref, k_ref = apply_rotary_emb(q, k, freqs_cis)  # it broadcasts over the heads itself
    q_rot, k_rot = rope(q.transpose(1, 2), k.transpose(1, 2), positions)
    assert_close(q_rot.transpose(1, 2), q_ref) and assert_close(k_rot.transpose(1, 2), k_ref)
    assert rope.layout == "interleaved"


def check_qwen2_vl(model_type):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding

    from posembed.schemes.rotary.mrope_positions import mrope_position_ids

    text = {
        **SMALL,
        "num_key_value_heads": 1,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
    }
    config = transformers.Qwen2VLConfig(text_config=text, vision_config={"spatial_merge_size": 2})
    scheme = zoo_scheme(config, angles="fp32")
    assert scheme.mrope_section == (2, 3, 3) and scheme.base == 1e6
    types = torch.tensor([[0] * 3 + [1] * 16 + [0] * 2])
    positions, _ = mrope_position_ids(types, [(1, 8, 8)])
    cos, sin = Qwen2VLRotaryEmbedding(config.text_config)(torch.zeros(1), positions.permute(2, 0, 1))
    _rope_equal(scheme, cos, sin, positions)


def _alibi_reference(model_type, heads):
    mask = torch.ones(1, T)
    if model_type == "bloom":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    elif model_type == "falcon":
        from transformers.models.falcon.modeling_falcon import build_alibi_tensor
    else:
        from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

        return build_mpt_alibi_tensor(heads, T)[:, 0]  # (H, T): m_h * (j - (T - 1))
    return build_alibi_tensor(mask, heads, torch.float32).view(heads, T)  # (H, T): m_h * j


def check_alibi(model_type):
    heads = 6  # not a power of two: the interleaved extra slopes
    config = {
        "bloom": lambda: transformers.BloomConfig(hidden_size=48, n_head=heads, n_layer=1),
        "mpt": lambda: transformers.MptConfig(d_model=48, n_heads=heads, n_layers=1),
        "falcon": lambda: transformers.FalconConfig(
            hidden_size=48, num_attention_heads=heads, num_hidden_layers=1, alibi=True
        ),
    }[model_type]()
    scheme = zoo_scheme(config)
    reference = _alibi_reference(model_type, heads)  # (H, T): one row, the keys' part of the bias
    slopes = reference[:, 1] - reference[:, 0]
    assert torch.equal(scheme.slopes, slopes)
    positions = torch.arange(T)
    bias = scheme.bias(positions, positions)  # (H, T, T): m_h * (j - i)
    difference = bias - reference[:, None, :]  # a constant per query row: softmax cannot see it
    assert torch.equal(difference, difference[..., :1].expand_as(difference))
    if model_type == "falcon":
        with pytest.raises(ValueError, match="alibi=False"):
            zoo_scheme(transformers.FalconConfig(hidden_size=48, num_attention_heads=heads, alibi=False))


def check_t5(model_type):
    config = transformers.T5Config(
        d_model=32,
        d_kv=16,
        d_ff=16,
        num_layers=1,
        num_heads=2,
        vocab_size=64,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=20,
    )
    model = transformers.T5Model(config).eval()
    scheme = zoo_scheme(config)
    load_positional_weights(scheme, model, model_type)
    attention = model.encoder.block[0].layer[0].SelfAttention
    with torch.no_grad():
        expected = attention.compute_bias(40, 40)[0]  # (H, T, T)
        assert torch.equal(scheme.bias(torch.arange(40), torch.arange(40)), expected)
    relative = torch.arange(-40, 41)
    assert torch.equal(scheme._bucket(relative), attention._relative_position_bucket(relative, True, 8, 20))


def check_deberta(model_type):
    config = transformers.DebertaV2Config(
        **{**SMALL, "num_hidden_layers": 1, "max_position_embeddings": 64},
        relative_attention=True,
        position_buckets=8,
        max_relative_positions=32,
        pos_att_type=["p2c", "c2p"],
        norm_rel_ebd="layer_norm",
    )
    torch.manual_seed(0)
    model = transformers.DebertaV2Model(config).eval()
    with torch.no_grad():
        for p in model.encoder.parameters():
            p.normal_(0.0, 0.3)
    scheme = zoo_schemes(config)[0]
    load_positional_weights(scheme, model, model_type, layer=0)
    encoder, attention = model.encoder, model.encoder.layer[0].attention.self
    hidden = torch.randn(1, 20, 32)
    with torch.no_grad():
        assert_close(scheme.relative_table(), encoder.get_rel_embedding(), atol=1e-6, rtol=1e-6)
        query = attention.transpose_for_scores(attention.query_proj(hidden), 2)
        key = attention.transpose_for_scores(attention.key_proj(hidden), 2)
        expected = attention.disentangled_attention_bias(
            query, key, encoder.get_rel_pos(hidden), encoder.get_rel_embedding(), 3
        )
        positions = torch.arange(20)
        bias = scheme.bias(positions, positions, query.view(1, 2, 20, -1), key.view(1, 2, 20, -1))
        assert_close(bias, expected.view(1, 2, 20, 20), atol=1e-5, rtol=1e-5)


CHECKS = {
    "bert": check_learned, "roberta": check_learned, "gpt2": check_learned,
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gemma", "phi3", "gpt_neox"), check_rope),
    "gemma3_text": check_layer_types, "modernbert": check_layer_types, "llama4_text": check_llama4,
    "qwen2_vl": check_qwen2_vl, "bloom": check_alibi, "mpt": check_alibi, "falcon": check_alibi,
    "t5": check_t5, "deberta-v2": check_deberta,
}  # fmt: skip


@pytest.mark.parametrize("row", FAMILIES, ids=lambda row: row.model_type)
def test_family_matches_its_own_code(row):
    torch.manual_seed(0)
    CHECKS[row.model_type](row.model_type)


def test_every_row_has_a_check():
    assert set(CHECKS) == {row.model_type for row in FAMILIES}
    assert len({row.model_type for row in FAMILIES}) == len(FAMILIES)


def test_unknown_family_and_weights_errors():
    with pytest.raises(ValueError, match="model_type 'bart' is not in the zoo; covered: bert, roberta"):
        zoo_family("bart")
    with pytest.raises(ValueError, match="is not in the zoo"):
        zoo_schemes({"model_type": "bart", "num_hidden_layers": 1})
    scheme = zoo_scheme(transformers.GPT2Config(n_embd=8, n_head=2, n_layer=1, n_positions=16))
    with pytest.raises(ValueError, match=r"wpe.weight has shape \(4, 8\), LearnedAbsolute.embedding.weight \(16, 8\)"):
        load_positional_weights(scheme, {"wpe.weight": torch.zeros(4, 8)}, "gpt2")
    with pytest.raises(KeyError, match="the checkpoint has no 'wpe.weight'"):
        load_positional_weights(scheme, {}, "gpt2")


def test_markdown_table_lists_every_family():
    table = zoo_table_markdown()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(FAMILIES) and all(f"`{row.model_type}`" in table for row in FAMILIES)


def test_docs_table_is_the_rendered_one():
    page = Path(__file__).resolve().parents[2] / "docs" / "zoo.md"
    text = page.read_text(encoding="utf-8") if page.is_file() else ""
    assert ZOO_TABLE_MARKER in text, f"docs/zoo.md lost its {ZOO_TABLE_MARKER} marker before the model-zoo table"
    after = text.split(ZOO_TABLE_MARKER, 1)[1].lstrip("\n")
    table = re.match(r"((?:\|.*\n)+)", after)
    assert table is not None and table.group(1) == zoo_table_markdown()


def test_layer_lists_from_4x_spellings_equal_5x():
    """Gemma 3 / ModernBERT configs written by transformers 4.x (pattern fields, per-type theta fields)."""
    gemma = {
        "model_type": "gemma3_text",
        "num_hidden_layers": 6,
        "hidden_size": 32,
        "num_attention_heads": 2,
        "head_dim": 16,
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "sliding_window_pattern": 3,
    }
    assert [s.base for s in zoo_schemes(gemma)] == [1e4, 1e4, 1e6, 1e4, 1e4, 1e6]
    modernbert = {
        "model_type": "modernbert",
        "num_hidden_layers": 4,
        "hidden_size": 32,
        "num_attention_heads": 2,
        "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0,
        "global_attn_every_n_layers": 3,
    }
    assert [s.base for s in zoo_schemes(modernbert)] == [160000.0, 1e4, 1e4, 160000.0]
    current = transformers.ModernBertConfig(**{**SMALL, "num_hidden_layers": 4})
    assert [s.base for s in zoo_schemes(current)] == [s.base for s in zoo_schemes(modernbert)]
