"""Build the rotary scheme that matches a Hugging Face transformers config.

The only place that reads config objects for RoPE: the schemes take explicit arguments
(:meth:`RotaryEmbedding.from_hf_config <posembed.schemes.rotary.RotaryEmbedding.from_hf_config>`
is a lazy alias of :func:`rotary_from_hf_config`). transformers itself is not imported.

What it reads, in either spelling:

- transformers 5.x: ``rope_parameters`` (with ``rope_type``, ``rope_theta`` and the type's
  fields), possibly one such dict per layer type (``{"full_attention": {...},
  "sliding_attention": {...}}``, Gemma 3 and others): pick one with ``layer_type=``;
- transformers 4.x: ``rope_scaling`` (``rope_type`` or ``type``, and the fields) plus a top-level
  ``rope_theta``;
- ``head_dim`` (else ``hidden_size // num_attention_heads``), ``partial_rotary_factor``,
  ``max_position_embeddings`` and ``original_max_position_embeddings``.

The config may be a transformers config object (or any object with those attributes), a plain
dict (a parsed ``config.json``), or a checkpoint folder / ``config.json`` path. Each
``rope_type`` maps onto one class:

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
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping

from posembed.schemes import rotary_scaling as rs
from posembed.schemes.rotary import RotaryEmbedding
from posembed.schemes.rotary_longrope import LongRoPERotary
from posembed.schemes.rotary_yarn import YaRNRotary

__all__ = ["rotary_from_hf_config", "rope_parameters", "read_config", "ROPE_TYPES"]

_Builder = Callable[["_Fields", dict, int, dict], RotaryEmbedding]


class _Fields:
    """Attribute-or-key access to a config object or a dict, ``None`` for what is missing."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def get(self, name: str, default: Any = None) -> Any:
        if isinstance(self.config, Mapping):
            value = self.config.get(name)
        else:
            value = getattr(self.config, name, None)
        return default if value is None else value


def read_config(source: str | os.PathLike) -> dict:
    """The parsed ``config.json`` of a checkpoint folder, or of a path to the file itself.

    Raises:
        FileNotFoundError: naming the path that was looked at.
    """
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no transformers config at {str(path)!r} (pass a checkpoint folder or its config.json)"
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{str(path)!r} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{str(path)!r} holds a JSON {type(config).__name__}, not a config object")
    return config


def rope_parameters(config: Any, layer_type: str | None = None) -> dict:
    """The flat rope parameters of ``config`` (``rope_type``, ``rope_theta``, the type's fields).

    Reads ``rope_parameters`` (5.x) or ``rope_scaling`` plus ``rope_theta`` (4.x). Parameters
    nested by layer type need ``layer_type``; without it the error names the layer types.

    >>> rope_parameters({"rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 2.0}})
    {'type': 'linear', 'factor': 2.0, 'rope_type': 'linear', 'rope_theta': 500000.0}
    >>> rope_parameters({"rope_parameters": {"full_attention": {"rope_theta": 1e6}}}, "full_attention")
    {'rope_theta': 1000000.0, 'rope_type': 'default'}
    """
    fields = config if isinstance(config, _Fields) else _Fields(config)
    params = fields.get("rope_parameters") or fields.get("rope_scaling") or {}
    if not isinstance(params, Mapping):
        raise ValueError(f"config.rope_parameters must be a dict, got {type(params).__name__}")
    nested = [key for key, value in params.items() if isinstance(value, Mapping)]
    if nested:
        if layer_type is None:
            raise ValueError(
                f"config.rope_parameters is nested by layer type ({', '.join(nested)}); pass layer_type= "
                "one of them to build that layer type's scheme"
            )
        if layer_type not in nested:
            raise ValueError(
                f"layer_type={layer_type!r} is not in config.rope_parameters; layer types: {', '.join(nested)}"
            )
        params = params[layer_type]
    elif layer_type is not None:
        raise ValueError(f"layer_type={layer_type!r} given, but config.rope_parameters is not nested by layer type")
    params = dict(params)
    params.setdefault("rope_type", params.get("type", "default"))
    if params.get("rope_theta") is None:
        params["rope_theta"] = float(fields.get("rope_theta", 10000.0))
    return params


