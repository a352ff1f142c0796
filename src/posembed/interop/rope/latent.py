"""How wide and in which layout a transformers config class rotates: ``head_dim`` defaults and
multi-head latent attention.

- :func:`class_head_dim`: the ``head_dim`` a class fills in when the config has none (GPT-OSS 64,
  Qwen3 128, Qwen3-Next 256, ...; others derive it as ``hidden_size // num_attention_heads``);
- multi-head latent attention classes (DeepSeek-V2/V3, MiniCPM3, GLM-4-MoE-Lite, Mistral 4, ...) set
  ``head_dim`` from ``qk_rope_head_dim`` and state their layout (:func:`latent_class`,
  :func:`latent_shape`), and :func:`rotary_layout`, which pairs a class rotates.

Built on :mod:`posembed.interop.rope.classes`' lazy lookups of transformers' config classes; without
transformers the tables stand in (:data:`~posembed.interop.rope.classes.CLASS_HEAD_DIM`,
:data:`LATENT_CLASSES`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

from posembed.interop.rope.classes import CACHES, CLASS_HEAD_DIM, _config_class, _declares, model_type_of

__all__ = [
    "class_head_dim", "LatentClass", "LATENT_CLASSES", "HEAD_DIM_ALIASED", "ROPE_INTERLEAVE", "ALWAYS_INTERLEAVED",
    "latent_class", "latent_shape", "rotary_layout",
]  # fmt: skip


@dataclass(frozen=True)
class LatentClass:
    """A multi-head latent attention config class: its rotary embedding reads ``head_dim``, which the class sets
    from ``width`` (``"qk_rope_head_dim"``, or ``"qk_head_dim"``: ``qk_nope_head_dim + qk_rope_head_dim`` with the
    partial factor ``qk_rope_head_dim / head_dim``, Mistral 4), whatever head_dim the config states;
    ``rope`` / ``nope``: the class's defaults of ``qk_rope_head_dim`` / ``qk_nope_head_dim``."""

    width: str
    rope: int
    nope: int


#: the multi-head latent attention classes of transformers 5.23, read when transformers is absent (with it, every
#: class that declares ``qk_rope_head_dim`` is asked: :func:`latent_class`)
LATENT_CLASSES: dict[str, LatentClass] = {
    "deepseek_v2": LatentClass("qk_rope_head_dim", 64, 128), "deepseek_v3": LatentClass("qk_rope_head_dim", 64, 128),
    "deepseek_v32": LatentClass("qk_rope_head_dim", 64, 128), "minicpm3": LatentClass("qk_rope_head_dim", 32, 64),
    "glm4_moe_lite": LatentClass("qk_rope_head_dim", 64, 192), "glm_moe_dsa": LatentClass("qk_rope_head_dim", 64, 192),
    "youtu": LatentClass("qk_rope_head_dim", 64, 128),
    "mistral_large4_text": LatentClass("qk_rope_head_dim", 64, 64), "mistral4": LatentClass("qk_head_dim", 64, 64),
}  # fmt: skip
#: latent classes whose ``attribute_map`` aliases ``head_dim`` to ``qk_rope_head_dim``, read when transformers is absent
HEAD_DIM_ALIASED = frozenset({"glm4_moe_lite"})
#: classes whose layout is their ``rope_interleave`` field (default ``True``: pairs (2i, 2i + 1)), read when
#: transformers is absent
ROPE_INTERLEAVE = frozenset({"deepseek_v3", "glm4_moe_lite", "mistral4", "youtu", "axk1"})
#: classes that always rotate interleaved pairs (2i, 2i + 1): GPT-J and CodeGen (their original weights pair channels
#: so), DeepSeek-V2 as complex numbers (``view_as_complex``), the others through
#: ``apply_rotary_pos_emb_interleave`` (transformers 5.23)
ALWAYS_INTERLEAVED = frozenset({"gptj", "codegen", "deepseek_v2", "bailing_hybrid", "longcat_flash", "llama4", "llama4_text"})


