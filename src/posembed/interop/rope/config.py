"""Build the rotary scheme of a Hugging Face transformers config: :func:`rotary_from_hf_config`.

The config is read into :class:`~posembed.interop.rope.settings.RopeSettings` and :func:`rotary_from_settings` builds
them through the factory: the entry of the ``rope_type``, each :class:`~posembed.schemes.factory.Arg` reading the
values it names (``original_max_position_embeddings`` -> ``original_max_len``). Dicts that transformers ignores
beside flat parameters are refused; ``partial_rotary_factor`` is honoured for every type, as transformers' init
functions do.
"""

from __future__ import annotations

from typing import Any, cast

from posembed._utils.checks import did_you_mean
from posembed.interop.hf.config import config_dict, read_config
from posembed.interop.rope.settings import RopeSettings, layer_parameters, layer_settings, select_layer
from posembed.schemes.base import PositionScheme
from posembed.schemes.factory import FACTORY, ROPE_TYPE_SCHEMES, build_from_kwargs, rope_entry, rope_kwargs
from posembed.schemes.rotary.mrope import MRoPE
from posembed.schemes.rotary.rope import RotaryEmbedding

__all__ = [
    "rotary_from_hf_config",
    "rotary_from_settings",
    "rope_parameters",
    "read_config",
    "ROPE_TYPES",
    "built_types",
]

#: the rope types posembed builds, in the factory's order (:data:`posembed.schemes.factory.ROPE_TYPE_SCHEMES`)
ROPE_TYPES: tuple[str, ...] = tuple(ROPE_TYPE_SCHEMES)


