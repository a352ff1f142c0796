"""Read the RoPE settings of a transformers config, in either spelling: the one reader.

Everything posembed knows about how a config states RoPE is here; both consumers read the :class:`RopeSettings`
it returns and nothing else: the scheme builder (:func:`posembed.interop.rope.config.rotary_from_settings`, behind
``rotary_from_hf_config`` and the zoo) and the check (:mod:`posembed.interop.rope.check` with its traps).

A config arrives as a transformers config object, a ``config.json`` dict, a checkpoint folder
or the path of its ``config.json``. Its RoPE fields are read as written (not as a loader would
repair them), so that the traps can see what is missing:

- transformers 5.x: ``rope_parameters`` (flat, or nested by the config's layer types: ModernBERT, Gemma 3)
  holding ``rope_type``, ``rope_theta`` and the type's fields; ``config.to_dict()`` holds it so;
- transformers 4.x: ``rope_scaling`` (``rope_type`` or the older ``type``) plus a top-level
  ``rope_theta``; per layer type Gemma 3's ``rope_local_base_freq`` and ModernBERT's
  ``global_rope_theta`` / ``local_rope_theta``; GPT-NeoX's ``rotary_emb_base`` / ``rotary_pct``
  and GPT-J's ``rotary_dim``.

What transformers 5.23's config classes do to those fields (layer types, nesting, renames, class defaults) is
:mod:`~posembed.interop.rope.classes`; this module reads a config as they do, in one line: the dict, its class's
facts asked once (:func:`~posembed.interop.rope.classes.config_facts`), the parameters per layer type read
against them, the rotary width and layout (:func:`~posembed.interop.rope.width.rotary_width`), one :class:`RopeSettings`.
Dicts under a key that is not a layer type are ignored (:func:`ignored_parameters`); for a model type transformers
does not know, any dict is a layer type unless the config's ``layer_types`` says otherwise.

A layer type that names no ``rope_theta`` takes the top-level one, as transformers'
``standardize_rope_params`` does, else its config class's default (:attr:`ClassFacts.theta <posembed.interop.rope.classes.ClassFacts>`:
Cohere 5e5, GPT-OSS 1.5e5, :data:`DEFAULT_THETA` for most); a config that states no RoPE field at all but whose
class always has RoPE (a bare Llama or Qwen2 config) takes the parameters that class holds. The pre-training length of yarn,
llama3 and longrope (``original_max_position_embeddings``) is the one transformers 5.23 builds the
model with: on flat parameters a top-level value wins over the parameters' one (the config keeps it
as an attribute, and the rope init functions standardise again), and Phi-3's class default when the
config has none (:func:`declared_original`); PhiMoE and parameters per layer type ignore a top-level
value. :func:`layer_parameters` gives the flat parameters per layer type, :func:`read_rope_settings`
one :class:`RopeSettings` per layer type, :func:`layer_settings` the one of a chosen layer type
(:func:`select_layer`).

Example:
    >>> s = layer_settings({"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096,
    ...                     "rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 4.0}})
    >>> s.rope_type, s.theta, s.head_dim, s.factor, s.original_max_len
    ('linear', 500000.0, 16, 4.0, 4096)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

from posembed.interop.hf.config import config_dict, load_config_dict
from posembed.interop.rope.classes import (
    DEFAULT_THETA, FULL, OLD_LONGROPE, ORIGINAL, ORIGINAL_FROM_PARAMETERS, PER_LAYER_CLASSES, RENAMED_TO_LONGROPE, SLIDING,
    ClassFacts, PerLayerClass, class_facts, config_facts, declared_original, default_layer_types, model_type_of, why_ignored,
)  # fmt: skip
from posembed.interop.rope.width import RotaryWidth, rotary_width
from posembed.interop.rope.model import ALL_LAYERS, model_part

#: declared_original, default_layer_types and the tables of rope_classes stay importable from here
__all__ = [
    "RopeSettings", "config_dict", "load_config_dict", "has_rope", "states_rope", "rope_spelling", "layer_parameters",
    "select_layer", "layer_settings", "read_rope_settings", "layer_pattern", "declared_original", "ignored_parameters", "why_ignored",
    "default_layer_types", "DEFAULT_THETA", "ALL_LAYERS", "PER_LAYER_CLASSES", "PerLayerClass", "RENAMED_TO_LONGROPE",
    "ORIGINAL_USERS",
]  # fmt: skip

#: model types that use RoPE although their configs state no RoPE field (GPT-J, CodeGen)
_ROTARY_WITHOUT_FIELDS = frozenset({"gptj", "codegen"})
#: fields that mean a config uses RoPE
_ROPE_FIELDS = (
    "rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base", "rotary_dim", "rotary_pct",
    "rope_local_base_freq", "global_rope_theta", "local_rope_theta",
)  # fmt: skip
#: types whose frequencies depend on the pre-training length
ORIGINAL_USERS = frozenset({"yarn", "longrope", "llama3"})
_T = TypeVar("_T")


@dataclass(frozen=True)
class RopeSettings:
    """The RoPE settings of one layer type, as the config states them.

    ``params`` is the flat 5.x dict (``rope_type``, ``rope_theta``, the type's fields);
    ``theta_given`` / ``original_given`` say whether the config states the value used.
    ``original_max_len`` is the pre-training length transformers builds the model with, and
    ``original_source`` where it comes from: ``"parameters"``, ``"top level"``, ``"class default"``
    or ``"max_position_embeddings"``; rope types that do not read it (linear, dynamic) report the
    parameters' value, else the top-level one.
    """

    layer_type: str
    rope_type: str
    theta: float
    theta_given: bool
    head_dim: int
    head_dim_given: bool
    hidden_size: int | None
    num_heads: int | None
    rotary_dim: int
    partial_rotary_factor: float
    layout: str
    max_position_embeddings: int | None
    original_max_len: int | None
    original_given: bool
    params: dict = field(default_factory=dict)
    original_source: str = "max_position_embeddings"

    @property
    def factor(self) -> float:
        value = self.params.get("factor")
        return 1.0 if value is None else float(value)


def has_rope(raw: dict) -> bool:
    """Whether the config (its language model's part: :func:`~posembed.interop.rope.model.model_part`) describes
    rotary position embeddings: it states a RoPE field, or its model type is rotary without one (GPT-J, the
    per-layer classes, a :func:`~posembed.interop.rope.classes.rotary_class`: a bare Llama config builds Llama's RoPE)."""
    raw = model_part(raw)
    model_type = model_type_of(raw)
    return states_rope(raw) or model_type in _ROTARY_WITHOUT_FIELDS or model_type in PER_LAYER_CLASSES or class_facts(model_type).rotary


def states_rope(raw: dict) -> bool:
    """Whether the config states a RoPE field (any of ``rope_parameters``, ``rope_scaling``, ``rope_theta``, ...)."""
    return any(raw.get(name) not in (None, {}) for name in _ROPE_FIELDS)


def rope_spelling(raw: dict) -> str:
    """Which spelling the config uses, in words."""
    if raw.get("rope_parameters"):
        return "rope_parameters (transformers 5.x)"
    return "rope_scaling + rope_theta (transformers 4.x)"


def _stated(raw: dict) -> tuple[str, Mapping]:
    """``(field name, its dict)`` of the RoPE parameters as written: ``rope_parameters``, else ``rope_scaling``."""
    name = "rope_parameters" if raw.get("rope_parameters") else "rope_scaling"
    return name, _mapping(raw, name)


def _mapping(raw: dict, name: str) -> Mapping:
    stated = raw.get(name) or {}
    if not isinstance(stated, Mapping):
        raise ValueError(f"config.{name} must be a dict, got {type(stated).__name__}")
    return stated


def _nested(name: str, stated: Mapping) -> dict[str, Mapping] | None:
    """The dicts of nested parameters of a config whose layer types are unknown, ``None`` for flat ones; mixed ones are an error."""
    layers = {key: value for key, value in stated.items() if isinstance(value, Mapping)}
    if not layers:
        return None
    flat = [key for key, value in stated.items() if key not in layers and value is not None]
    if flat:
        raise ValueError(
            f"config.{name} mixes per-layer-type dicts ({', '.join(layers)}) with flat fields ({', '.join(flat)}): "
            "give every field inside a layer type's dict, or none nested"
        )
    return layers


def _layer_keys(facts: ClassFacts, name: str, stated: Mapping) -> list[str]:
    """The keys of ``stated`` that transformers takes as layer types: those the class's own labels name, else
    the config's ``layer_types`` (none for a class without that field); every dict when neither is known."""
    if facts.labels:
        names = set(facts.labels)
    elif facts.known and facts.labels is None:  # the class has no layer_types: flat parameters
        return []
    elif facts.layer_types is not None:
        names = set(facts.layer_types)
    else:  # an unknown class, or one that fills in default layer types: the dicts stand for them
        return list(_nested(name, stated) or ())
    return [key for key, value in stated.items() if key in names and isinstance(value, Mapping)]


def _per_layer_v4(raw: dict, params: dict) -> dict[str, dict]:
    """For a model type transformers does not know: Gemma 3's and ModernBERT's 4.x per-layer-type theta fields,
    ``{ALL_LAYERS: params}`` without them."""
    if raw.get("rope_local_base_freq") is not None:  # Gemma 3: scaling on full attention only
        return {FULL: params, SLIDING: {"rope_theta": raw["rope_local_base_freq"]}}
    if raw.get("global_rope_theta") is not None or raw.get("local_rope_theta") is not None:  # ModernBERT
        glob = {**params, **({"rope_theta": raw["global_rope_theta"]} if raw.get("global_rope_theta") else {})}
        return {FULL: glob, SLIDING: {**params, "rope_theta": raw.get("local_rope_theta")}}
    return {ALL_LAYERS: params}


def _theta(where: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"the rope_theta of {where} must be a number, got {value!r}") from None


def _rename_type(params: dict) -> dict:
    """The 4.x ``type`` renamed ``rope_type`` (unless both are there)."""
    if "type" in params and "rope_type" not in params:
        params["rope_type"] = params.pop("type")
    return params


def _complete(layer: str, params: dict, top_theta: Any, default: float = DEFAULT_THETA) -> tuple[dict, bool]:
    """``(params, theta given)``: ``rope_type`` (``default`` when unnamed) and a float ``rope_theta`` (the class's
    ``default`` when neither the parameters nor the config name one)."""
    _rename_type(params).setdefault("rope_type", "default")
    where = "the config" if layer == ALL_LAYERS else f"layer type {layer!r}"
    if params.get("rope_theta") is not None:
        params["rope_theta"] = _theta(where, params["rope_theta"])
    elif top_theta is not None:
        params["rope_theta"] = _theta("the config", top_theta)
    else:
        params["rope_theta"] = default
        return params, False
    return params, True


def _per_layer_class(raw: dict, facts: ClassFacts) -> tuple[dict[str, tuple[dict, bool]], tuple[str, ...]]:
    """The nested parameters a :class:`~posembed.interop.rope.classes.PerLayerClass` config class builds from the
    config's ``rope_parameters`` and 4.x ``rope_scaling``, with the stated keys it ignores; only the config's
    layer types are kept."""
    spec, stated = facts.per_layer, _mapping(raw, "rope_parameters")
    scaling = _mapping(raw, "rope_scaling") if raw.get("rope_scaling") is not None else None
    nested = {key: dict(value) if isinstance(value, Mapping) else value for key, value in stated.items()}
    if raw.get("rope_parameters") is None:
        nested = {SLIDING: {"rope_type": "default"}, FULL: {"rope_type": "default"}}
    for layer in spec.scaled if scaling is not None else ():
        nested.setdefault(layer, {"rope_type": "default"}).update(scaling)
    given = {}
    for layer, name, default in spec.thetas:
        if not isinstance(nested.get(layer), Mapping):
            nested[layer] = {"rope_type": "default"}
        top = raw.get(name) if name else None
        given[layer] = nested[layer].get("rope_theta") is not None or top is not None
        if nested[layer].get("rope_theta") is None:
            nested[layer]["rope_theta"] = top if top is not None else default
    for layer, factor in spec.partials:
        nested[layer].setdefault("partial_rotary_factor", factor)
    names = set(facts.layer_types or ())
    keys = [key for key, value in nested.items() if key in names and isinstance(value, Mapping)]
    own = {layer for layer, _, _ in spec.thetas}  # the class fills these in itself, whether its layers use them or not
    ignored = tuple(key for key in stated if key not in keys and key not in own)
    return {key: (_complete(key, nested[key], None)[0], given.get(key, True)) for key in keys}, ignored


def _read(raw: dict, facts: ClassFacts) -> tuple[dict[str, tuple[dict, bool]], tuple[str, ...]]:
    """``({layer type: (flat params, theta given)}, the stated keys transformers ignores)``: the one interpretation.

    Per-layer classes build their own nested parameters; a config that states no RoPE field takes its class's
    parameters (none given; a top-level ``partial_rotary_factor`` replaces the class's); others are read as stated."""
    if facts.per_layer is not None:
        return _per_layer_class(raw, facts)
    defaults = None if states_rope(raw) else copy.deepcopy(facts.parameters)  # None unless the class is rotary
    if defaults and raw.get("partial_rotary_factor") is not None:
        defaults.pop("partial_rotary_factor", None)  # the config's own, read beside the parameters
    if defaults:  # the class's own parameters, which the config did not state
        layers, ignored = _read_stated(raw, facts, "rope_parameters", defaults)
        return {layer: (params, False) for layer, (params, _) in layers.items()}, ignored
    return _read_stated(raw, facts, *_stated(raw))


def _read_stated(raw: dict, facts: ClassFacts, name: str, stated: Mapping) -> tuple[dict[str, tuple[dict, bool]], tuple[str, ...]]:
    """The parameters ``stated`` under the field ``name``, completed as the config's class completes them."""
    default = DEFAULT_THETA if facts.theta is None else facts.theta
    top_theta = raw.get("rope_theta", raw.get("rotary_emb_base"))
    keys = _layer_keys(facts, name, stated)
    if keys:
        layers = {key: dict(stated[key]) for key in keys}
        ignored = tuple(key for key, value in stated.items() if key not in keys and value is not None)
    else:  # flat: dicts among the fields are not layer types here, and transformers ignores them
        params = {key: value for key, value in stated.items() if not isinstance(value, Mapping)}
        ignored = tuple(key for key in stated if key not in params)
        if name == "rope_parameters":
            layers = {ALL_LAYERS: params}
        else:  # 4.x: the top-level theta joins rope_scaling before the per-layer-type split
            params = _rename_type(params)
            if params.get("rope_theta") is None and top_theta is not None:
                params["rope_theta"] = top_theta
            layers, top_theta = (_per_layer_v4(raw, params) if not facts.known else {ALL_LAYERS: params}), None
    completed = {layer: _complete(layer, params, top_theta, default) for layer, params in layers.items()}
    if facts.model_type in RENAMED_TO_LONGROPE and ALL_LAYERS in completed:
        params = completed[ALL_LAYERS][0]
        params["rope_type"] = "longrope" if params["rope_type"] in OLD_LONGROPE else params["rope_type"]
    return completed, ignored


def ignored_parameters(raw: dict) -> tuple[str, ...]:
    """The keys of the stated RoPE parameters that transformers ignores: dicts under a key that is not
    one of the config's layer types, and flat fields beside parameters nested by layer type.

    >>> ignored_parameters({"model_type": "llama", "rope_parameters": {"full_attention": {"rope_theta": 1e6}}})
    ('full_attention',)
    """
    raw = model_part(raw)
    return _read(raw, config_facts(raw))[1]


def layer_parameters(raw: dict) -> dict[str, dict]:
    """The flat 5.x parameters per layer type (``{"all": ...}`` for one set), in either spelling.

    Each holds ``rope_type`` and a float ``rope_theta`` (a layer type without one takes the
    top-level ``rope_theta``, else its config class's default). Raises ``ValueError`` for a malformed
    config: parameters that are not a dict, a dict that mixes layer types with flat fields (where
    the layer types are unknown), a ``rope_theta`` that is not a number.

    >>> layer_parameters({"rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 2.0}})
    {'all': {'factor': 2.0, 'rope_type': 'linear', 'rope_theta': 500000.0}}
    >>> layer_parameters({"layer_types": ["full_attention"], "rope_parameters": {"full_attention": {"rope_theta": 1e6}}})
    {'full_attention': {'rope_theta': 1000000.0, 'rope_type': 'default'}}
    """
    raw = model_part(raw)
    return {layer: params for layer, (params, _) in _read(raw, config_facts(raw))[0].items()}


def select_layer(layers: Mapping[str, _T], layer_type: str | None) -> _T:
    """The entry of ``layer_type`` in a per-layer-type mapping (:data:`ALL_LAYERS` alone: flat).

    Raises ``ValueError`` for nested parameters without ``layer_type`` (naming the layer types),
    an unknown layer type, or a ``layer_type`` for flat parameters.
    """
    if list(layers) == [ALL_LAYERS]:
        if layer_type is not None:
            raise ValueError(f"layer_type={layer_type!r} given, but config.rope_parameters is not nested by layer type")
        return layers[ALL_LAYERS]
    if layer_type is None:
        raise ValueError(
            f"config.rope_parameters is nested by layer type ({', '.join(layers)}); pass layer_type= "
            "one of them to build that layer type's scheme"
        )
    if layer_type not in layers:
        raise ValueError(
            f"layer_type={layer_type!r} is not in config.rope_parameters; layer types: {', '.join(layers)}"
        )
    return layers[layer_type]


def _partial(raw: dict, facts: ClassFacts, width: RotaryWidth, layer: str, params: dict) -> float:
    """The rotary share of the head: the parameters', the config's (three spellings), else its flat class's default;
    a per-layer class reads only its nested parameters (which hold its own defaults: NeoMME)."""
    if facts.per_layer is not None:
        return float(params.get("partial_rotary_factor", 1.0))
    for value in (params.get("partial_rotary_factor"), raw.get("partial_rotary_factor"), raw.get("rotary_pct")):
        if value is not None:
            return float(value)
    if raw.get("rotary_dim"):
        return int(raw["rotary_dim"]) / width.head_dim
    default = facts.partial if layer == ALL_LAYERS else None
    return 1.0 if default is None else default


def _original(raw: dict, facts: ClassFacts, layer: str, params: dict, max_pos: int | None) -> tuple[int | None, str]:
    """``(pre-training length, where from)`` as transformers' ``standardize_rope_params`` resolves it
    when the model is built (the rope init functions run it again, with the config's attributes set)."""
    stated, top = params.get(ORIGINAL), raw.get(ORIGINAL)
    if params["rope_type"] not in ORIGINAL_USERS:  # not read: what the config says, for the traps
        if stated is not None or top is not None:
            return int(stated if stated is not None else top), "parameters" if stated is not None else "top level"
        return max_pos, "max_position_embeddings"
    model_type = raw.get("model_type")
    if layer == ALL_LAYERS and model_type not in ORIGINAL_FROM_PARAMETERS:  # nested: setdefault only
        if top is not None:
            return int(top), "top level"
        declared, default = facts.original
        if declared and default is not None:
            return default, "class default"
    if stated is not None:  # a config with no RoPE field holds its class's parameters
        return int(stated), "parameters" if states_rope(raw) else "class default"
    return max_pos, "max_position_embeddings"


def _settings(raw: dict, facts: ClassFacts, width: RotaryWidth, layer: str, params: dict, theta_given: bool) -> RopeSettings:
    max_pos = width.max_position_embeddings
    original, source = _original(raw, facts, layer, params, max_pos)
    partial = _partial(raw, facts, width, layer, params)
    head_dim, rotary_dim = width.head_dim, int(width.head_dim * partial)
    model = width.of(layer)  # the widths the model's own rotary embedding builds
    if model is not None:  # proportional RoPE spreads its frequencies over the head: its rotary share is the factor's
        head_dim, rotary_dim = model[0], (model[1] if params["rope_type"] != "proportional" else int(model[0] * partial))
        partial = partial if int(head_dim * partial) == rotary_dim else rotary_dim / head_dim  # the model's own share
    return RopeSettings(
        layer_type=layer, rope_type=params["rope_type"], theta=params["rope_theta"], theta_given=theta_given,
        head_dim=head_dim, head_dim_given=width.head_dim_given, hidden_size=width.hidden_size, num_heads=width.num_heads,
        rotary_dim=rotary_dim, partial_rotary_factor=partial, layout=width.layout,
        max_position_embeddings=max_pos, original_max_len=original,
        original_given=source in ("parameters", "top level") or (params.get(ORIGINAL) == original and states_rope(raw)),
        params=params, original_source=source,
    )  # fmt: skip


def read_rope_settings(raw: dict, part: str = "text") -> list[RopeSettings]:
    """One :class:`RopeSettings` per layer type of a config dict (of its ``part``: a multimodal config's language
    model, or ``"vision"`` its vision tower; :func:`~posembed.interop.rope.model.model_part`).

    Raises ``ValueError`` when the config has no RoPE (naming the fields looked for), is
    malformed (see :func:`layer_parameters`) or has no head size.
    """
    raw = model_part(raw, part)
    if not has_rope(raw):
        kind = raw.get("position_embedding_type") or raw.get("model_type") or "this model"
        raise ValueError(
            f"the config has no RoPE ({kind!s}): none of {', '.join(_ROPE_FIELDS)} is set"
        )
    facts = config_facts(raw)
    layers = _read(raw, facts)[0]
    width = rotary_width(raw, facts) if layers else None
    return [_settings(raw, facts, width, layer, params, given) for layer, (params, given) in layers.items()]


def layer_settings(config: Any, layer_type: str | None = None, part: str = "text") -> RopeSettings:
    """The :class:`RopeSettings` of one layer type of any accepted config (what the builder reads).

    Unlike :func:`read_rope_settings`, a config without RoPE gets the defaults (a bare rotary one its class's).
    ``layer_type`` picks one of nested parameters (see :func:`select_layer`).
    """
    raw = model_part(config_dict(config), part)
    facts = config_facts(raw)
    layers, ignored = _read(raw, facts)
    _refuse_ignored_layers(raw, facts, layers, ignored)
    params, given = select_layer(layers, layer_type)
    return _settings(raw, facts, rotary_width(raw, facts), layer_type or ALL_LAYERS, params, given)


def _refuse_ignored_layers(raw: dict, facts: ClassFacts, layers: Mapping[str, Any], ignored: tuple[str, ...]) -> None:
    """Flat parameters beside dicts that transformers ignores: the builder refuses them rather than build the flat ones."""
    _, stated = _stated(raw)
    dicts = [key for key in ignored if isinstance(stated.get(key), Mapping)]
    if list(layers) != [ALL_LAYERS] or not dicts:
        return
    raise ValueError(
        f"config.rope_parameters is nested by layer type ({', '.join(dicts)}), but {facts.why_ignored}: transformers "
        "reads the parameters as flat and ignores those dicts; give flat parameters, or layer_types naming them"
    )


def layer_pattern(raw: dict, layers: int) -> list[str | None]:
    """Each of ``layers`` layers' type: ``layer_types`` (else the default of its per-layer config class),
    else Gemma 3's / ModernBERT's 4.x pattern fields, else :data:`ALL_LAYERS` for every layer; ``None`` for a
    layer without RoPE (Llama 4's ``no_rope_layers``: 0 there).

    >>> layer_pattern({"model_type": "gemma3_text", "sliding_window_pattern": 3}, 4)[:3]
    ['sliding_attention', 'sliding_attention', 'full_attention']
    >>> layer_pattern({"model_type": "llama4_text", "no_rope_layers": [1, 0]}, 2)
    ['all', None]
    """
    raw = model_part(raw)
    if raw.get("layer_types") or raw.get("model_type") in PER_LAYER_CLASSES:
        found = list(default_layer_types({**raw, "num_hidden_layers": layers}) or ())
    elif raw.get("sliding_window_pattern"):  # Gemma 3: every Nth layer is full
        every = int(raw["sliding_window_pattern"])
        found = ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(layers)]
    elif raw.get("global_attn_every_n_layers"):  # ModernBERT: layer 0, N, 2N ... are global
        every = int(raw["global_attn_every_n_layers"])
        found = ["full_attention" if i % every == 0 else "sliding_attention" for i in range(layers)]
    else:
        found = [ALL_LAYERS] * layers
    no_rope = raw.get("no_rope_layers")  # Llama 4: 1 = RoPE, 0 = NoPE
    return [layer if not no_rope or use else None for layer, use in zip(found, no_rope or found)]
