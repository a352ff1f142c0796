"""Build the rotary scheme that matches a Hugging Face transformers config.

The schemes take explicit arguments; this module maps a config onto them
(:func:`rotary_from_hf_config` is the API; the schemes never import this module). It never reads a config's RoPE fields itself:
:mod:`posembed.interop.rope.settings` reads them (both spellings, the defaults, the layer types)
into one :class:`~posembed.interop.rope.settings.RopeSettings`, and :func:`rotary_from_settings`
builds from that, as the zoo and ``posembed rope check`` do.

The config may be a transformers config object (read through its ``to_dict()``; any other
object through its attributes), a plain dict (a parsed ``config.json``), or a checkpoint folder /
``config.json`` path; parameters nested by layer type (``{"full_attention": {...},
"sliding_attention": {...}}``: Gemma 3, ModernBERT, and their 4.x per-layer theta fields) need
``layer_type=``. Dicts that transformers would ignore (no ``layer_types`` of the config names them)
beside flat parameters are refused, rather than built as the flat parameters alone. Each ``rope_type`` maps onto one class:

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

from typing import Any, Callable

from posembed._checks import did_you_mean
from posembed.interop.hf.config import config_dict, read_config
from posembed.interop.rope.settings import RopeSettings, layer_parameters, layer_settings, select_layer
from posembed.schemes import rotary_scaling as rs
from posembed.schemes.factory import ROPE_TYPE_SCHEMES
from posembed.schemes.rotary import RotaryEmbedding
from posembed.schemes.rotary_longrope import LongRoPERotary
from posembed.schemes.rotary_yarn import YaRNRotary

__all__ = ["rotary_from_hf_config", "rotary_from_settings", "rope_parameters", "read_config", "ROPE_TYPES"]

_Builder = Callable[[RopeSettings, dict], RotaryEmbedding]


def rope_parameters(config: Any, layer_type: str | None = None) -> dict:
    """The flat rope parameters of ``config`` (``rope_type``, ``rope_theta``, the type's fields).

    :func:`posembed.interop.rope.settings.layer_parameters` of one layer type: parameters nested
    by layer type need ``layer_type``; without it the error names the layer types.

    >>> rope_parameters({"rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 2.0}})
    {'factor': 2.0, 'rope_type': 'linear', 'rope_theta': 500000.0}
    >>> rope_parameters({"rope_parameters": {"full_attention": {"rope_theta": 1e6}}}, "full_attention")
    {'rope_theta': 1000000.0, 'rope_type': 'default'}
    """
    return dict(select_layer(layer_parameters(config_dict(config)), layer_type))


def rotary_from_hf_config(
    config: Any,
    *,
    layout: str | None = None,
    max_len: int | None = None,
    layer_type: str | None = None,
    angles: str = "exact",
) -> RotaryEmbedding:
    """The rotary scheme (class and arguments) described by a transformers config.

    Args:
        config: a transformers ``PretrainedConfig`` (``LlamaConfig``, ``Phi3Config``, ...), a dict
            (a parsed ``config.json``), or a checkpoint folder / ``config.json`` path.
        layout: ``None`` (default): the layout the config's class rotates
            (:attr:`RopeSettings.layout <posembed.interop.rope.settings.RopeSettings>`: ``"half"`` for
            Llama-style checkpoints, whose q/k weights are permuted into that layout;
            ``"interleaved"`` for GPT-J, CodeGen, Llama 4, DeepSeek-V2, ...); or ``"half"`` /
            ``"interleaved"`` to override it (Meta-layout weights).
        max_len: cos/sin cache size (see :class:`RotaryEmbedding`).
        layer_type: which layer type's parameters to read when ``rope_parameters`` is nested by
            layer type (``"full_attention"``, ``"sliding_attention"``, ...).
        angles: ``"exact"`` (float64 angles, accurate at long positions) or ``"fp32"``
            (transformers' float32 angles, bit for bit); see :class:`RotaryEmbedding`.

    Raises:
        ValueError: unknown ``rope_type`` (naming the known ones), a missing field, a malformed
            config, or nested parameters without ``layer_type`` (naming the layer types).

    Example:
        >>> cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
        ...        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}
        >>> rotary_from_hf_config(cfg)
        LinearScalingRotary(head_dim=16, base=10000, layout='half', factor=2)
    """
    settings = layer_settings(config, layer_type)
    return rotary_from_settings(settings, layout=layout, max_len=max_len, angles=angles)


def rotary_from_settings(
    settings: RopeSettings, *, layout: str | None = None, max_len: int | None = None, angles: str = "exact"
) -> RotaryEmbedding:
    """The rotary scheme of one layer type's :class:`~posembed.interop.rope.settings.RopeSettings`.

    Arguments as :func:`rotary_from_hf_config`; raises ``ValueError`` for an unknown
    ``rope_type`` or a field its type needs.
    """
    builder = ROPE_TYPES.get(settings.rope_type)
    if builder is None:
        raise ValueError(
            f"unknown rope_type {settings.rope_type!r}{did_you_mean(settings.rope_type, ROPE_TYPES)}; "
            f"known rope types: {', '.join(sorted(ROPE_TYPES))}"
        )
    common: dict[str, Any] = {"base": float(settings.theta), "layout": layout or settings.layout, "max_len": max_len}
    common["angles"] = angles
    return builder(settings, common)


def _require(s: RopeSettings, *names: str) -> None:
    missing = [name for name in names if name not in s.params]
    if missing:
        raise ValueError(
            f"rope_type {s.rope_type!r} needs rope_parameters field(s) {', '.join(missing)}; got {sorted(s.params)}"
        )


def _length(value: int | None, name: str) -> int:
    if value is None:
        raise ValueError(f"this rope type needs config.{name}")
    return int(value)


def _max_len(s: RopeSettings) -> int:
    return _length(s.max_position_embeddings, "max_position_embeddings")


def _original_len(s: RopeSettings) -> int:
    return _length(s.original_max_len, "max_position_embeddings")


def _default(s: RopeSettings, common: dict) -> RotaryEmbedding:
    return RotaryEmbedding(s.head_dim, rotary_dim=s.rotary_dim, **common)


def _linear(s: RopeSettings, common: dict) -> RotaryEmbedding:
    _require(s, "factor")
    return rs.LinearScalingRotary(s.head_dim, factor=s.params["factor"], rotary_dim=s.rotary_dim, **common)


def _dynamic(s: RopeSettings, common: dict) -> RotaryEmbedding:
    _require(s, "factor")
    return rs.DynamicNTKRotary(
        s.head_dim, factor=s.params["factor"], original_max_len=_max_len(s), rotary_dim=s.rotary_dim, **common
    )


def _yarn(s: RopeSettings, common: dict) -> RotaryEmbedding:
    _require(s, "factor")
    p, original = s.params, _original_len(s)
    factor = p["factor"]
    if factor is None:
        factor = _max_len(s) / original
    return YaRNRotary(
        s.head_dim,
        factor=factor,
        original_max_len=original,
        beta_fast=p.get("beta_fast") or 32.0,
        beta_slow=p.get("beta_slow") or 1.0,
        attention_factor=p.get("attention_factor"),
        mscale=p.get("mscale"),
        mscale_all_dim=p.get("mscale_all_dim"),
        truncate=p.get("truncate", True),
        rotary_dim=s.rotary_dim,
        **common,
    )


def _longrope(s: RopeSettings, common: dict) -> RotaryEmbedding:
    _require(s, "short_factor", "long_factor")
    p, original = s.params, _original_len(s)
    factor = p.get("factor")
    if factor is None:
        factor = _max_len(s) / original
    return LongRoPERotary(
        s.head_dim,
        short_factor=p["short_factor"],
        long_factor=p["long_factor"],
        original_max_len=original,
        factor=factor,
        attention_factor=p.get("attention_factor"),
        rotary_dim=s.rotary_dim,
        **common,
    )


def _llama3(s: RopeSettings, common: dict) -> RotaryEmbedding:
    _require(s, "factor", "low_freq_factor", "high_freq_factor")
    return rs.Llama3Rotary(
        s.head_dim,
        factor=s.params["factor"],
        original_max_len=_original_len(s),
        low_freq_factor=s.params["low_freq_factor"],
        high_freq_factor=s.params["high_freq_factor"],
        rotary_dim=s.rotary_dim,
        **common,
    )


def _proportional(s: RopeSettings, common: dict) -> RotaryEmbedding:
    factor = s.params.get("factor", 1.0)
    return rs.ProportionalRotary(s.head_dim, rope_fraction=s.partial_rotary_factor, factor=factor, **common)


#: scheme name -> how its constructor's arguments come from a config's RoPE settings
_BUILDERS: dict[str, _Builder] = {
    "rope": _default,
    "rope_linear": _linear,
    "rope_dynamic_ntk": _dynamic,
    "rope_yarn": _yarn,
    "rope_longrope": _longrope,
    "rope_llama3": _llama3,
    "rope_proportional": _proportional,
}

#: rope_type -> builder, for every rope type transformers implements for Llama-style models; the
#: rope_type names are the factory's (:data:`posembed.schemes.factory.ROPE_TYPE_SCHEMES`)
ROPE_TYPES: dict[str, _Builder] = {rope_type: _BUILDERS[name] for rope_type, name in ROPE_TYPE_SCHEMES.items()}