def rope_parameters(config: Any, layer_type: str | None = None) -> dict:
    """The flat rope parameters of one layer type of ``config`` (``rope_type``, ``rope_theta``, the type's fields);
    nested ones need ``layer_type`` (the error names the layer types).

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
    part: str = "text",
) -> PositionScheme:
    """The rotary scheme (class and arguments) described by a transformers config.

    Args:
        config: a transformers ``PretrainedConfig`` (``LlamaConfig``, ``Phi3Config``, ...), a dict
            (a parsed ``config.json``), or a checkpoint folder / ``config.json`` path.
        layout: ``None`` (default): the layout the config's model rotates (``"half"`` for Llama-style checkpoints,
            ``"interleaved"`` for GPT-J, CodeGen, Llama 4, DeepSeek-V2, Cohere, GLM, ...); or ``"half"`` /
            ``"interleaved"`` to override it (Meta-layout weights).
        max_len: cos/sin cache size (see :class:`~posembed.schemes.rotary.rope.RotaryEmbedding`).
        layer_type: the layer type to read where ``rope_parameters`` is nested by layer type (``"full_attention"``).
        angles: ``"exact"`` (float64 angles, accurate at long positions) or ``"fp32"``
            (transformers' float32 angles, bit for bit); see :class:`~posembed.schemes.rotary.rope.RotaryEmbedding`.
        part: ``"text"`` (default: a multimodal config's language model) or ``"vision"`` (its vision tower).

    Raises:
        ValueError: unknown ``rope_type`` (naming the known ones), a missing field, a malformed config, or nested
            parameters without ``layer_type`` (naming the layer types).

    Example:
        >>> cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128,
        ...        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}
        >>> rotary_from_hf_config(cfg)
        LinearScalingRotary(head_dim=16, base=10000, layout='half', factor=2)
    """
    settings = layer_settings(config, layer_type, part)
    return rotary_from_settings(settings, layout=layout, max_len=max_len, angles=angles)


def rotary_from_settings(
    settings: RopeSettings, *, layout: str | None = None, max_len: int | None = None, angles: str = "exact"
) -> PositionScheme:
    """The rotary scheme of one layer type's settings: the factory entry of its rope type, built from the values its
    arguments read (:func:`~posembed.schemes.factory.rope_kwargs`), checked. Arguments as :func:`rotary_from_hf_config`;
    ``ValueError`` for an unknown ``rope_type`` or a field its type needs.
    """
    values = _values(settings)
    entry = rope_entry(settings.rope_type, values)
    if entry is None:
        raise ValueError(
            f"unknown rope_type {settings.rope_type!r}{did_you_mean(settings.rope_type, ROPE_TYPES)}; "
            f"known rope types: {', '.join(sorted(ROPE_TYPES))}"
        )
    missing = [name for name in entry.rope_needs if name not in settings.params]
    if missing:
        raise ValueError(
            f"rope_type {settings.rope_type!r} needs rope_parameters field(s) {', '.join(missing)}; "
            f"got {sorted(settings.params)}"
        )
    kwargs = rope_kwargs(entry, values)
    if any(arg.required and arg.name not in kwargs for arg in entry.args):
        raise ValueError("this rope type needs config.max_position_embeddings")
    common = {"base": float(settings.theta), "layout": layout or settings.layout, "max_len": max_len, "angles": angles}
    scheme = build_from_kwargs(entry.name, {**kwargs, **{k: v for k, v in common.items() if k in entry.accepted}})
    if settings.mrope is not None and entry.rope_type not in (
        None,
        "default",
    ):  # a scaled type dealt to M-RoPE's sections
        sections = FACTORY["mrope"]
        kwargs = {**rope_kwargs(sections, values), **{k: v for k, v in common.items() if k in sections.accepted}}
        # the factory types what it builds as a PositionScheme: the mrope entry builds an MRoPE, and a scaled rope
        # type a RotaryEmbedding
        mrope = cast(MRoPE, build_from_kwargs(sections.name, kwargs))
        return mrope.deal(cast(RotaryEmbedding, scheme))
    return scheme


def built_types(settings: RopeSettings) -> frozenset[str]:
    """The rope types one layer type's settings build, by the names a config declares them with: their ``rope_type``,
    and the factory entry a field of the settings builds (``"mrope"`` where they hold M-RoPE sections, alone or with
    a scaled type dealt to them).

    >>> from posembed.interop.rope.settings import layer_settings
    >>> sorted(built_types(layer_settings({"model_type": "qwen2_vl", "hidden_size": 64, "num_attention_heads": 4,
    ...                                    "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}})))
    ['default', 'mrope']
    """
    entry = rope_entry("default", _values(settings))
    return frozenset({settings.rope_type, *([entry.name] if entry is not None and entry.rope_type is None else [])})


def _values(s: RopeSettings) -> dict[str, Any]:
    """What a factory entry reads from the settings, by transformers' names: the parameters and the settings."""
    ratio = s.max_position_embeddings / s.original_max_len if s.max_position_embeddings and s.original_max_len else None
    width = int(s.head_dim * s.partial_rotary_factor)  # what transformers divides by: odd for GLM-4V-MoE (21)
    odd = width if width % 2 and width + 1 == s.rotary_dim else None
    mrope = (
        {}
        if s.mrope is None
        else {
            "mrope_section": list(s.mrope.section),
            "mrope_arrangement": s.mrope.arrangement,
            "section_axes": list(s.mrope.section_axes),
        }
    )  # the model's own M-RoPE
    axial = (
        {}
        if s.axial is None
        else {
            **s.axial._asdict(),
            "head_dim": s.head_dim,
            "axis_order": list(s.axial.axis_order),
            "pixtral_frequencies": True if s.axial.scheme == "rope_pixtral" else None,
        }
    )
    return {**mrope, **axial, **s.params, "head_dim": s.head_dim, "rotary_dim": s.rotary_dim,
            "partial_rotary_factor": s.partial_rotary_factor, "max_position_embeddings": s.max_position_embeddings,
            "original_max_position_embeddings": s.original_max_len, "length_ratio": ratio,
            "direction": s.direction, "channels": s.channels, "frequency_dim": odd,
            "forward_mscale": s.forward_mscale and list(s.forward_mscale[:2]),
            "mscale_switch": s.forward_mscale and s.forward_mscale[2]}  # fmt: skip
