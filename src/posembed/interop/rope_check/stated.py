"""What a config wrote, beside what the reader made of it: the raw-dict reading only the traps need.

The reader (:mod:`posembed.interop.rope`) gives the values transformers builds the model with; a trap says whether
each was written and where (:func:`stated_of`), and which keys transformers ignores (:func:`ignored_parameters`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from posembed.interop.rope.model import config_value, model_part, transformers_config
from posembed.interop.rope.parameters import (
    ALL_LAYERS,
    ORIGINAL,
    declares,
    dict_parameters,
    object_parameters,
    stated,
    stated_layer,
    states_rope,
)  # fmt: skip
from posembed.interop.rope.settings import ORIGINAL_USERS, RopeSettings
from posembed.interop.rope_check.numbers import THETA_FIELDS

__all__ = ["Stated", "stated_of", "theta_fields", "ignored_parameters"]

#: the top-level theta fields a layer type may read, as written (4.x Gemma 3 and ModernBERT per layer type)
_TOP_THETAS = {
    "full_attention": ("global_rope_theta",),
    "sliding_attention": ("rope_local_base_freq", "local_rope_theta"),
}


@dataclass(frozen=True)
class Stated:
    """What the config writes for one layer type: whether it writes the theta used (``theta_given``) and the field
    transformers' object reads it from (``theta_field``: ``"parameters"``, ``"rope_theta"``, ``"rope_local_base_freq"``,
    ...; ``None``: the class's own), whether it states the head width (``head_dim_given``), and where the pre-training
    length used comes from (``original_source``: ``"parameters"``, ``"top level"``, ``"class default"`` or
    ``"max_position_embeddings"``; for a rope type that reads none, where the config writes one)."""

    theta_given: bool
    theta_field: str | None
    head_dim_given: bool
    original_source: str

    @property
    def original_given(self) -> bool:
        return self.original_source in ("parameters", "top level")


def _given(value: Any, used: Any) -> bool:
    try:
        return value is not None and float(value) == float(used)
    except (TypeError, ValueError):
        return False


def theta_fields(raw: dict) -> dict[str, str | None]:
    """``{layer type: the field its theta is read from}``, asked of transformers: every theta field (top-level, and
    the parameters' where written) set to a marker of its own, the marker each layer type's object reads."""
    probe, markers = copy.deepcopy(raw), {}
    for name in THETA_FIELDS:
        probe[name] = 1e9 + len(markers)
        markers[probe[name]] = name
    for name in ("rope_parameters", "rope_scaling"):
        given = probe.get(name) if isinstance(probe.get(name), dict) else {}
        for holder in [given, *(v for v in given.values() if isinstance(v, dict))]:
            if holder.get("rope_theta") is not None:
                holder["rope_theta"] = 2e9 + len(markers)
                markers[holder["rope_theta"]] = "parameters"
    hf = transformers_config(probe)
    layers = (object_parameters(hf) if hf is not None else None) or {}
    return {layer: markers.get(params["rope_theta"]) for layer, params in layers.items()}


def _theta_given(raw: dict, s: RopeSettings, field: str | None) -> bool:
    """Whether the config writes the theta used: the field transformers' object reads it from is one the config
    writes; reading the dict, one of the thetas the layer may read is the value used."""
    if s.known:
        return field is not None and (field == "parameters" or raw.get(field) is not None)
    names = ("rope_theta", "rotary_emb_base", *_TOP_THETAS.get(s.layer_type, ()))
    written = (stated_layer(raw, s.layer_type).get("rope_theta"), *map(raw.get, names))
    return any(_given(value, s.theta) for value in written)


def _original_source(raw: dict, hf: Any, s: RopeSettings) -> str:
    """Where the pre-training length the reader took comes from (:attr:`Stated.original_source`)."""
    mine, top, layer = stated_layer(raw, s.layer_type).get(ORIGINAL), raw.get(ORIGINAL), s.layer_type
    if s.params["rope_type"] not in ORIGINAL_USERS:  # not read: what the config says
        return "parameters" if mine is not None else "top level" if top is not None else "max_position_embeddings"
    value = s.params.get(ORIGINAL) if s.known else top if layer == ALL_LAYERS and top is not None else mine
    if value is None:
        return "max_position_embeddings"
    value = int(value)
    if _given(mine, value):
        return "parameters"
    if layer == ALL_LAYERS and _given(top, value):
        return "top level"
    if (top is None and declares(hf, ORIGINAL) and config_value(hf, ORIGINAL) == value) or not states_rope(raw):
        return "class default"  # a class that declares the field, or a bare config's class parameters
    return "max_position_embeddings" if value == s.max_position_embeddings else "class default"


def stated_of(raw: dict, s: RopeSettings) -> Stated:
    """The :class:`Stated` of the layer type ``s`` of the config part ``raw``."""
    hf = transformers_config(raw) if s.known else None
    field = theta_fields(raw).get(s.layer_type) if s.known else None
    key = "qk_rope_head_dim" if s.latent is not None or raw.get("head_dim") is None else "head_dim"
    return Stated(_theta_given(raw, s, field), field, raw.get(key) is not None, _original_source(raw, hf, s))


def ignored_parameters(raw: dict) -> tuple[str, ...]:
    """The keys of the stated RoPE parameters that transformers ignores: dicts under a key that is not one of the
    config's layer types, and flat fields beside parameters nested by layer type (the layer types its class fills
    in itself aside).

    >>> ignored_parameters({"model_type": "llama", "rope_parameters": {"full_attention": {"rope_theta": 1e6}}})
    ('full_attention',)
    """
    raw = model_part(raw)
    hf = transformers_config(raw)
    layers = (object_parameters(hf) if hf is not None else None) or {}
    if not layers:
        return dict_parameters(raw)[1]
    if list(layers) == [ALL_LAYERS]:
        return tuple(key for key, value in stated(raw)[1].items() if isinstance(value, Mapping))
    given = raw.get("rope_parameters") if isinstance(raw.get("rope_parameters"), Mapping) else {}
    bare = transformers_config({k: v for k, v in raw.items() if k not in ("rope_parameters", "rope_scaling")})
    own = {k for k, v in (getattr(bare, "rope_parameters", None) or {}).items() if isinstance(v, Mapping)}
    return tuple(key for key, value in given.items() if value is not None and key not in layers and key not in own)
