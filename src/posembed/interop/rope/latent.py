"""How wide and in which layout a config rotates, read against its class's facts: :func:`rotary_width`.

The ``head_dim`` its rotary embedding reads (the config's, else the class's field default: :func:`class_head_dim`,
else ``hidden_size // num_attention_heads``; multi-head latent attention classes, :func:`latent_class`, set it from
``qk_rope_head_dim``), and which pairs it rotates. The class's side, with the tables that stand in without
transformers, is :class:`~posembed.interop.rope.classes.ClassFacts`; this module reads the config's fields against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from posembed.interop.rope.classes import (
    ALWAYS_INTERLEAVED, HEAD_DIM_ALIASED, LATENT_CLASSES, ROPE_INTERLEAVE, ClassFacts, LatentClass, class_facts,
)  # fmt: skip
from posembed.interop.rope.model import ALL_LAYERS, model_layout, model_widths, transformers_config

__all__ = [
    "class_head_dim", "LatentClass", "LATENT_CLASSES", "HEAD_DIM_ALIASED", "ROPE_INTERLEAVE", "ALWAYS_INTERLEAVED",
    "latent_class", "RotaryWidth", "rotary_width",
]  # fmt: skip


@dataclass(frozen=True)
class RotaryWidth:
    """The rotary channels of a config: ``head_dim`` its rotary embedding reads (``head_dim_given``: the config
    states it), the model's ``hidden_size`` / ``num_heads``, the partial factor a latent class fills in
    (``latent_partial``, Mistral 4: ``qk_rope_head_dim / head_dim``; else ``None``) and the ``layout``,
    ``"interleaved"`` or ``"half"``."""

    head_dim: int
    head_dim_given: bool
    hidden_size: int | None
    num_heads: int | None
    latent_partial: float | None
    layout: str
    max_position_embeddings: int | None = None
    model: dict[str, tuple[int, int]] | None = None

    def of(self, layer: str) -> tuple[int, int] | None:
        """``(head_dim, rotary_dim)`` of a layer type as the model's own rotary embedding builds it, if known."""
        if not self.model:
            return None
        if layer in self.model:
            return self.model[layer]
        widths = set(self.model.values())
        return widths.pop() if len(widths) == 1 else None


def class_head_dim(model_type: Any) -> int | None:
    """The ``head_dim`` transformers' config class of ``model_type`` fills in when the config has no such key (GPT-OSS
    64, Qwen3 128, Gemma 256); ``None`` where the class derives it, for an unknown model type and for latent classes.

    >>> class_head_dim("gpt_oss"), class_head_dim("llama"), class_head_dim(None)
    (64, None, None)
    """
    return class_facts(model_type).head_dim


def latent_class(model_type: Any) -> LatentClass | None:
    """The :class:`LatentClass` of ``model_type`` (multi-head latent attention), ``None`` for other classes.

    >>> latent_class("deepseek_v3"), latent_class("llama")
    (LatentClass(width='qk_rope_head_dim', rope=64, nope=128), None)
    """
    return class_facts(model_type).latent


def rotary_width(raw: Mapping, facts: ClassFacts) -> RotaryWidth:
    """The :class:`RotaryWidth` of a config dict whose class's facts are ``facts``.

    Raises ``ValueError`` when the head size cannot be placed (no ``head_dim``, ``hidden_size`` or
    ``num_attention_heads``, and no class default).

    >>> from posembed.interop.rope.classes import config_facts
    >>> raw = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128}
    >>> rotary_width(raw, config_facts(raw))
    RotaryWidth(head_dim=64, head_dim_given=False, hidden_size=7168, num_heads=128, latent_partial=None, layout='interleaved')
    """
    hidden = raw.get("hidden_size", raw.get("n_embd", raw.get("d_model")))
    heads = raw.get("num_attention_heads", raw.get("n_head"))
    max_pos = raw.get("max_position_embeddings", raw.get("n_positions"))
    hf = transformers_config(raw)
    model = None
    if hf is not None:  # its attribute_map aliases, its class defaults
        hidden, heads = getattr(hf, "hidden_size", hidden), getattr(hf, "num_attention_heads", heads)
        max_pos, model = getattr(hf, "max_position_embeddings", max_pos), model_widths(hf)
    try:
        head_dim, given, partial = _head_dim(raw, facts, hidden, heads)
    except ValueError:
        if not model:
            raise
        head_dim, given, partial = next(iter(model.values()))[0], False, None
    layout = (model_layout(hf) if hf is not None else None) or _layout(raw, facts)
    return RotaryWidth(head_dim, given, hidden, heads, partial, layout, max_pos, model)


def _head_dim(raw: Mapping, facts: ClassFacts, hidden: Any, heads: Any) -> tuple[int, bool, float | None]:
    """``(head_dim, stated, latent partial factor)``: a latent class reads ``qk_rope_head_dim`` (the config's, else
    the class default; a stated ``head_dim`` where the class aliases it: GLM-4-MoE-Lite), or for Mistral 4
    ``qk_nope_head_dim + qk_rope_head_dim`` with the factor ``qk_rope_head_dim / head_dim``."""
    spec = facts.latent
    if spec is not None:
        key = "head_dim" if raw.get("head_dim") is not None and facts.head_dim_alias else "qk_rope_head_dim"
        rope = int(raw.get(key) if raw.get(key) is not None else spec.rope)
        if spec.width == "qk_rope_head_dim":
            return rope, raw.get(key) is not None, None
        nope = int(raw.get("qk_nope_head_dim") if raw.get("qk_nope_head_dim") is not None else spec.nope)
        stated = raw.get("qk_rope_head_dim") is not None and raw.get("qk_nope_head_dim") is not None
        return rope + nope, stated, rope / (rope + nope)
    if raw.get("head_dim"):
        return int(raw["head_dim"]), True, None
    default = facts.head_dim if "head_dim" not in raw else None  # an explicit null: derived
    if default is not None:  # the class's field default (GPT-OSS 64, Qwen3 128), not derived
        return default, False, None
    if not hidden or not heads:
        raise ValueError("the config needs head_dim, or hidden_size and num_attention_heads, to place RoPE")
    return int(hidden) // int(heads), False, None


def _layout(raw: Mapping, facts: ClassFacts) -> str:
    """Interleaved for :data:`ALWAYS_INTERLEAVED`; a class with a ``rope_interleave`` field follows it (the config's,
    else the class default, ``True``); every other class rotates NeoX halves."""
    if facts.always_interleaved:
        return "interleaved"
    if facts.interleave is None:
        return "half"
    interleave = raw["rope_interleave"] if "rope_interleave" in raw else facts.interleave
    return "interleaved" if interleave else "half"  # the model tests it as a bool: null rotates halves
