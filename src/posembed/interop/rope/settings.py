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

from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

from posembed.interop.hf.config import config_dict, load_config_dict
from posembed.interop.rope.classes import (
    DEFAULT_THETA, ORIGINAL, ORIGINAL_FROM_PARAMETERS, PER_LAYER_CLASSES, RENAMED_TO_LONGROPE, ClassFacts, PerLayerClass,
    class_facts, config_facts, declared_original, default_layer_types, model_type_of, why_ignored,
)  # fmt: skip
from posembed.interop.rope.axial import AxialSettings
from posembed.interop.rope.sections import MRopeSections
from posembed.interop.rope.width import RotaryWidth, rotary_width
from posembed.interop.rope.model import ALL_LAYERS, model_part
from posembed.interop.rope.parameters import ROPE_FIELDS, read_parameters, stated, states_rope

#: declared_original, default_layer_types and the tables of rope_classes stay importable from here
__all__ = [
    "RopeSettings", "config_dict", "load_config_dict", "has_rope", "states_rope", "rope_spelling", "layer_parameters",
    "select_layer", "layer_settings", "read_rope_settings", "layer_pattern", "declared_original", "ignored_parameters", "why_ignored",
    "default_layer_types", "DEFAULT_THETA", "ALL_LAYERS", "PER_LAYER_CLASSES", "PerLayerClass", "RENAMED_TO_LONGROPE",
    "ORIGINAL_USERS",
]  # fmt: skip

#: model types that use RoPE although their configs state no RoPE field (GPT-J, CodeGen)
_ROTARY_WITHOUT_FIELDS = frozenset({"gptj", "codegen"})
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
    parameters' value, else the top-level one. ``head_dim`` / ``rotary_dim`` / ``layout`` / ``direction`` /
    ``channels`` are the model's own code's where transformers knows it (:mod:`posembed.interop.rope.width`), and so
    are ``mrope``, the M-RoPE sections, arrangement and section order of its rotary embedding (``None``: not M-RoPE),
    and ``axial``, a vision tower's axes and their placement (``None``: not axial).
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
    direction: str = "forward"
    channels: str = "first"
    mrope: MRopeSections | None = None
    axial: AxialSettings | None = None
    forward_mscale: tuple[float, float, int] | None = None  # the model's forward's factors (width.RotaryWidth)

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


def rope_spelling(raw: dict) -> str:
    """Which spelling the config uses, in words."""
    if raw.get("rope_parameters"):
        return "rope_parameters (transformers 5.x)"
    return "rope_scaling + rope_theta (transformers 4.x)"


def ignored_parameters(raw: dict) -> tuple[str, ...]:
    """The keys of the stated RoPE parameters that transformers ignores: dicts under a key that is not
    one of the config's layer types, and flat fields beside parameters nested by layer type.

    >>> ignored_parameters({"model_type": "llama", "rope_parameters": {"full_attention": {"rope_theta": 1e6}}})
    ('full_attention',)
    """
    raw = model_part(raw)
    return read_parameters(raw, config_facts(raw))[1]


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
    return {layer: params for layer, (params, _) in read_parameters(raw, config_facts(raw))[0].items()}


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
        odd = int(head_dim * partial) == rotary_dim - 1  # an odd width: transformers rounds its frequencies up
        partial = partial if int(head_dim * partial) == rotary_dim or odd else rotary_dim / head_dim  # the model's own
    return RopeSettings(
        layer_type=layer, rope_type=params["rope_type"], theta=params["rope_theta"], theta_given=theta_given,
        head_dim=head_dim, head_dim_given=width.head_dim_given, hidden_size=width.hidden_size, num_heads=width.num_heads,
        rotary_dim=rotary_dim, partial_rotary_factor=partial, layout=width.layout,
        max_position_embeddings=max_pos, original_max_len=original,
        original_given=source in ("parameters", "top level") or (params.get(ORIGINAL) == original and states_rope(raw)),
        params=params, original_source=source, direction=width.direction, channels=width.channels,
        mrope=width.mrope if layer == ALL_LAYERS else None, axial=width.axial,
        forward_mscale=width.forward_mscale if layer == ALL_LAYERS else None,
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
            f"the config has no RoPE ({kind!s}): none of {', '.join(ROPE_FIELDS)} is set"
        )
    facts = config_facts(raw)
    layers = read_parameters(raw, facts)[0]
    width = rotary_width(raw, facts) if layers else None
    return [_settings(raw, facts, width, layer, params, given) for layer, (params, given) in layers.items()]


def layer_settings(config: Any, layer_type: str | None = None, part: str = "text") -> RopeSettings:
    """The :class:`RopeSettings` of one layer type of any accepted config (what the builder reads).

    Unlike :func:`read_rope_settings`, a config without RoPE gets the defaults (a bare rotary one its class's).
    ``layer_type`` picks one of nested parameters (see :func:`select_layer`).
    """
    raw = model_part(config_dict(config), part)
    facts = config_facts(raw)
    layers, ignored = read_parameters(raw, facts)
    _refuse_ignored_layers(raw, facts, layers, ignored)
    params, given = select_layer(layers, layer_type)
    return _settings(raw, facts, rotary_width(raw, facts), layer_type or ALL_LAYERS, params, given)


def _refuse_ignored_layers(raw: dict, facts: ClassFacts, layers: Mapping[str, Any], ignored: tuple[str, ...]) -> None:
    """Flat parameters beside dicts that transformers ignores: the builder refuses them rather than build the flat ones."""
    _, given = stated(raw)
    dicts = [key for key in ignored if isinstance(given.get(key), Mapping)]
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
