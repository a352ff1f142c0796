"""The RoPE parameters per layer type: :func:`read_parameters`.

Transformers' config object's ``rope_parameters``, standardized as the rope init functions do, per layer type it
nests them by (:func:`object_parameters`); without transformers, for a model type it does not know, a config its
class refuses or a class without ``rope_parameters`` (GPT-J), the dict as written (:func:`dict_parameters`: both
spellings, Gemma 3's / ModernBERT's 4.x per-layer-type thetas; a missing theta is :data:`DEFAULT_THETA`).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from typing import Any

from posembed.interop.rope.model import ALL_LAYERS, ORIGINAL, REFUSED, model_part, transformers_config

__all__ = [
    "ROPE_FIELDS", "DEFAULT_THETA", "ORIGINAL", "ALL_LAYERS", "states_rope", "stated", "stated_layer",
    "dict_parameters", "as_theta", "declares", "object_parameters", "read_parameters", "why_ignored",
    "layer_parameters",
]  # fmt: skip

#: fields that mean a config uses RoPE
ROPE_FIELDS = ("rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base", "rotary_dim", "rotary_pct",
               "rope_local_base_freq", "global_rope_theta", "local_rope_theta")  # fmt: skip
#: the theta of transformers' ``RotaryEmbeddingConfigMixin``: what the dict reading takes when the config names none
DEFAULT_THETA = 10000.0
FULL, SLIDING = "full_attention", "sliding_attention"


def states_rope(raw: Mapping) -> bool:
    """Whether the config states one of the :data:`ROPE_FIELDS`."""
    return any(raw.get(name) not in (None, {}) for name in ROPE_FIELDS)


def stated(raw: Mapping) -> tuple[str, Mapping]:
    """``(field name, its dict)`` of the RoPE parameters as written: ``rope_parameters``, else ``rope_scaling``."""
    name = "rope_parameters" if raw.get("rope_parameters") else "rope_scaling"
    value = raw.get(name) or {}
    if not isinstance(value, Mapping):
        raise ValueError(f"config.{name} must be a dict, got {type(value).__name__}")
    return name, value


def stated_layer(raw: Mapping, layer: str) -> Mapping:
    """The parameters the config writes for ``layer``: its nested dict, else the flat fields."""
    given = stated(raw)[1]
    nested = given.get(layer)
    return nested if isinstance(nested, Mapping) else {k: v for k, v in given.items() if not isinstance(v, Mapping)}


def as_theta(layer: str, value: Any) -> float:
    """``value`` as a float theta; ``ValueError`` naming the layer type when it is not a number."""
    where = "the config" if layer == ALL_LAYERS else f"layer type {layer!r}"
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"the rope_theta of {where} must be a number, got {value!r}") from None


def _nested(name: str, given: Mapping, layer_types: Any) -> tuple[dict[str, dict], tuple[str, ...]]:
    """``({layer type: its dict}, ignored keys)``: every dict a layer type unless ``layer_types`` names others;
    dicts mixed with flat fields are an error when no ``layer_types`` decides."""
    dicts = {key: dict(value) for key, value in given.items() if isinstance(value, Mapping)}
    if isinstance(layer_types, (list, tuple)):
        keep = {key: value for key, value in dicts.items() if key in layer_types}
        return keep, tuple(key for key, value in given.items() if key not in keep and value is not None) if keep else ()
    flat = [key for key, value in given.items() if key not in dicts and value is not None]
    if dicts and flat:
        raise ValueError(
            f"config.{name} mixes per-layer-type dicts ({', '.join(dicts)}) with flat fields "
            f"({', '.join(flat)}): give every field inside a layer type's dict, or none nested"
        )
    return dicts, ()


def _per_layer_v4(raw: Mapping, params: dict) -> dict[str, dict]:
    """Gemma 3's and ModernBERT's 4.x per-layer-type theta fields, ``{ALL_LAYERS: params}`` without them."""
    if raw.get("rope_local_base_freq") is not None:  # Gemma 3: scaling on full attention only
        return {FULL: params, SLIDING: {"rope_theta": raw["rope_local_base_freq"]}}
    if raw.get("global_rope_theta") is not None or raw.get("local_rope_theta") is not None:  # ModernBERT
        glob = {**params, **({"rope_theta": raw["global_rope_theta"]} if raw.get("global_rope_theta") else {})}
        return {FULL: glob, SLIDING: {**params, "rope_theta": raw.get("local_rope_theta")}}
    return {ALL_LAYERS: params}


def dict_parameters(raw: Mapping) -> tuple[dict[str, dict], tuple[str, ...]]:
    """``({layer type: flat params}, stated keys ignored)`` of the dict as written; each params holds ``rope_type``
    and a float ``rope_theta``. Raises ``ValueError`` for parameters that are not a dict, mixed ones, a theta that
    is not a number."""
    name, given = stated(raw)
    top = raw.get("rope_theta", raw.get("rotary_emb_base"))
    layers, ignored = _nested(name, given, raw.get("layer_types"))
    if not layers:
        params = {key: value for key, value in given.items() if not isinstance(value, Mapping)}
        ignored = tuple(key for key in given if key not in params)
        if "type" in params and "rope_type" not in params:
            params["rope_type"] = params.pop("type")
        if name == "rope_scaling":  # 4.x: the top-level theta joins rope_scaling before the per-layer-type split
            if params.get("rope_theta") is None and top is not None:
                params["rope_theta"] = top
            layers, top = _per_layer_v4(raw, params), None
        else:
            layers = {ALL_LAYERS: params}
    for layer, params in layers.items():
        if "rope_type" not in params:
            params["rope_type"] = params.pop("type", "default")
        theta = params.get("rope_theta") if params.get("rope_theta") is not None else top
        params["rope_theta"] = DEFAULT_THETA if theta is None else as_theta(layer, theta)
    return layers, ignored


def declares(hf: Any, name: str) -> bool:
    """Whether the config object's class takes ``name`` as an ``__init__`` argument (a field of its dataclass)."""
    return hf is not None and name in inspect.signature(type(hf).__init__).parameters


