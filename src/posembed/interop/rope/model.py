"""What a model's own transformers code decides about its RoPE (its config object, its ``*RotaryEmbedding``), asked
instead of re-deriving its rules; its attention's rotation as the shipped table declares it
(:mod:`posembed.interop.rope.table`: nothing here reads transformers' source).

Example:
    >>> config = transformers_config({"model_type": "cohere", "hidden_size": 64, "num_attention_heads": 4})
    >>> model_rotation(config), model_widths(config)
    (('interleaved', 'forward', 'first'), {'all': (16, 16)})
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar, cast

import torch

from posembed.interop.rope.table import class_rotation

__all__ = [
    "ALL_LAYERS", "build_config", "transformers_config", "rotary_class", "rotary_classes", "model_widths",
    "model_rotation", "per_layer", "model_part", "config_value", "model_forward_mscale", "model_own_positions",
    "own_position_class", "REFUSED", "modeling_module", "tower_of", "model_rotary_class",
]  # fmt: skip

logger = logging.getLogger(__name__)

#: layer-type name of a config with one set of RoPE parameters for every layer; transformers' pre-training length
ALL_LAYERS, ORIGINAL = "all", "original_max_position_embeddings"
try:  # transformers' config classes validate their fields as huggingface_hub's strict dataclasses
    from huggingface_hub.errors import StrictDataclassError
except ImportError:  # no huggingface_hub (then no transformers), or one before strict dataclasses
    StrictDataclassError = ValueError  # type: ignore[misc,assignment]

#: what transformers' config classes and rotary modules raise on a config or input they refuse (a field of the wrong
#: type: StrictDataclassError; a heterogeneous config's AmbiguousGlobalPerLayerAttributeError: a RuntimeError)
REFUSED = (ValueError, TypeError, KeyError, AttributeError, IndexError, RuntimeError, ArithmeticError, AssertionError,
           StrictDataclassError)  # fmt: skip
#: words that name a tower other than the language model in a class name
_TOWERS = ("Vision", "Visual", "Audio", "Talker", "Code2Wav", "DiT", "Patch", "Image", "Video", "Speech")

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _class_cache(maxsize: int | None = None) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """:func:`functools.lru_cache` (unbounded by default, as :func:`functools.cache`) that keeps the function's
    signature: its callers pass classes (``type(config)``), hashable at run time, which mypy does not read as
    ``Hashable`` when they are ``type[Any]``."""

    def decorate(function: Callable[_P, _R]) -> Callable[_P, _R]:
        return cast("Callable[_P, _R]", functools.lru_cache(maxsize=maxsize)(function))

    return decorate


def build_config(raw: Mapping) -> Any | None:
    """A copy of the config object transformers' class of the model type builds from ``raw`` (``from_dict``, once
    per JSON dict); ``None``: no transformers, or a model type it does not know. Raises what the class raises."""
    config_class = _config_class(raw.get("model_type"))
    if config_class is None:
        return None
    try:
        key = json.dumps(raw)  # in the dict's order, which transformers keeps (the layer types)
    except (TypeError, ValueError):
        key = None
    if key is None or json.loads(key) != raw:  # not JSON, or JSON would change it (tuples): built uncached
        return config_class.from_dict(copy.deepcopy(dict(raw)))
    return copy.deepcopy(_built(config_class, key))


@_class_cache(maxsize=256)
def _built(config_class: type[Any], key: str) -> Any:
    return config_class.from_dict(json.loads(key))


def transformers_config(raw: Mapping) -> Any | None:
    """:func:`build_config`, or ``None`` for a config its class refuses (the reader then reads the dict as written)."""
    try:
        return build_config(raw)
    except REFUSED as error:  # whatever the class refuses, the dict is read as written
        logger.debug("transformers' %s config class refuses this config: %s", raw.get("model_type"), error)
        return None


def _sub_class(config_class: Any, key: str) -> Any | None:
    return (getattr(config_class, "sub_configs", None) or {}).get(key)


def model_part(raw: Mapping, part: str = "text") -> dict:
    """The dict of a multimodal config's ``text_config`` or ``vision_config`` (``part``), in it or a sub-config
    (Qwen3-Omni's ``thinker_config``), with the ``model_type`` its class gives that part; a config without parts is
    its own text part (``ValueError`` for another).

    >>> model_part({"model_type": "qwen2_vl", "text_config": {"hidden_size": 64}})["model_type"]
    'qwen2_vl_text'
    """
    key = f"{part}_config"
    config_class = _config_class(raw.get("model_type"))
    found, owner = raw.get(key), config_class
    for name, value in () if isinstance(found, Mapping) else raw.items():
        if isinstance(value, Mapping) and isinstance(value.get(key), Mapping):
            found, owner = value[key], _sub_class(config_class, name)
            break
    if not isinstance(found, Mapping):
        if part == "text":
            return _flat_text_part(raw, config_class)
        raise ValueError(f"the config has no {key} (model_type {raw.get('model_type')!r})")
    written, own = found.get("model_type"), getattr(_sub_class(owner, key), "model_type", None)
    if written and _config_class(written) is None and owner is config_class:  # a type transformers does not know:
        own = _built_part_type(raw, key) or own  # the one the whole's class builds the part with (Kimi K2.5's kimi_k2)
    model_type = written if written and (own is None or _config_class(written) is not None) else own or written
    return {**found, "model_type": model_type} if model_type else dict(found)


def _built_part_type(raw: Mapping, key: str) -> str | None:
    """The ``model_type`` of the class transformers builds ``raw``'s ``key`` sub-config with (``None``: it cannot)."""
    try:
        part = getattr(build_config(raw), key, None)
    except REFUSED as error:  # a config the class refuses: the part is read as written
        logger.debug("transformers' %s config class refuses this config: %s", raw.get("model_type"), error)
        return None
    return getattr(type(part), "model_type", None) or getattr(part, "model_type", None)


def _flat_text_part(raw: Mapping, config_class: Any) -> dict:
    """A multimodal config written flat, its language model's fields at the top (Qwen2-VL's and Qwen2.5-VL's
    published files): the dict with the ``model_type`` of its text sub-config where transformers' class itself moves
    those fields into its ``text_config`` (its object's text config holds the top-level values); else the dict."""
    text_class = _sub_class(config_class, "text_config")
    text_type = getattr(text_class, "model_type", None)
    if not text_type or text_type == raw.get("model_type") or not _writes_rope(raw):
        return dict(raw)
    try:
        text = getattr(build_config(raw), "text_config", None)
    except REFUSED as error:  # a config the class refuses is read as written
        logger.debug("transformers' %s config class refuses this config: %s", raw.get("model_type"), error)
        return dict(raw)
    shared = [name for name in ("hidden_size", "num_attention_heads", "max_position_embeddings") if name in raw]
    if text is None or not shared or any(getattr(text, name, None) != raw[name] for name in shared):
        return dict(raw)
    return {key: value for key, value in raw.items() if not key.endswith("_config")} | {"model_type": text_type}


def _writes_rope(raw: Mapping) -> bool:
    """Whether the dict writes a RoPE field of its own (``rope_scaling``, ``rope_parameters``, ``rope_theta``)."""
    return any(raw.get(name) not in (None, {}) for name in ("rope_parameters", "rope_scaling", "rope_theta"))


def _config_class(model_type: Any) -> Any | None:
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return None
    return CONFIG_MAPPING[model_type] if isinstance(model_type, str) and model_type in CONFIG_MAPPING else None


def modeling_module(config_type: type[Any]):
    """The ``modeling_*`` module beside a config class's ``configuration_*`` module (``ImportError``: none)."""
    return importlib.import_module(config_type.__module__.replace(".configuration_", ".modeling_"))


def tower_of(name: str) -> str:
    """The tower a class name belongs to (``"Vision"``, ``"Audio"``, ...; ``""``: the language model)."""
    return next((tower for tower in _TOWERS if tower in name), "")


def _takes(cls: type[Any], config_type: type[Any]) -> bool:
    """Whether ``cls.__init__`` annotates its ``config`` as ``config_type`` (or one of its bases)."""
    try:
        annotation = inspect.signature(cls.__init__).parameters["config"].annotation
    except (KeyError, TypeError, ValueError):
        return False
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return name in {base.__name__ for base in config_type.__mro__}


def _rotaries(config_type: type[Any]) -> list[type[Any]]:
    module = modeling_module(config_type)
    return [
        cls
        for cls in (getattr(module, name) for name in dir(module) if name.endswith("RotaryEmbedding"))
        if isinstance(cls, type)
    ]


@_class_cache()
def rotary_classes(config_type: type[Any], builder: str = "compute_default_rope_parameters") -> tuple[type[Any], ...]:
    """The ``*RotaryEmbedding`` classes of a config class's modeling module that define ``builder``: those of its
    tower first (a ``...AudioConfig``: the audio ones), then those whose ``__init__`` takes the config class."""
    found = [cls for cls in _rotaries(config_type) if hasattr(cls, builder)]
    tower = tower_of(config_type.__name__)
    found.sort(
        key=lambda cls: (tower_of(cls.__name__) != tower, not _takes(cls, config_type))
    )  # the config's tower's first
    return tuple(found)


def model_rotary_class(config: Any) -> type[Any] | None:
    """The first of :func:`rotary_classes`; ``None``: the config class has no modeling module, or its module no
    ``*RotaryEmbedding`` with ``compute_default_rope_parameters`` (GPT-J's and CodeGen's sinusoid tables; vision
    towers whose rotary is only axial or computes its own grid: Pixtral, MLCD, the SAM 2 / SAM 3 towers)."""
    try:
        found = rotary_classes(type(config))
    except ImportError:  # a config class without a modeling module
        return None
    return found[0] if found else None


def rotary_class(config: Any) -> type[Any]:
    """The first of :func:`rotary_classes`; ``LookupError``: none (:func:`model_rotary_class` answers ``None``)."""
    found = model_rotary_class(config)
    if found is None:
        raise LookupError(
            f"{type(config).__module__.replace('.configuration_', '.modeling_')} has no RotaryEmbedding "
            f"with compute_default_rope_parameters"
        )
    return found


@_class_cache()
def own_position_class(config_type: type[Any]) -> type[Any] | None:
    """The ``*RotaryEmbedding`` class taking ``config_type``, where every such class computes its own positions
    (no ``position_ids``: Llama 4's vision tower, EfficientLoFTR, EoMT-DINOv3); ``None``: none does."""
    try:
        found = [cls for cls in _rotaries(config_type) if _takes(cls, config_type)]
    except ImportError:  # a config class without a modeling module
        return None
    if not found or any("position_ids" in inspect.signature(cls.forward).parameters for cls in found):
        return None
    return found[0]


def model_own_positions(config: Any) -> str | None:
    """``"Cls.forward(args)"`` of :func:`own_position_class`, or ``None``."""
    cls = own_position_class(type(config))
    return (
        None
        if cls is None
        else f"{cls.__name__}.forward({', '.join(list(inspect.signature(cls.forward).parameters)[1:])})"
    )


def per_layer(config: Any, layer_type: str) -> Any:
    """The config a layer type's rotary embedding reads: a heterogeneous config's ``per_layer_config`` entry."""
    try:
        return config.per_layer_config[layer_type] if layer_type != ALL_LAYERS else config
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return config


def config_value(config: Any, name: str, default: Any = None) -> Any:
    """``getattr(config, name, default)``, also where a heterogeneous config refuses it (Gemma 4's ``head_dim``)."""
    try:
        return getattr(config, name, default)
    except RuntimeError:  # AmbiguousGlobalPerLayerAttributeError
        return default


def _head_dim(config: Any) -> int:
    return int(config_value(config, "head_dim") or config.hidden_size // config.num_attention_heads)


def model_widths(config: Any) -> dict[str, tuple[int, int]] | None:
    """``{layer type: (head_dim, rotary_dim)}``: ``rotary_dim`` twice the ``inv_freq`` width of the model's own rotary
    embedding (Gemma 4's ``global_head_dim``, a class's own partial factor); ``None`` when it cannot be built."""
    cls = model_rotary_class(config)
    if cls is None:  # no rotary class to ask: the reader's widths
        return None
    try:
        embedding = cls(copy.deepcopy(config))
    except REFUSED as error:  # a rotary class that refuses the config leaves the widths to the reader
        logger.debug("the rotary embedding of %s cannot be built: %s", type(config).__name__, error)
        return None
    if isinstance(getattr(embedding, "inv_freq", None), torch.Tensor):
        return {ALL_LAYERS: (_head_dim(config), 2 * embedding.inv_freq.shape[-1])}
    widths = {}
    for name, buffer in embedding.named_buffers():
        layer = name.removesuffix("_inv_freq")
        if name.endswith("_inv_freq") and not name.endswith("original_inv_freq"):
            widths[layer] = (_head_dim(per_layer(config, layer)), 2 * buffer.shape[-1])
    return widths or None


def model_forward_mscale(config: Any) -> tuple[float, float, int] | None:
    """``(short, long, switch)``: the factor the model's rotary forward folds into cos / sin up to ``switch``
    positions (``original_max_position_embeddings``, else ``max_position_embeddings``) and past it, where that forward
    departs from its init: another factor than the init's, or (dynamic, longrope) the init's frequencies kept past
    the switch (PhiMoE); ``None``: neither, or not probed. The cos at position 0 is the factor itself."""
    cls = model_rotary_class(config)
    if cls is None:  # no rotary class: no forward to probe
        return None
    try:
        embedding = cls(copy.deepcopy(config))
        params, first = config.rope_parameters, embedding.inv_freq.clone()
        switch = int(params.get(ORIGINAL) or config.max_position_embeddings)
        far = max(switch, int(config.max_position_embeddings)) + 1  # past the switch of longrope and dynamic NTK
        factor, x = float(embedding.attention_scaling), torch.zeros(1, 1, 8)
        with torch.no_grad():
            short, (cos, sin) = embedding(x, torch.tensor([[0]]))[0], embedding(x, torch.tensor([[0, 1, far]]))
        angles = torch.atan2(sin.flatten(0, -2)[1].double(), cos.flatten(0, -2)[1].double())[: first.numel()]
    except REFUSED as error:  # per-layer, axial or complex modules: the attention factor
        logger.debug("the forward of %s's rotary embedding cannot be probed: %s", type(config).__name__, error)
        return None
    named = [
        float(v) for v in (params.get("short_mscale"), params.get("long_mscale"), factor) if isinstance(v, (int, float))
    ]
    short_scale, long_scale = (
        next((v for v in named if abs(v - probed) <= 1e-6 * abs(v)), probed)  # the config's, not its float32
        for probed in (float(short.flatten()[0]), float(cos.flatten(0, -2)[0, 0]))
    )
    kept = params.get("rope_type") in ("dynamic", "longrope") and torch.allclose(
        angles, first.double(), rtol=1e-6, atol=0
    )
    if all(abs(scale - factor) <= 1e-6 * factor for scale in (short_scale, long_scale)) and not kept:
        return None
    return short_scale, long_scale, switch


def model_rotation(config: Any) -> tuple[str, str, str] | None:
    """``(layout, direction, channels)`` the rotation function of the model's attention applies, as the shipped table
    declares it for the config's class (:mod:`posembed.interop.rope.table`; its ``rope_interleave`` where the
    attention switches on it): ``"interleaved"`` or ``"half"``, ``"forward"`` or ``"reversed"``, the ``"first"`` or
    ``"last"`` channels; ``None``: a class the table does not know."""
    interleave = config_value(config, "rope_interleave")
    return class_rotation(type(config).__name__, None if interleave is None else bool(interleave))