def class_head_dim(model_type: Any) -> int | None:
    """The ``head_dim`` transformers' config class of ``model_type`` fills in when the config has no such key: its
    field's default (GPT-OSS 64, GLM-4 and Qwen3 128, Qwen3-Next and Gemma 256). ``None`` where the class derives it
    (``hidden_size // num_attention_heads``), for a model type transformers does not know and for multi-head latent
    attention classes, which rotate ``qk_rope_head_dim`` channels instead; without transformers, :data:`CLASS_HEAD_DIM`.

    >>> class_head_dim("gpt_oss"), class_head_dim("llama"), class_head_dim(None)
    (64, None, None)
    """
    installed, config_class = _config_class(model_type)
    if not installed:
        return CLASS_HEAD_DIM.get(model_type) if isinstance(model_type, str) else None
    if config_class is None or latent_class(model_type) is not None:
        return None
    value = getattr(config_class, "head_dim", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def latent_class(model_type: Any) -> LatentClass | None:
    """The :class:`LatentClass` of ``model_type``: a class that declares ``qk_rope_head_dim`` and, built with
    ``qk_rope_head_dim=8, qk_nope_head_dim=12``, holds ``head_dim`` 8 (DeepSeek-V2/V3, MiniCPM3, GLM-4-MoE-Lite,
    ...) or 20 (Mistral 4). ``None`` for other classes (LongCat keeps its own ``head_dim`` field) and for a
    class that cannot be built so; without transformers, :data:`LATENT_CLASSES`.

    >>> latent_class("deepseek_v3"), latent_class("llama")
    (LatentClass(width='qk_rope_head_dim', rope=64, nope=128), None)
    """
    return _latent_class(model_type) if isinstance(model_type, str) else None


@functools.lru_cache(maxsize=None)
def _latent_class(model_type: str) -> LatentClass | None:
    installed, config_class = _config_class(model_type)
    if not installed:
        return LATENT_CLASSES.get(model_type)
    if config_class is None or not _declares(config_class, "qk_rope_head_dim"):
        return None
    try:
        made = config_class(hidden_size=64, num_attention_heads=4, qk_rope_head_dim=8, qk_nope_head_dim=12)
    except Exception:  # noqa: BLE001 - a class that needs other arguments (or has no RoPE: GLM-5-Next) is not one
        return None
    width = {8: "qk_rope_head_dim", 20: "qk_head_dim"}.get(getattr(made, "head_dim", None))
    rope, nope = getattr(config_class, "qk_rope_head_dim", None), getattr(config_class, "qk_nope_head_dim", None)
    return None if width is None or not isinstance(rope, int) else LatentClass(width, rope, nope if isinstance(nope, int) else 0)


def latent_shape(raw: Mapping) -> tuple[int, bool, float | None] | None:
    """``(head_dim its rotary embedding reads, stated, the partial factor the class fills in)`` of a latent attention
    config (:func:`latent_class`), ``None`` for other configs: ``qk_rope_head_dim`` (the config's, else the class
    default), or for Mistral 4 ``qk_nope_head_dim + qk_rope_head_dim`` with the factor ``qk_rope_head_dim / head_dim``.

    >>> latent_shape({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128})
    (64, False, None)
    """
    spec = latent_class(model_type_of(raw))
    if spec is None:
        return None
    key = "head_dim" if raw.get("head_dim") is not None and _head_dim_alias(model_type_of(raw)) else "qk_rope_head_dim"
    rope = int(raw.get(key) if raw.get(key) is not None else spec.rope)
    if spec.width == "qk_rope_head_dim":
        return rope, raw.get(key) is not None, None
    nope = int(raw.get("qk_nope_head_dim") if raw.get("qk_nope_head_dim") is not None else spec.nope)
    return rope + nope, raw.get("qk_rope_head_dim") is not None and raw.get("qk_nope_head_dim") is not None, rope / (rope + nope)


def _head_dim_alias(model_type: str | None) -> bool:
    """Whether the class's ``attribute_map`` makes a stated ``head_dim`` its ``qk_rope_head_dim`` (GLM-4-MoE-Lite: the
    stated head_dim wins); without transformers, :data:`HEAD_DIM_ALIASED`."""
    installed, config_class = _config_class(model_type)
    if not installed:
        return model_type in HEAD_DIM_ALIASED
    return (getattr(config_class, "attribute_map", None) or {}).get("head_dim") == "qk_rope_head_dim"


def rotary_layout(raw: Mapping) -> str:
    """The layout of the config's rotary channels, ``"interleaved"`` or ``"half"``: interleaved for
    :data:`ALWAYS_INTERLEAVED`; a class with a ``rope_interleave`` field follows it (the config's, else the class
    default, ``True``); every other class rotates NeoX halves."""
    model_type = model_type_of(raw)
    installed, config_class = _config_class(model_type)
    if model_type in ALWAYS_INTERLEAVED:
        return "interleaved"
    declares = _declares(config_class, "rope_interleave") if config_class is not None else not installed and model_type in ROPE_INTERLEAVE
    if not declares:
        return "half"
    interleave = raw["rope_interleave"] if "rope_interleave" in raw else getattr(config_class, "rope_interleave", True)
    return "interleaved" if interleave else "half"  # the model tests it as a bool: null rotates halves


CACHES.append(_latent_class)
