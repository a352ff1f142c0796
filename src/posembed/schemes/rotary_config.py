"""Build the rotary scheme that matches a Hugging Face transformers config.

The builder is the only place that reads config objects: modules take explicit arguments.
It reads ``config.rope_parameters`` (transformers v5; ``rope_scaling`` plus ``rope_theta`` on
older configs), ``head_dim`` (else ``hidden_size // num_attention_heads``) and
``partial_rotary_factor``, and maps each ``rope_type`` onto one class:

============ =========================================================
rope_type    class
============ =========================================================
default      :class:`~posembed.schemes.rotary.RotaryEmbedding`
linear       :class:`~posembed.schemes.rotary_scaling.LinearScalingRotary`
dynamic      :class:`~posembed.schemes.rotary_scaling.DynamicNTKRotary`
yarn         :class:`~posembed.schemes.rotary_yarn.YaRNRotary`
longrope     :class:`~posembed.schemes.rotary_longrope.LongRoPERotary`
llama3       :class:`~posembed.schemes.rotary_scaling.Llama3Rotary`
proportional :class:`~posembed.schemes.rotary_scaling.ProportionalRotary`
============ =========================================================

``partial_rotary_factor`` is honoured for every type, as GPT-NeoX / Phi / Hugging Face's scaling
init functions do (Llama's own ``default`` init ignores it; Llama configs do not set it).
transformers itself is not imported: any object with those attributes works.
"""

from __future__ import annotations

from typing import Any, Callable

from posembed.schemes import rotary_scaling as rs
from posembed.schemes.rotary import RotaryEmbedding
from posembed.schemes.rotary_longrope import LongRoPERotary
from posembed.schemes.rotary_yarn import YaRNRotary

__all__ = ["rotary_from_hf_config", "ROPE_TYPES"]

_Builder = Callable[[Any, dict, int, dict], RotaryEmbedding]


def rotary_from_hf_config(config: Any, *, layout: str = "half", max_len: int | None = None) -> RotaryEmbedding:
    """The rotary scheme (class and arguments) described by a transformers config.

    Args:
        config: a transformers ``PretrainedConfig`` (``LlamaConfig``, ``Phi3Config``, ...).
        layout: ``"half"`` for Hugging Face checkpoints (their q/k weights are permuted into
            that layout); ``"interleaved"`` for Meta-layout weights.
        max_len: cos/sin cache size (see :class:`RotaryEmbedding`).

    Raises:
        ValueError: unknown ``rope_type`` (naming the known ones) or a missing field.

    Example:
        >>> from types import SimpleNamespace
        >>> cfg = SimpleNamespace(hidden_size=64, num_attention_heads=4, max_position_embeddings=128,
        ...                       rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4})
        >>> rotary_from_hf_config(cfg)
        LinearScalingRotary(head_dim=16, base=10000, layout='half', factor=2)
    """
    params = _rope_parameters(config)
    rope_type = params.get("rope_type", params.get("type", "default"))
    builder = ROPE_TYPES.get(rope_type)
    if builder is None:
        raise ValueError(f"unknown rope_type {rope_type!r}; known rope types: {', '.join(sorted(ROPE_TYPES))}")
    head_dim = _head_dim(config)
    common: dict[str, Any] = {"base": float(params.get("rope_theta") or getattr(config, "rope_theta", 10000.0))}
    common.update(layout=layout, max_len=max_len)
    return builder(config, params, head_dim, common)


def _rope_parameters(config: Any) -> dict:
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if not isinstance(params, dict):
        raise ValueError(f"config.rope_parameters must be a dict, got {type(params).__name__}")
    if any(isinstance(value, dict) for value in params.values()):
        raise ValueError(
            f"config.rope_parameters is nested by layer type ({', '.join(params)}); build one scheme per "
            "layer type from a config holding that type's flat parameters"
        )
    return dict(params)


