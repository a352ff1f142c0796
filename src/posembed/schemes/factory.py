"""The one list of positional schemes and how each is built from a model's sizes or a RoPE config.

Every scheme name has one explicit :class:`SchemeEntry`: its class and, in constructor order, the :class:`Arg` s
it takes. An argument comes from the model's :class:`ModelSizes` (``size``: rotary schemes take ``head_dim``, ALiBi
``num_heads`` and ``symmetric = not causal``, a learned table ``max_len`` and ``dim``), from a RoPE config's
settings (``rope``: ``original_max_position_embeddings`` -> ``original_max_len``; :func:`rope_entry` picks the
entry of a ``rope_type``, :func:`rope_kwargs` reads its arguments), or is an override (``base``, ``factor`` ...),
checked by name and type before the constructor runs. A test checks that every entry's arguments match its
class's constructor. The lab, the inspector, configs and checkpoints (:mod:`posembed.schemes.config`),
``posembed schemes`` and transformers configs (:func:`posembed.interop.rope.config.rotary_from_settings`) all
build through :func:`build_from_sizes` / :func:`build_from_kwargs`; no other module keys a table by scheme name.

Example:
    >>> sizes = ModelSizes(dim=16, num_heads=2, head_dim=8, max_len=32, causal=True)
    >>> build_from_sizes("alibi", sizes).symmetric
    False
    >>> build_from_sizes("rope_yarn", sizes, {"factor": 4, "original_max_len": 16}).factor
    4.0
    >>> build_from_sizes("alibi", sizes, {"bas": 500})
    Traceback (most recent call last):
    ...
    ValueError: scheme 'alibi' takes no argument 'bas'; it takes: num_heads, symmetric
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from posembed._utils.checks import did_you_mean
from posembed.schemes.absolute.learned import LearnedAbsolute, LearnedParameter
from posembed.schemes.absolute.sinusoidal import ScaledSinusoidal, Sinusoidal
from posembed.schemes.absolute.sinusoidal_nd import Sinusoidal2D, Sinusoidal3D
from posembed.schemes.base import PositionScheme
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.bias.cope import CoPE
from posembed.schemes.bias.deberta import DebertaRelative
from posembed.schemes.bias.dynamic import DynamicPositionBias
from posembed.schemes.bias.fire import FIRE
from posembed.schemes.bias.forgetting import ForgettingGate
from posembed.schemes.bias.kerple import Kerple
from posembed.schemes.bias.nope import NoPE
from posembed.schemes.bias.sandwich import Sandwich
from posembed.schemes.bias.shaw import ShawRelative
from posembed.schemes.bias.t5 import T5RelativeBias
from posembed.schemes.entry import SIZE_FIELDS, Arg, ModelSizes, Reader, SchemeEntry, StudyReference, listed
from posembed.schemes.rotary.axial import AxialRotary
from posembed.schemes.rotary.longrope import LongRoPERotary
from posembed.schemes.rotary.mrope import MRoPE
from posembed.schemes.rotary.pixtral import PixtralRotary
from posembed.schemes.rotary.rope import RotaryEmbedding
from posembed.schemes.rotary.scaling import (
    DynamicNTKRotary,
    LinearScalingRotary,
    Llama3Rotary,
    NTKAwareRotary,
    ProportionalRotary,
)
from posembed.schemes.rotary.xpos import XPos
from posembed.schemes.rotary.yarn import YaRNRotary

__all__ = [
    "ModelSizes", "Arg", "SchemeEntry", "ENTRIES", "FACTORY", "SCHEME_CLASSES", "SIZE_FIELDS", "ROPE_TYPE_SCHEMES",
    "METHOD_SCHEMES", "StudyReference", "REFERENCE_SCHEMES",
    "all_schemes", "scheme_entry", "check_kwargs", "build_from_sizes", "build_from_kwargs", "rope_entry", "rope_kwargs",
]  # fmt: skip


#: the settings of RotaryEmbedding's rotation that XPos (its own rotation) does not take
_PLACEMENT = ("compiled", "direction", "channels", "frequency_dim", "forward_mscale", "mscale_switch")


def _size(name: str, field: str, kind: str = "int", *, required: bool = True) -> Arg:
    return Arg(name, kind, size=field, required=required)


def _opt(
    name: str, kind: str, *, required=False, nullable=False, at: Reader | None = None, rope: tuple | str = ()
) -> Arg:
    return Arg(
        name, kind, required=required, nullable=nullable, stored_at=at, rope=(rope,) if isinstance(rope, str) else rope
    )


def _sinusoid_options(owner: str = "", *, max_len: bool = True) -> tuple[Arg, ...]:
    """``base``, ``layout`` (``max_len``) and ``angles``, stored on the scheme or on its ``owner`` child."""
    names = ("base", "layout", "max_len", "angles") if max_len else ("base", "layout", "angles")
    kinds = {"base": ("float", False), "layout": ("str", False), "max_len": ("int", True), "angles": ("str", False)}
    return tuple(_opt(n, kinds[n][0], nullable=kinds[n][1], at=f"{owner}.{n}" if owner else None) for n in names)


#: the keyword arguments every RotaryEmbedding variant forwards; a RoPE config gives the rotation's
#: (``rotary_dim``, ...)
_ROPE_OPTIONS = (
    _opt("rotary_dim", "int", nullable=True, rope="rotary_dim"), _opt("base", "float"), _opt("layout", "str"),
    _opt("max_len", "int", nullable=True), _opt("compiled", "bool", nullable=True), _opt("angles", "str"),
    _opt("direction", "str", rope="direction"), _opt("channels", "str", rope="channels"),
    _opt("frequency_dim", "int", nullable=True, rope="frequency_dim"),
    _opt("forward_mscale", "floats", nullable=True, rope="forward_mscale"),
    _opt("mscale_switch", "int", nullable=True, rope="mscale_switch"),
)  # fmt: skip
_HEAD_DIM = Arg("head_dim", "int", size="head_dim", required=True, rope=("head_dim",))
_TABLE = (_size("max_len", "max_len"), _size("dim", "dim"), _opt("init_std", "float"))
_ORIGINAL = "original_max_position_embeddings"  # transformers' name of the pre-training length (yarn, llama3, longrope)
_FACTOR = _opt("factor", "float", required=True, rope="factor")
#: yarn's and longrope's factor: the parameters', else ``max_position_embeddings / original_max_position_embeddings``
_FACTOR_OR_RATIO = ("factor", "length_ratio")

#: every scheme, in the order ``posembed schemes`` lists them within a kind
# one entry per scheme, its arguments grouped as they read (the formatter leaves the table as written)
ENTRIES: tuple[SchemeEntry, ...] = (
    SchemeEntry(LearnedAbsolute, _TABLE),
    SchemeEntry(LearnedParameter, _TABLE),
    SchemeEntry(Sinusoidal, (_size("dim", "dim"), *_sinusoid_options())),
    SchemeEntry(ScaledSinusoidal, (_size("dim", "dim"), *_sinusoid_options("sinusoidal"))),
    SchemeEntry(Sinusoidal2D, (_size("dim", "dim"), *_sinusoid_options("axis", max_len=False))),
    SchemeEntry(Sinusoidal3D, (_size("dim", "dim"), *_sinusoid_options("axis", max_len=False))),
    SchemeEntry(RotaryEmbedding, (_HEAD_DIM, *_ROPE_OPTIONS), rope_type="default", method="extrapolate"),
    SchemeEntry(LinearScalingRotary, (_HEAD_DIM, _FACTOR, *_ROPE_OPTIONS), rope_type="linear", method="linear",
                rope_needs=("factor",)),
    SchemeEntry(NTKAwareRotary, (_HEAD_DIM, _opt("factor", "float", required=True), *_ROPE_OPTIONS), method="ntk"),
    SchemeEntry(DynamicNTKRotary, (  # transformers' dynamic NTK switches at max_position_embeddings
        _HEAD_DIM, _FACTOR, _opt("original_max_len", "int", required=True, rope="max_position_embeddings"),
        *_ROPE_OPTIONS,
    ), rope_type="dynamic", method="dynamic_ntk", rope_needs=("factor",)),
    SchemeEntry(YaRNRotary, (
        _HEAD_DIM, _opt("factor", "float", required=True, rope=_FACTOR_OR_RATIO),
        _opt("original_max_len", "int", required=True, rope=_ORIGINAL),
        _opt("beta_fast", "float", rope="beta_fast"), _opt("beta_slow", "float", rope="beta_slow"),
        _opt("attention_factor", "float", nullable=True, rope="attention_factor"),
        _opt("mscale", "float", nullable=True, rope="mscale"),
        _opt("mscale_all_dim", "float", nullable=True, rope="mscale_all_dim"),
        _opt("truncate", "bool", rope="truncate"), *_ROPE_OPTIONS,
    ), rope_type="yarn", method="yarn", rope_needs=("factor",)),
    SchemeEntry(Llama3Rotary, (
        _HEAD_DIM, _FACTOR, _opt("original_max_len", "int", required=True, rope=_ORIGINAL),
        _opt("low_freq_factor", "float", rope="low_freq_factor"),
        _opt("high_freq_factor", "float", rope="high_freq_factor"),
        *_ROPE_OPTIONS,
    ), rope_type="llama3", method="llama3", rope_needs=("factor", "low_freq_factor", "high_freq_factor")),
    SchemeEntry(LongRoPERotary, (
        _HEAD_DIM, _opt("short_factor", "floats", required=True, rope="short_factor"),
        _opt("long_factor", "floats", required=True, rope="long_factor"),
        _opt("original_max_len", "int", required=True, rope=_ORIGINAL), _opt("factor", "float", rope=_FACTOR_OR_RATIO),
        _opt("attention_factor", "float", nullable=True, rope="attention_factor"), *_ROPE_OPTIONS,
    ), rope_type="longrope", method="longrope", rope_needs=("short_factor", "long_factor")),
    SchemeEntry(ProportionalRotary, (  # its frequencies span the whole head: no rotary_dim from the config
        _HEAD_DIM, _opt("rope_fraction", "float", required=True, rope="partial_rotary_factor"),
        _opt("factor", "float", rope="factor"), _opt("rotary_dim", "int", nullable=True), *_ROPE_OPTIONS[1:],
    ), rope_type="proportional"),
    SchemeEntry(XPos, (
        _HEAD_DIM, _opt("scale_base", "int"), *(arg for arg in _ROPE_OPTIONS if arg.name not in _PLACEMENT),
    )),
    SchemeEntry(AxialRotary, (  # transformers' vision towers: the settings their module's forward shows
        _HEAD_DIM, _opt("num_axes", "int", rope="num_axes"), _opt("axis_dim", "int", nullable=True, rope="axis_dim"),
        _opt("frequencies", "str"), _opt("base", "float"), _opt("max_freq", "float"), _opt("layout", "str"),
        _opt("angles", "str"), _opt("axis_order", "floats", nullable=True, rope="axis_order"),
        _opt("frequency_order", "str", rope="frequency_order"),
        _opt("layout_span", "str", rope="layout_span"),
    ), rope_type="axial"),
    SchemeEntry(PixtralRotary, (_HEAD_DIM, _opt("base", "float"), _opt("layout", "str"), _opt("angles", "str")),
                rope_field="pixtral_frequencies"),
    SchemeEntry(MRoPE, (
        _HEAD_DIM, _opt("mrope_section", "floats", nullable=True, rope="mrope_section"), _opt("base", "float"),
        _opt("layout", "str"), _opt("angles", "str"), _opt("rotary_dim", "int", nullable=True, rope="rotary_dim"),
        _opt("arrangement", "str", rope="mrope_arrangement"), _opt("section_axes", "floats", rope="section_axes"),
        _opt("frequency_dim", "int", nullable=True, rope="frequency_dim"),
    ), rope_field="mrope_section"),
    SchemeEntry(ALiBi, (_size("num_heads", "num_heads"), _size("symmetric", "bidirectional", "bool", required=False)),
                reference=StudyReference(0)),
    SchemeEntry(T5RelativeBias, (
        _size("num_heads", "num_heads"), _opt("num_buckets", "int"), _opt("max_distance", "int"),
        _size("bidirectional", "bidirectional", "bool", required=False), _opt("init_std", "float"),
    )),
    SchemeEntry(ShawRelative, (
        _size("num_heads", "num_heads"), _size("head_dim", "head_dim"), _opt("max_distance", "int", required=True),
        _opt("mode", "str"), _opt("init_std", "float"),
    )),
    SchemeEntry(Kerple, (_size("num_heads", "num_heads"), _opt("kernel", "str")),
                reference=StudyReference(3, lambda context: {"kernel": "log"})),
    SchemeEntry(Sandwich, (_size("num_heads", "num_heads"), _size("dim", "dim"), _opt("base", "float")),
                reference=StudyReference(4)),
    SchemeEntry(FIRE, (
        _size("num_heads", "num_heads"), _opt("hidden", "int"), _opt("threshold", "float", at="init_threshold"),
        _opt("init_c", "float"),
    ), reference=StudyReference(2, lambda context: {"threshold": context / 4, "init_c": 0.1})),
    SchemeEntry(DynamicPositionBias, (
        _size("num_heads", "num_heads"), _opt("hidden", "int"), _opt("depth", "int"), _opt("log_distances", "bool"),
        _opt("norm", "bool"),
    )),
    SchemeEntry(ForgettingGate, (
        _size("num_heads", "num_heads"), _size("head_dim", "head_dim"), _opt("bias_init", "float"),
    )),
    SchemeEntry(CoPE, (
        _size("num_heads", "num_heads"), _size("head_dim", "head_dim"), _opt("npos_max", "int", required=True),
        _opt("init_std", "float"),
    ), reference=StudyReference(5, lambda context: {"npos_max": context})),
    SchemeEntry(DebertaRelative, (
        _size("dim", "dim"), _size("num_heads", "num_heads"), _size("head_dim", "head_dim"),
        _opt("position_buckets", "int", nullable=True), _opt("max_relative_positions", "int"),
        _opt("attention_terms", "strs"), _opt("share_att_key", "bool"),
        _opt("layer_norm", "bool", at=lambda scheme: scheme.norm is not None),
        _opt("layer_norm_eps", "float", at=lambda scheme: 1e-7 if scheme.norm is None else scheme.norm.eps),
        _opt("init_std", "float"),
    )),
    SchemeEntry(NoPE, (), reference=StudyReference(1)),
)  # fmt: skip

#: scheme name -> entry
FACTORY: Mapping[str, SchemeEntry] = MappingProxyType({entry.name: entry for entry in ENTRIES})

#: transformers' ``rope_type`` -> scheme name, from the entries (the one table of those names)
ROPE_TYPE_SCHEMES: Mapping[str, str] = MappingProxyType(
    {e.rope_type: e.name for e in ENTRIES if e.rope_type is not None}
)
#: the lab's context-extension method -> scheme name, in the order the lab's tables list them
METHOD_SCHEMES: Mapping[str, str] = MappingProxyType({e.method: e.name for e in ENTRIES if e.method is not None})
#: the context study's references: the scheme names of the entries with a ``reference``, by its rank
REFERENCE_SCHEMES: tuple[str, ...] = tuple(
    name
    for _, name in sorted(((e.reference.rank, e.name) for e in ENTRIES if e.reference is not None), key=lambda r: r[0])
)
#: scheme name -> class (what :data:`posembed.schemes.SCHEMES` shows)
SCHEME_CLASSES: Mapping[str, type[PositionScheme]] = MappingProxyType({entry.name: entry.cls for entry in ENTRIES})


def all_schemes() -> dict[str, type[PositionScheme]]:
    """Every scheme class by name, in the factory's order (a copy of :data:`SCHEME_CLASSES`)."""
    return dict(SCHEME_CLASSES)


