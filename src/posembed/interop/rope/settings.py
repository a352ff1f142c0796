"""Read the RoPE settings of a transformers config: the one reader, asking transformers where it can.

The scheme builder (:func:`~posembed.interop.rope.config.rotary_from_settings`, behind ``rotary_from_hf_config`` and
the zoo), ``rope check`` and the inspector read the :class:`RopeSettings` it returns and nothing else. The parameters
per layer type are transformers' config object's where its class builds the config, else the dict's as written
(:func:`~posembed.interop.rope.parameters.read_parameters`); the widths and layout are the model's own code's
(:func:`~posembed.interop.rope.width.rotary_width`).

Example:
    >>> s = layer_settings({"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096,
    ...                     "rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 4.0}})
    >>> s.rope_type, s.theta, s.head_dim, s.factor, s.original_max_len
    ('linear', 500000.0, 16, 4.0, 4096)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from posembed.interop.hf.config import config_dict, load_config_dict
from posembed.interop.rope.axial import AxialSettings
from posembed.interop.rope.model import config_value, model_part, transformers_config
from posembed.interop.rope.parameters import (
    ALL_LAYERS,
    DEFAULT_THETA,
    ORIGINAL,
    ROPE_FIELDS,
    layer_parameters,
    read_parameters,
    stated,
    stated_layer,
    states_rope,
    why_ignored,
)  # fmt: skip
from posembed.interop.rope.sections import MRopeSections
from posembed.interop.rope.width import RotaryWidth, rotary_width

__all__ = [
    "RopeSettings", "config_dict", "load_config_dict", "has_rope", "states_rope", "layer_parameters", "select_layer",
    "layer_settings", "read_rope_settings", "layer_pattern", "DEFAULT_THETA", "ALL_LAYERS", "ORIGINAL_USERS",
]  # fmt: skip

#: model types that use RoPE although their configs state no RoPE field (GPT-J, CodeGen)
_ROTARY_WITHOUT_FIELDS = frozenset({"gptj", "codegen"})
#: types whose frequencies depend on the pre-training length
ORIGINAL_USERS = frozenset({"yarn", "longrope", "llama3"})
_T = TypeVar("_T")


@dataclass(frozen=True)
class RopeSettings:
    """The RoPE settings of one layer type.

    ``params``: the flat 5.x dict (``rope_type``, ``rope_theta``, the type's fields); ``original_max_len``: the
    pre-training length transformers builds with (a type that reads none: the config's, else
    ``max_position_embeddings``). The widths, ``layout``, ``direction``, ``channels``, ``mrope`` (M-RoPE sections),
    ``axial`` (a vision tower's axes) and ``forward_mscale`` are the model's own code's where transformers knows it
    (:mod:`posembed.interop.rope.width`). ``known``: read through transformers' config object; ``latent``: the field
    a latent attention class sets ``head_dim`` from (``"qk_rope_head_dim"``, or ``"qk_head_dim"``: nope + rope).
    """

    layer_type: str
    rope_type: str
    theta: float
    head_dim: int
    hidden_size: int | None
    num_heads: int | None
    rotary_dim: int
    partial_rotary_factor: float
    layout: str
    max_position_embeddings: int | None
    original_max_len: int | None
    params: dict = field(default_factory=dict)
    direction: str = "forward"
    channels: str = "first"
    mrope: MRopeSections | None = None
    axial: AxialSettings | None = None
    known: bool = False
    latent: str | None = None
    forward_mscale: tuple[float, float, int] | None = None

    @property
    def factor(self) -> float:
        value = self.params.get("factor")
        return 1.0 if value is None else float(value)


def has_rope(raw: dict) -> bool:
    """Whether the config's language model uses RoPE: it states a RoPE field, its model type is rotary without one
    (GPT-J), or transformers' config object of it holds RoPE parameters (a bare Llama config)."""
    raw = model_part(raw)
    if states_rope(raw) or raw.get("model_type") in _ROTARY_WITHOUT_FIELDS:
        return True
    params = getattr(transformers_config(raw), "rope_parameters", None)
    return isinstance(params, dict) and bool(params)


def select_layer(layers: Mapping[str, _T], layer_type: str | None) -> _T:
    """The entry of ``layer_type`` in a per-layer-type mapping (:data:`ALL_LAYERS` alone: flat); ``ValueError`` for
    nested parameters without ``layer_type`` (naming the layer types), an unknown one, or one for flat parameters."""
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


def _original(raw: dict, hf: Any, layer: str, params: dict, max_pos: int | None) -> int | None:
    """The pre-training length: the standardized parameters' (transformers'), else, reading the dict, the top-level
    one on flat parameters, the parameters' one; a rope type that reads none: the one the config writes."""
    mine, top = stated_layer(raw, layer).get(ORIGINAL), raw.get(ORIGINAL)
    if params["rope_type"] not in ORIGINAL_USERS:
        value = mine if mine is not None else top
    else:
        value = params.get(ORIGINAL) if hf is not None else top if layer == ALL_LAYERS and top is not None else mine
    return max_pos if value is None else int(value)


def _partial(raw: dict, hf: Any, width: RotaryWidth, params: dict) -> float:
    """The rotary share of the head: the parameters' (the object's hold the class's own), else the dict's."""
    if params.get("partial_rotary_factor") is not None or hf is not None:
        return float(params.get("partial_rotary_factor", 1.0))
    for value in (raw.get("partial_rotary_factor"), raw.get("rotary_pct")):
        if value is not None:
            return float(value)
    return int(raw["rotary_dim"]) / width.head_dim if raw.get("rotary_dim") else 1.0


def _latent(hf: Any) -> str | None:
    """The field a latent attention class sets ``head_dim`` from, read from what its object holds."""
    rope, nope, head = (config_value(hf, name) for name in ("qk_rope_head_dim", "qk_nope_head_dim", "head_dim"))
    if not isinstance(rope, int) or not isinstance(head, int):
        return None
    return "qk_rope_head_dim" if head == rope else "qk_head_dim" if head == rope + (nope or 0) else None


def _settings(raw: dict, hf: Any, width: RotaryWidth, layer: str, params: dict) -> RopeSettings:
    partial = _partial(raw, hf, width, params)
    head_dim, rotary_dim = width.head_dim, int(width.head_dim * partial)
    model = width.of(layer)  # the widths the model's own rotary embedding builds
    if model is not None:  # proportional RoPE spreads its frequencies over the head: its rotary share is the factor's
        head_dim, rotary_dim = (
            model[0],
            (model[1] if params["rope_type"] != "proportional" else int(model[0] * partial)),
        )
        odd = int(head_dim * partial) == rotary_dim - 1  # an odd width: transformers rounds its frequencies up
        partial = partial if int(head_dim * partial) == rotary_dim or odd else rotary_dim / head_dim  # the model's own
    return RopeSettings(
        layer_type=layer, rope_type="axial" if width.axial is not None else params["rope_type"],
        theta=params["rope_theta"], head_dim=head_dim, hidden_size=width.hidden_size, num_heads=width.num_heads,
        rotary_dim=rotary_dim, partial_rotary_factor=partial, layout=width.layout,
        max_position_embeddings=width.max_position_embeddings,
        original_max_len=_original(raw, hf, layer, params, width.max_position_embeddings), params=params,
        direction=width.direction, channels=width.channels, mrope=width.mrope if layer == ALL_LAYERS else None,
        axial=width.axial, known=hf is not None, latent=None if hf is None else _latent(hf),
        forward_mscale=width.forward_mscale if layer == ALL_LAYERS else None,
    )  # fmt: skip


def read_rope_settings(raw: dict, part: str = "text") -> list[RopeSettings]:
    """One :class:`RopeSettings` per layer type of a config dict's ``part``
    (:func:`~posembed.interop.rope.model.model_part`).

    Raises ``ValueError`` when the config has no RoPE (naming the fields looked for), is malformed (see
    :func:`layer_parameters`) or has no head size.
    """
    raw = model_part(raw, part)
    if not has_rope(raw):
        kind = raw.get("position_embedding_type") or raw.get("model_type") or "this model"
        raise ValueError(f"the config has no RoPE ({kind!s}): none of {', '.join(ROPE_FIELDS)} is set")
    layers, hf = read_parameters(raw)
    if not layers:
        return []
    width = rotary_width(raw)
    return [_settings(raw, hf, width, layer, params) for layer, params in layers.items()]


def _remote_code_type(raw: Mapping) -> bool:
    """Whether the config's ``model_type`` is a name transformers does not know (a checkpoint's remote code);
    ``False`` without transformers or without a ``model_type`` (a sub-config's empty one: ESMFold2's atom encoder)."""
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return False
    model_type = raw.get("model_type")
    return isinstance(model_type, str) and bool(model_type) and model_type not in CONFIG_MAPPING


def layer_settings(config: Any, layer_type: str | None = None, part: str = "text") -> RopeSettings:
    """The :class:`RopeSettings` of one layer type (:func:`select_layer`) of any accepted config (what the builder
    reads); unlike :func:`read_rope_settings`, a config without RoPE gets the defaults (a bare one its class's)."""
    raw = model_part(config_dict(config), part)
    if not has_rope(raw) and _remote_code_type(raw):  # no class default to fill in: only its own code rotates
        raise ValueError(
            f"the config has no RoPE field and transformers does not know model_type "
            f"{raw['model_type']!r}: only the checkpoint's own remote code decides its rotation (ChatGLM's "
            "is in its modeling code), so posembed builds none rather than guess one"
        )
    layers, hf = read_parameters(raw)
    dicts = [key for key, value in stated(raw)[1].items() if isinstance(value, Mapping)]
    if list(layers) == [ALL_LAYERS] and dicts:  # the builder refuses rather than build the flat parameters alone
        raise ValueError(
            f"config.rope_parameters is nested by layer type ({', '.join(dicts)}), but {why_ignored(raw)}: "
            "transformers reads the parameters as flat and ignores those dicts; give flat parameters, or layer_types "
            "naming them"
        )
    return _settings(raw, hf, rotary_width(raw), layer_type or ALL_LAYERS, select_layer(layers, layer_type))


def layer_pattern(raw: dict, layers: int) -> list[str | None]:
    """Each of ``layers`` layers' type: transformers' config object's ``layer_types``, else Gemma 3's / ModernBERT's
    4.x pattern fields, else :data:`ALL_LAYERS`; ``None`` for a layer without RoPE (Llama 4's ``no_rope_layers``).

    >>> layer_pattern({"model_type": "gemma3_text", "sliding_window_pattern": 3}, 4)[:3]
    ['sliding_attention', 'sliding_attention', 'full_attention']
    >>> layer_pattern({"model_type": "llama4_text", "no_rope_layers": [1, 0]}, 2)
    ['chunked_attention', None]
    """
    raw = model_part(raw)
    hf = transformers_config({**raw, "num_hidden_layers": layers})
    found = config_value(hf, "layer_types") if hf is not None else raw.get("layer_types")
    if isinstance(found, (list, tuple)) and len(found) == layers:
        found = list(found)
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