def rotary_from_hf_config(
    config: Any,
    *,
    layout: str = "half",
    max_len: int | None = None,
    layer_type: str | None = None,
    angles: str = "exact",
) -> RotaryEmbedding:
    """The rotary scheme (class and arguments) described by a transformers config.

    Args:
        config: a transformers ``PretrainedConfig`` (``LlamaConfig``, ``Phi3Config``, ...), a dict
            (a parsed ``config.json``), or a checkpoint folder / ``config.json`` path.
        layout: ``"half"`` for Hugging Face checkpoints (their q/k weights are permuted into
            that layout); ``"interleaved"`` for Meta-layout weights.
        max_len: cos/sin cache size (see :class:`RotaryEmbedding`).
        layer_type: which layer type's parameters to read when ``rope_parameters`` is nested by
            layer type (``"full_attention"``, ``"sliding_attention"``, ...).
        angles: ``"exact"`` (float64 angles, accurate at long positions) or ``"fp32"``
            (transformers' float32 angles, bit for bit); see :class:`RotaryEmbedding`.

    Raises:
        ValueError: unknown ``rope_type`` (naming the known ones), a missing field, or nested
            parameters without ``layer_type`` (naming the layer types).

    Example:
        >>> cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
        ...        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}
        >>> rotary_from_hf_config(cfg)
        LinearScalingRotary(head_dim=16, base=10000, layout='half', factor=2)
    """
    if isinstance(config, (str, os.PathLike)):
        config = read_config(config)
    fields = _Fields(config)
    params = rope_parameters(fields, layer_type)
    rope_type = params["rope_type"]
    builder = ROPE_TYPES.get(rope_type)
    if builder is None:
        raise ValueError(f"unknown rope_type {rope_type!r}; known rope types: {', '.join(sorted(ROPE_TYPES))}")
    common: dict[str, Any] = {"base": float(params["rope_theta"]), "layout": layout, "max_len": max_len}
    common["angles"] = angles
    return builder(fields, params, _head_dim(fields), common)


def _head_dim(fields: _Fields) -> int:
    head_dim = fields.get("head_dim")
    if head_dim:
        return int(head_dim)
    hidden, heads = fields.get("hidden_size"), fields.get("num_attention_heads")
    if hidden is None or heads is None:
        raise ValueError("config needs head_dim, or hidden_size and num_attention_heads")
    return int(hidden) // int(heads)


def _rotary_dim(fields: _Fields, params: dict, head_dim: int) -> int:
    fraction = params.get("partial_rotary_factor", fields.get("partial_rotary_factor"))
    return int(head_dim * (1.0 if fraction is None else fraction))


def _require(params: dict, rope_type: str, *names: str) -> None:
    missing = [name for name in names if name not in params]
    if missing:
        raise ValueError(
            f"rope_type {rope_type!r} needs rope_parameters field(s) {', '.join(missing)}; got {sorted(params)}"
        )


def _config_length(fields: _Fields, name: str) -> int:
    value = fields.get(name)
    if value is None:
        raise ValueError(f"this rope type needs config.{name}")
    return int(value)


def _original_len(fields: _Fields, params: dict) -> int:
    value = params.get("original_max_position_embeddings") or fields.get("original_max_position_embeddings")
    return int(value) if value else _config_length(fields, "max_position_embeddings")


def _default(fields, params, head_dim, common) -> RotaryEmbedding:
    return RotaryEmbedding(head_dim, rotary_dim=_rotary_dim(fields, params, head_dim), **common)


def _linear(fields, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "linear", "factor")
    rotary_dim = _rotary_dim(fields, params, head_dim)
    return rs.LinearScalingRotary(head_dim, factor=params["factor"], rotary_dim=rotary_dim, **common)


def _dynamic(fields, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "dynamic", "factor")
    original = _config_length(fields, "max_position_embeddings")
    rotary_dim = _rotary_dim(fields, params, head_dim)
    return rs.DynamicNTKRotary(
        head_dim, factor=params["factor"], original_max_len=original, rotary_dim=rotary_dim, **common
    )


def _yarn(fields, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "yarn", "factor")
    original = _original_len(fields, params)
    factor = params["factor"]
    if factor is None:
        factor = _config_length(fields, "max_position_embeddings") / original
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
        rotary_dim=_rotary_dim(fields, params, head_dim),
        **common,
    )


def _longrope(fields, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "longrope", "short_factor", "long_factor")
    original = _original_len(fields, params)
    factor = params.get("factor")
    if factor is None:
        factor = _config_length(fields, "max_position_embeddings") / original
    return LongRoPERotary(
        head_dim,
        short_factor=params["short_factor"],
        long_factor=params["long_factor"],
        original_max_len=original,
        factor=factor,
        attention_factor=params.get("attention_factor"),
        rotary_dim=_rotary_dim(fields, params, head_dim),
        **common,
    )


def _llama3(fields, params, head_dim, common) -> RotaryEmbedding:
    _require(params, "llama3", "factor", "low_freq_factor", "high_freq_factor")
    return rs.Llama3Rotary(
        head_dim,
        factor=params["factor"],
        original_max_len=_original_len(fields, params),
        low_freq_factor=params["low_freq_factor"],
        high_freq_factor=params["high_freq_factor"],
        rotary_dim=_rotary_dim(fields, params, head_dim),
        **common,
    )


def _proportional(fields, params, head_dim, common) -> RotaryEmbedding:
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