def scheme_entry(name: str) -> SchemeEntry:
    """The entry called exactly ``name``; ``ValueError`` naming the known schemes otherwise."""
    if name not in FACTORY:
        raise ValueError(f"unknown scheme {name!r}{did_you_mean(name, FACTORY)}; known: {', '.join(sorted(FACTORY))}")
    return FACTORY[name]


def check_kwargs(entry: SchemeEntry, kwargs: Mapping[str, Any]) -> None:
    """``ValueError`` naming the key and the accepted ones for an unknown or wrong-typed argument."""
    for key, value in kwargs.items():
        arg = entry.arg(key)
        if not arg.accepts(value):
            raise ValueError(f"scheme {entry.name!r} argument {key!r} must be {arg.describe_kind()}, got {value!r}; "
                             f"it takes: {listed(entry.accepted)}")  # fmt: skip


def build_from_kwargs(name: str, kwargs: Mapping[str, Any]) -> PositionScheme:
    """The scheme ``name`` built from all its arguments (a stored config), checked first."""
    entry = scheme_entry(name)
    check_kwargs(entry, kwargs)
    missing = [arg.name for arg in entry.args if arg.required and arg.name not in kwargs]
    if missing:
        raise ValueError(f"scheme {name!r} needs {', '.join(map(repr, missing))}; it takes: {listed(entry.accepted)}")
    return entry.cls(**kwargs)