def object_parameters(hf: Any) -> dict[str, dict] | None:
    """``{layer type: flat params}`` of transformers' config object, standardized again as the rope init functions
    do once the config's attributes are set; ``None`` when it holds none."""
    config = copy.deepcopy(hf)
    try:
        config.standardize_rope_params()
    except REFUSED:  # a heterogeneous config standardizes per layer: its parameters as they are
        config = hf
    params = getattr(config, "rope_parameters", None)
    if not isinstance(params, dict) or not params:
        return None
    nests = getattr(config, "_rope_type_labels", None) or declares(config, "layer_types")  # as at construction
    keys = config.nested_rope_parameter_keys(params) if nests else []
    layers = {key: params[key] for key in keys if isinstance(params[key], dict)} if keys else {ALL_LAYERS: params}
    default = getattr(config, "default_theta", None)
    default = default if isinstance(default, (int, float)) else DEFAULT_THETA  # per layer type: the class fills it in
    found = {layer: copy.deepcopy(given) for layer, given in layers.items()}
    for layer, given in found.items():
        given["rope_theta"] = as_theta(layer, default if given.get("rope_theta") is None else given["rope_theta"])
    return found


def read_parameters(raw: dict) -> tuple[dict[str, dict], Any]:
    """``({layer type: flat params}, transformers' config object or None)``."""
    hf = transformers_config(raw)
    layers = object_parameters(hf) if hf is not None else None
    if layers is None:
        return dict_parameters(raw)[0], None
    for params in layers.values():  # the old key 'type' that named the type (or Phi-3's renamed one) is gone
        if params.get("type") in (params["rope_type"], "su", "yarn") and params["rope_type"] in (
            params.get("type"),
            "longrope",
        ):
            params.pop("type")
    return layers, hf


def why_ignored(raw: Mapping) -> str:
    """Why transformers does not take the config's dicts beside flat parameters as layer types, in words."""
    hf = transformers_config(model_part(raw))
    if hf is not None and getattr(hf, "_rope_type_labels", None):
        return (
            f"transformers' {raw.get('model_type')} config class labels its layer types "
            f"{', '.join(hf._rope_type_labels)}"
        )
    if hf is not None and getattr(hf, "layer_types", None) is None:
        return f"transformers' {raw.get('model_type')} config class has no layer_types"
    return "the config's layer_types does not name them"


def layer_parameters(raw: dict) -> dict[str, dict]:
    """The flat 5.x parameters per layer type (``{"all": ...}`` for one set), in either spelling.

    Each holds ``rope_type`` and a float ``rope_theta``. Raises ``ValueError`` for a malformed config: parameters
    that are not a dict, a dict that mixes layer types with flat fields (where the layer types are unknown), a
    ``rope_theta`` that is not a number.

    >>> layer_parameters({"rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 2.0}})
    {'all': {'factor': 2.0, 'rope_type': 'linear', 'rope_theta': 500000.0}}
    >>> layer_parameters(
    ...     {"layer_types": ["full_attention"], "rope_parameters": {"full_attention": {"rope_theta": 1e6}}}
    ... )
    {'full_attention': {'rope_theta': 1000000.0, 'rope_type': 'default'}}
    """
    return read_parameters(model_part(raw))[0]
