"""The model zoo: for each transformers family, the posembed scheme of its positions, built from its config.

:data:`FAMILIES` is the table (family, ``model_type``, kind, posembed scheme, what the parity
test compares with the model's own code, and how exactly they agree);
:func:`zoo_table_markdown` renders it for the docs' model-zoo page (``docs/zoo.md``), and
``tests/interop/test_zoo.py`` runs one parity check per row against transformers' own modules (tiny configs, random
weights).

- :func:`zoo_schemes` gives one scheme per layer (the same object for every layer when the family
  has one scheme; per layer type for Gemma 3 / ModernBERT; :class:`~posembed.schemes.bias.nope.NoPE`
  for Llama 4's ``no_rope_layers``); :func:`zoo_scheme` the one scheme of a uniform family;
  :func:`zoo_decoder` a posembed :class:`~posembed.nn.model.transformer.Decoder` carrying them, layer by layer.
- :func:`load_positional_weights` copies a checkpoint's learned positional weights (learned
  tables, T5's bucket table, DeBERTa's relative embeddings) into a scheme through an explicit
  key map, with shape checks; :func:`position_offset` is RoBERTa's padding offset.

Rotary families (MRoPE included) are read by :mod:`posembed.interop.rope.settings` (both
spellings, per layer type) and built by :func:`posembed.interop.rope.config.rotary_from_settings`,
as ``rotary_from_hf_config`` builds them; the rest through the scheme factory.
transformers itself is never imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from posembed.interop.hf.config import load_config_dict
from posembed.interop.rope.config import rotary_from_settings
from posembed.interop.rope.model import model_part
from posembed.interop.rope.settings import ALL_LAYERS, layer_pattern, read_rope_settings
from posembed.nn.model.transformer import Decoder
from posembed.schemes.base import Kind, PositionScheme
from posembed.schemes.bias.deberta import DebertaRelative
from posembed.schemes.bias.nope import NoPE
from posembed.schemes.factory import ModelSizes, build_from_sizes

__all__ = [
    "Family", "FAMILIES", "zoo_family", "zoo_schemes", "zoo_scheme", "zoo_decoder", "load_positional_weights",
    "position_offset", "zoo_table_markdown", "ZOO_TABLE_MARKER",
]  # fmt: skip

#: the comment that marks the docs' copy (``docs/zoo.md``) of :func:`zoo_table_markdown` (the line before it)
ZOO_TABLE_MARKER = "<!-- zoo-table -->"


@dataclass(frozen=True)
class Family:
    """One row of the zoo: a transformers family and how posembed reproduces its positions."""

    family: str
    model_type: str
    kind: str
    scheme: str
    compared: str
    exactness: str


_ROPE_ROW = "cos/sin per position (``rotary_emb``), rotated q/k"
_ALIBI_AGREEMENT = "slopes bit-identical; bias bit-identical up to a per-query constant (softmax-invariant)"
#: every family whose positions posembed covers, checked by ``tests/interop/test_zoo.py``
FAMILIES: tuple[Family, ...] = (
    Family(
        "BERT",
        "bert",
        "absolute",
        "LearnedAbsolute",
        "position_embeddings table (copied), embedded positions",
        "bit-identical",
    ),
    Family(
        "RoBERTa",
        "roberta",
        "absolute",
        "LearnedAbsolute",
        "table (copied), positions offset by padding_idx + 1 (create_position_ids_from_input_ids)",
        "bit-identical",
    ),
    Family("GPT-2", "gpt2", "absolute", "LearnedAbsolute", "wpe table (copied), embedded positions", "bit-identical"),
    Family("Llama", "llama", "rotary", "RotaryEmbedding", _ROPE_ROW, "cos/sin bit-identical (angles='fp32')"),
    Family("Mistral", "mistral", "rotary", "RotaryEmbedding", _ROPE_ROW, "cos/sin bit-identical (angles='fp32')"),
    Family("Qwen2", "qwen2", "rotary", "RotaryEmbedding", _ROPE_ROW, "cos/sin bit-identical (angles='fp32')"),
    Family("Qwen3", "qwen3", "rotary", "RotaryEmbedding", _ROPE_ROW, "cos/sin bit-identical (angles='fp32')"),
    Family("Gemma", "gemma", "rotary", "RotaryEmbedding", _ROPE_ROW, "cos/sin bit-identical (angles='fp32')"),
    Family(
        "Gemma 3",
        "gemma3_text",
        "rotary",
        "RotaryEmbedding per layer type",
        "cos/sin per layer (sliding / full theta from layer_types)",
        "cos/sin bit-identical (angles='fp32')",
    ),
    Family(
        "Phi-3",
        "phi3",
        "rotary",
        "RotaryEmbedding",
        _ROPE_ROW + ", partial rotary",
        "cos/sin bit-identical (angles='fp32')",
    ),
    Family(
        "GPT-NeoX",
        "gpt_neox",
        "rotary",
        "RotaryEmbedding (partial)",
        _ROPE_ROW + ", rotary_pct",
        "cos/sin bit-identical (angles='fp32')",
    ),
    Family(
        "ModernBERT",
        "modernbert",
        "rotary",
        "RotaryEmbedding per layer type",
        "cos/sin per layer (global / local theta from layer_types)",
        "cos/sin bit-identical (angles='fp32')",
    ),
    Family(
        "Llama 4",
        "llama4_text",
        "rotary",
        "RotaryEmbedding (interleaved) / NoPE per layer",
        "complex freqs_cis per RoPE layer, NoPE where no_rope_layers is 0",
        "within 1e-6 (torch.polar)",
    ),
    Family(
        "Qwen2-VL",
        "qwen2_vl",
        "rotary",
        "MRoPE",
        "cos/sin of get_rope_index positions (text, image, text)",
        "cos/sin bit-identical (angles='fp32')",
    ),
    Family("BLOOM", "bloom", "bias", "ALiBi", "slopes; bias of build_alibi_tensor", _ALIBI_AGREEMENT),
    Family("MPT", "mpt", "bias", "ALiBi", "slopes; bias of build_mpt_alibi_tensor", _ALIBI_AGREEMENT),
    Family("Falcon (alibi=True)", "falcon", "bias", "ALiBi", "slopes; bias of build_alibi_tensor", _ALIBI_AGREEMENT),
    Family(
        "T5",
        "t5",
        "bias",
        "T5RelativeBias",
        "buckets; compute_bias with the copied relative_attention_bias",
        "bit-identical",
    ),
    Family(
        "DeBERTa-v2",
        "deberta-v2",
        "bias",
        "DebertaRelative",
        "relative embeddings (LayerNorm'd); c2p + p2c bias of layer 0 (copied weights); the whole "
        "self-attention layer, output and probabilities (tests/schemes/test_deberta_attention.py)",
        "bias within 1e-5; layer output within 5e-6 (float64: 1e-10)",
    ),
)


def zoo_family(model_type: str) -> Family:
    """The row of ``model_type``; ``ValueError`` naming the covered model types otherwise."""
    for row in FAMILIES:
        if row.model_type == model_type:
            return row
    known = ", ".join(row.model_type for row in FAMILIES)
    raise ValueError(f"model_type {model_type!r} is not in the zoo; covered: {known}")


def _int(raw: dict, *names: str) -> int:
    for name in names:
        if raw.get(name) is not None:
            return int(raw[name])
    raise ValueError(f"the config needs one of {', '.join(names)}")


def _rotary_layers(raw: dict, layers: int, angles: str) -> list[PositionScheme]:
    """Each layer's scheme: its layer type's rotary scheme (M-RoPE where the parameters hold ``mrope_section``),
    :class:`~posembed.schemes.bias.nope.NoPE` where the settings give a layer none (Llama 4's NoPE layers)."""
    settings = {s.layer_type: s for s in read_rope_settings(raw)}
    built: dict[str | None, PositionScheme] = {None: NoPE()}
    schemes: list[PositionScheme] = []
    for layer_type in layer_pattern(raw, layers):
        key = layer_type if layer_type in settings or layer_type is None else ALL_LAYERS
        if key not in built:
            if key not in settings:
                raise ValueError(
                    f"layer type {layer_type!r} has no RoPE parameters; the config gives {', '.join(settings)}"
                )
            built[key] = rotary_from_settings(settings[key], angles=angles)  # the layout the settings carry
        schemes.append(built[key])
    return schemes


def _deberta(raw: dict) -> DebertaRelative:
    hidden, heads = _int(raw, "hidden_size"), _int(raw, "num_attention_heads")
    buckets = raw.get("position_buckets", -1)
    max_relative = raw.get("max_relative_positions", -1)
    if max_relative is None or max_relative < 1:
        max_relative = _int(raw, "max_position_embeddings")
    return DebertaRelative(
        hidden, heads, hidden // heads, position_buckets=buckets if buckets and buckets > 0 else None,
        max_relative_positions=int(max_relative), attention_terms=tuple(raw.get("pos_att_type") or ()),
        share_att_key=bool(raw.get("share_att_key", False)), layer_norm="layer_norm" in (raw.get("norm_rel_ebd") or ""),
        layer_norm_eps=float(raw.get("layer_norm_eps", 1e-7)),
    )  # fmt: skip


def _alibi_heads(raw: dict, model_type: str) -> int:
    if model_type == "mpt":
        attn = raw.get("attn_config") or {}
        bias_max = attn.get("alibi_bias_max", 8) if isinstance(attn, dict) else 8
        if bias_max != 8:
            raise ValueError(
                f"MPT alibi_bias_max={bias_max}: posembed's ALiBi has the paper's slopes (alibi_bias_max 8)"
            )
    if model_type == "falcon" and not raw.get("alibi"):
        raise ValueError(
            "this Falcon config has alibi=False: its positions are rotary (zoo row 'falcon' is alibi=True)"
        )
    return _int(raw, "n_head", "n_heads", "num_attention_heads")


def _single(raw: dict, model_type: str) -> PositionScheme:
    """The one scheme of a family whose layers all share it (not rotary-from-config)."""
    if model_type in ("bert", "roberta", "gpt2"):
        dim, length = _int(raw, "hidden_size", "n_embd"), _int(raw, "max_position_embeddings", "n_positions")
        return build_from_sizes("learned", ModelSizes(dim=dim, num_heads=1, head_dim=dim, max_len=length, causal=True))
    if model_type in ("bloom", "mpt", "falcon"):
        heads = _alibi_heads(raw, model_type)
        return build_from_sizes("alibi", ModelSizes(dim=heads, num_heads=heads, head_dim=1, max_len=1, causal=True))
    if model_type == "t5":  # the encoder's bias (bidirectional); decoders: bidirectional=False
        heads = _int(raw, "num_heads")
        sizes = ModelSizes(dim=heads, num_heads=heads, head_dim=1, max_len=1, causal=bool(raw.get("is_decoder")))
        overrides = {
            "num_buckets": _int(raw, "relative_attention_num_buckets"),
            "max_distance": _int(raw, "relative_attention_max_distance"),
        }
        return build_from_sizes("t5_bias", sizes, overrides)
    if model_type == "deberta-v2":
        return _deberta(raw)
    raise ValueError(f"model_type {model_type!r} has no single-scheme builder")


def zoo_schemes(config: Any, *, angles: str = "exact") -> list[PositionScheme]:
    """One posembed scheme per layer of a transformers model, from its config.

    Args:
        config: a transformers config object, a ``config.json`` dict, or a checkpoint folder / path.
        angles: rotary angle mode (``"fp32"`` for transformers' float32 angles, bit for bit).

    Returns:
        ``num_hidden_layers`` schemes; uniform families repeat one object. Learned weights start
        at their init: copy a checkpoint's in with :func:`load_positional_weights`.

    Example:
        >>> config = {"model_type": "gemma3_text", "num_hidden_layers": 3, "hidden_size": 32, "head_dim": 16,
        ...           "num_attention_heads": 2, "layer_types": ["sliding_attention"] * 2 + ["full_attention"],
        ...           "rope_parameters": {"sliding_attention": {"rope_theta": 1e4},
        ...                               "full_attention": {"rope_theta": 1e6}}}
        >>> [scheme.base for scheme in zoo_schemes(config)]
        [10000.0, 10000.0, 1000000.0]
    """
    raw = model_part(load_config_dict(config)[0])
    model_type = str(raw.get("model_type"))
    family = zoo_family(model_type.removesuffix("_text") if model_type == "qwen2_vl_text" else model_type)
    layers = _int(raw, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if family.kind == "rotary":
        return _rotary_layers(raw, layers, angles)
    if model_type == "deberta-v2":
        return [_deberta(raw) for _ in range(layers)]  # one relative table, per-layer projections
    return [_single(raw, model_type)] * layers


def zoo_scheme(config: Any, *, angles: str = "exact") -> PositionScheme:
    """The one scheme of a family whose layers share it; ``ValueError`` for per-layer families."""
    schemes = zoo_schemes(config, angles=angles)
    if any(scheme is not schemes[0] for scheme in schemes):
        raise ValueError("this config gives its layers different schemes (layer types, NoPE layers): use zoo_schemes")
    return schemes[0]


def zoo_decoder(config: Any, *, vocab_size: int | None = None, angles: str = "exact", **model_kwargs) -> Decoder:
    """A posembed :class:`~posembed.nn.model.transformer.Decoder` with the positions of a transformers config, layer
    by layer.

    The model takes the config's depth, heads and head dim (width ``heads * head_dim``) and
    :func:`zoo_schemes`' scheme of each layer (an absolute one goes to the embeddings); the rest
    is posembed's own block (pre-LN, GELU MLP: no GQA, RMSNorm or sliding window), for training
    a family's position layout at small sizes. A tiny config gives a tiny model.

    Args:
        config: as :func:`zoo_schemes`. vocab_size: token ids (``None``: the config's ``vocab_size``).
        angles: rotary angle mode. model_kwargs: other :class:`~posembed.nn.model.transformer.Decoder` arguments
            (``mlp_ratio``, ``dropout``, ``max_len``, ``backend``, ``device``, ``dtype``).

    Example:
        >>> config = {"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 16, "head_dim": 8,
        ...           "num_attention_heads": 2, "vocab_size": 11, "no_rope_layers": [1, 1, 1, 0],
        ...           "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
        >>> [type(s).__name__ for s in zoo_decoder(config).layer_schemes]
        ['RotaryEmbedding', 'RotaryEmbedding', 'RotaryEmbedding', 'NoPE']
    """
    raw = model_part(load_config_dict(config)[0])
    if raw.get("model_type") == "deberta-v2":
        raise ValueError("DeBERTa-v2 is an encoder family: its relative attention needs posembed's Encoder")
    schemes = zoo_schemes(config, angles=angles)
    heads = _int(raw, "num_attention_heads", "n_head", "n_heads", "num_heads")
    rotary = [s for s in schemes if getattr(s, "head_dim", None)]  # the head width the RoPE settings read
    head_dim = (
        rotary[0].head_dim
        if rotary
        else int(raw.get("head_dim") or _int(raw, "hidden_size", "n_embd", "d_model") // heads)
    )
    vocab = vocab_size if vocab_size is not None else _int(raw, "vocab_size")
    sizes = {"dim": heads * head_dim, "depth": len(schemes), "num_heads": heads}
    if schemes[0].kind == Kind.ABSOLUTE:
        return Decoder(vocab, scheme=schemes[0], **sizes, **model_kwargs)
    return Decoder(vocab, schemes=schemes, **sizes, **model_kwargs)


def position_offset(config: Any) -> int:
    """What a family adds to ``arange(T)`` before the table lookup: ``padding_idx + 1`` for RoBERTa, else 0."""
    raw = load_config_dict(config)[0]
    return int(raw.get("pad_token_id", 1)) + 1 if raw.get("model_type") == "roberta" else 0


#: model_type -> (checkpoint key suffix, scheme attribute path) of its learned positional weights
_WEIGHT_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "bert": (("embeddings.position_embeddings.weight", "embedding.weight"),),
    "roberta": (("embeddings.position_embeddings.weight", "embedding.weight"),),
    "gpt2": (("wpe.weight", "embedding.weight"),),
    "t5": (("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "relative_attention_bias.weight"),),
    "deberta-v2": (
        ("encoder.rel_embeddings.weight", "rel_embeddings.weight"),
        ("encoder.LayerNorm.weight", "norm.weight"),
        ("encoder.LayerNorm.bias", "norm.bias"),
        ("encoder.layer.{layer}.attention.self.pos_key_proj.weight", "pos_key_proj.weight"),
        ("encoder.layer.{layer}.attention.self.pos_key_proj.bias", "pos_key_proj.bias"),
        ("encoder.layer.{layer}.attention.self.pos_query_proj.weight", "pos_query_proj.weight"),
        ("encoder.layer.{layer}.attention.self.pos_query_proj.bias", "pos_query_proj.bias"),
    ),
}


def _find(state: Mapping[str, Tensor], suffix: str) -> Tensor | None:
    """The one tensor whose key is ``suffix`` or ends with ``.suffix`` (a task head's prefix)."""
    found = [key for key in state if key == suffix or key.endswith("." + suffix)]
    if len(found) > 1:
        raise ValueError(f"several checkpoint keys end with {suffix!r}: {found}")
    return state[found[0]] if found else None


def load_positional_weights(
    scheme: PositionScheme, model: nn.Module | Mapping[str, Tensor], model_type: str, *, layer: int = 0
) -> None:
    """Copy a checkpoint's learned positional weights into ``scheme`` (explicit key map, shapes checked).

    ``model`` is a transformers model or its ``state_dict``; ``layer`` picks DeBERTa's position
    projections. Keys the scheme has no module for (DeBERTa without LayerNorm) are skipped.
    """
    if model_type not in _WEIGHT_KEYS:
        raise ValueError(
            f"model_type {model_type!r} has no learned positional weights to copy; families with some: "
            f"{', '.join(_WEIGHT_KEYS)}"
        )
    state = model.state_dict() if isinstance(model, nn.Module) else model
    targets = dict(scheme.named_parameters())
    copied = 0
    for source, target in _WEIGHT_KEYS[model_type]:
        if target not in targets:
            continue
        key = source.format(layer=layer)
        value = _find(state, key)
        if value is None:
            raise KeyError(f"the checkpoint has no {key!r} for {type(scheme).__name__}.{target}")
        if value.shape != targets[target].shape:
            raise ValueError(
                f"{key} has shape {tuple(value.shape)}, {type(scheme).__name__}.{target} "
                f"{tuple(targets[target].shape)}: the scheme was built for another config"
            )
        with torch.no_grad():
            targets[target].copy_(value)
        copied += 1
    if not copied:
        raise ValueError(f"nothing to copy into {type(scheme).__name__} from a {model_type!r} checkpoint")


def zoo_table_markdown() -> str:
    """:data:`FAMILIES` as a markdown table (what ``docs/zoo.md`` shows after :data:`ZOO_TABLE_MARKER`)."""
    lines = [
        "| family | model_type | kind | posembed scheme | compared with the model's own code | agreement |",
        "|---|---|---|---|---|---|",
    ]
    for row in FAMILIES:
        compared = row.compared.replace("``", "`")
        cells = (row.family, f"`{row.model_type}`", row.kind, row.scheme, compared, row.exactness)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