def build_from_sizes(name: str, sizes: ModelSizes, overrides: Mapping[str, Any] | None = None) -> PositionScheme:
    """The scheme ``name`` for a model of ``sizes``; ``overrides`` win over the sizes.

    ``ValueError`` for an unknown name, an unknown or wrong-typed override, or a required
    argument that neither the sizes nor the overrides give (``factor`` of ``rope_yarn``).
    """
    entry = scheme_entry(name)
    overrides = dict(overrides or {})
    check_kwargs(entry, overrides)
    kwargs = {arg.name: getattr(sizes, arg.size) for arg in entry.args if arg.size and arg.name not in overrides}
    return build_from_kwargs(name, {**kwargs, **overrides})


def rope_entry(rope_type: str, fields: Mapping[str, Any] = MappingProxyType({})) -> SchemeEntry | None:
    """The entry a RoPE config of ``rope_type`` with ``fields`` builds: the one whose ``rope_field`` a ``default`` or
    ``axial`` config holds (M-RoPE, Pixtral), else the one of ``rope_type``; ``None`` for a rope type no entry names.

    >>> rope_entry("yarn").name, rope_entry("default", {"mrope_section": [2, 1, 1]}).name
    ('rope_yarn', 'mrope')
    """
    if rope_type in ("default", "axial"):
        for entry in ENTRIES:
            if entry.rope_field is not None and fields.get(entry.rope_field) is not None:
                return entry
    name = ROPE_TYPE_SCHEMES.get(rope_type)
    return None if name is None else FACTORY[name]


def rope_kwargs(entry: SchemeEntry, values: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments ``entry`` reads from a RoPE config's ``values`` (its parameters and settings by transformers'
    names, :attr:`Arg.rope`): each argument's first key whose value is not ``None``; absent ones are left out
    (the constructor's default, or a missing required argument for :func:`build_from_kwargs` to name).

    >>> rope_kwargs(FACTORY["rope_llama3"], {"head_dim": 8, "factor": 8.0, "original_max_position_embeddings": 64})
    {'head_dim': 8, 'factor': 8.0, 'original_max_len': 64}
    """
    found = {arg.name: [values[key] for key in arg.rope if values.get(key) is not None] for arg in entry.args}
    return {name: given[0] for name, given in found.items() if given}
