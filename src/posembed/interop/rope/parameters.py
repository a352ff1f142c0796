"""The RoPE parameters a config states, per layer type, completed as its transformers config class completes them.

:func:`read_parameters` is the reading behind :mod:`posembed.interop.rope.settings`: ``rope_parameters`` (flat, or
nested by the layer types the class takes: :func:`~posembed.interop.rope.classes.config_facts`), else the 4.x
``rope_scaling`` with a top-level ``rope_theta`` (and Gemma 3's / ModernBERT's per-layer-type theta fields for a
model type transformers does not know), the per-layer classes' own nesting (:data:`~posembed.interop.rope.classes.PER_LAYER_CLASSES`),
a bare rotary class's own parameters, and each layer type's theta (the parameters', the top-level one, else the
class's default). The keys transformers ignores are returned beside them, for the traps and the builder's refusal.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from posembed.interop.rope.classes import (
    DEFAULT_THETA, FULL, OLD_LONGROPE, RENAMED_TO_LONGROPE, SLIDING, ClassFacts,
)  # fmt: skip
from posembed.interop.rope.model import ALL_LAYERS

__all__ = ["ROPE_FIELDS", "states_rope", "stated", "read_parameters"]

#: fields that mean a config uses RoPE
ROPE_FIELDS = (
    "rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base", "rotary_dim", "rotary_pct",
    "rope_local_base_freq", "global_rope_theta", "local_rope_theta",
)  # fmt: skip

def states_rope(raw: dict) -> bool:
    """Whether the config states a RoPE field (any of ``rope_parameters``, ``rope_scaling``, ``rope_theta``, ...)."""
    return any(raw.get(name) not in (None, {}) for name in ROPE_FIELDS)



def stated(raw: dict) -> tuple[str, Mapping]:
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


def read_parameters(raw: dict, facts: ClassFacts) -> tuple[dict[str, tuple[dict, bool]], tuple[str, ...]]:
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
    return _read_stated(raw, facts, *stated(raw))


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