def _head_dim(config: Any) -> int:
    head_dim = getattr(config, "head_dim", None)
    if head_dim:
        return int(head_dim)
    try:
        return config.hidden_size // config.num_attention_heads
    except AttributeError as error:
        raise ValueError("config needs head_dim, or hidden_size and num_attention_heads") from error


def _rotary_dim(config: Any, params: dict, head_dim: int) -> int:
    fraction = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None))
    return int(head_dim * (1.0 if fraction is None else fraction))


def _require(params: dict, rope_type: str, *fields: str) -> None:
    missing = [field for field in fields if field not in params]
    if missing:
        raise ValueError(
            f"rope_type {rope_type!r} needs rope_parameters field(s) {', '.join(missing)}; "
            f"got {sorted(params)}"
        )


def _config_length(config: Any, field: str) -> int:
    value = getattr(config, field, None)
    if value is None:
        raise ValueError(f"this rope type needs config.{field}")
    return int(value)


def _original_len(config: Any, params: dict) -> int:
    value = params.get("original_max_position_embeddings") or getattr(config, "original_max_position_embeddings", None)
    return int(value) if value else _config_length(config, "max_position_embeddings")


def _default(config, params, head_dim, common) -> RotaryEmbedding:
    return RotaryEmbedding(head_dim, rotary_dim=_rotary_dim(config, params, head_dim), **common)


def _linear(config, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "linear", "factor")
    rotary_dim = _rotary_dim(config, params, head_dim)
    return rs.LinearScalingRotary(head_dim, factor=params["factor"], rotary_dim=rotary_dim, **common)


def _dynamic(config, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "dynamic", "factor")
    original = _config_length(config, "max_position_embeddings")
    rotary_dim = _rotary_dim(config, params, head_dim)
    return rs.DynamicNTKRotary(
        head_dim, factor=params["factor"], original_max_len=original, rotary_dim=rotary_dim, **common
    )


def _yarn(config, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "yarn", "factor")
    original = _original_len(config, params)
    factor = params["factor"]
    if factor is None:
        factor = _config_length(config, "max_position_embeddings") / original
    return YaRNRotary(
        head_dim,
        factor=factor,
        original_max_len=original,
        beta_fast=params.get("beta_fast") or 32.0,
        beta_slow=params.get("beta_slow") or 1.0,
        attention_factor=params.get("attention_factor"),
        mscale=params.get("mscale"),
        mscale_all_dim=params.get("mscale_all_dim"),
        truncate=params.get("truncate", True),
        rotary_dim=_rotary_dim(config, params, head_dim),
        **common,
    )


def _longrope(config, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "longrope", "short_factor", "long_factor")
    original = _original_len(config, params)
    factor = params.get("factor")
    if factor is None:
        factor = _config_length(config, "max_position_embeddings") / original
    return LongRoPERotary(
        head_dim,
        short_factor=params["short_factor"],
        long_factor=params["long_factor"],
        original_max_len=original,
        factor=factor,
        attention_factor=params.get("attention_factor"),
        rotary_dim=_rotary_dim(config, params, head_dim),
        **common,
    )


def _llama3(config, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "llama3", "factor", "low_freq_factor", "high_freq_factor")
    return rs.Llama3Rotary(
        head_dim,
        factor=params["factor"],
        original_max_len=_original_len(config, params),
        low_freq_factor=params["low_freq_factor"],
        high_freq_factor=params["high_freq_factor"],
        rotary_dim=_rotary_dim(config, params, head_dim),
        **common,
    )


def _proportional(config, params, head_dim, common) -> RotaryEmbedding:
    fraction = params.get("partial_rotary_factor", 1.0)
    return rs.ProportionalRotary(head_dim, rope_fraction=fraction, factor=params.get("factor", 1.0), **common)


#: rope_type -> builder, for every rope type transformers implements for Llama-style models
ROPE_TYPES: dict[str, _Builder] = {
    "default": _default,
    "linear": _linear,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "longrope": _longrope,
    "llama3": _llama3,
    "proportional": _proportional,
}
