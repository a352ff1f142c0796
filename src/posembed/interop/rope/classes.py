"""What transformers' config classes do to a config's RoPE fields: the class knowledge of the one reader.

:mod:`posembed.interop.rope.settings` reads a config's RoPE fields as written; a transformers 5.23 config
class then fills in, renames or nests some of them before the model is built. This module says which
and how, per model type:

- (the width and layout of a class's rotary channels, ``head_dim`` defaults and multi-head latent attention,
  are :mod:`posembed.interop.rope.latent`, built on this module's lookups);
- the ``rope_theta`` a class fills in when the config names none (:func:`class_theta`: its ``default_theta``,
  ``RotaryEmbeddingConfigMixin``'s :data:`DEFAULT_THETA` unless the class overrides it), and the whole RoPE
  parameters it holds for a config that states no RoPE field at all (:func:`class_parameters`); likewise the
  ``partial_rotary_factor`` it fills in (:func:`class_partial`);
- which keys of nested parameters are layer types (:func:`class_labels`, :func:`default_layer_types`), and
  the classes that always nest them by layer type (:data:`PER_LAYER_CLASSES`, :func:`per_layer_parameters`);
- the classes that declare ``original_max_position_embeddings`` (:func:`declared_original`), copy it from the
  parameters (:data:`ORIGINAL_FROM_PARAMETERS`) or rename old rope types to longrope (:data:`RENAMED_TO_LONGROPE`).

transformers is asked lazily (its ``CONFIG_MAPPING``, imported on first need); without it the tables
stand in (:data:`CLASS_THETA`, :data:`CLASS_HEAD_DIM`, :data:`DECLARED_ORIGINAL`, :data:`ROPE_TYPE_LABELS`).
"""

from __future__ import annotations

import copy
import functools
import inspect
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "DEFAULT_THETA", "CLASS_THETA", "CLASS_HEAD_DIM", "FULL", "SLIDING", "ORIGINAL", "DECLARED_ORIGINAL", "ORIGINAL_FROM_PARAMETERS",
    "RENAMED_TO_LONGROPE", "OLD_LONGROPE", "ROPE_TYPE_LABELS", "PerLayerClass", "PER_LAYER_CLASSES",
    "model_type_of", "class_theta", "class_partial", "rotary_class", "class_parameters", "class_labels", "default_layer_types",
    "per_layer_parameters", "why_ignored", "declared_original", "clear_caches", "CACHES",
]  # fmt: skip

#: lru caches of modules built on this one (:mod:`posembed.interop.rope.latent`), cleared by :func:`clear_caches`
CACHES: list = []

#: the theta of ``RotaryEmbeddingConfigMixin`` (transformers 5.23): what a config class fills in when neither the
#: config nor the class names another, and what posembed takes for a model type it cannot ask about
DEFAULT_THETA = 10000.0
#: the ``default_theta`` of common decoder classes that override it (transformers 5.23), read when transformers is
#: absent; a class missing here then takes :data:`DEFAULT_THETA`. Per layer type: :data:`PER_LAYER_CLASSES`
CLASS_THETA: dict[str, float] = {
    "cohere": 5e5, "ernie4_5": 5e5, "ernie4_5_moe": 5e5, "gpt_oss": 1.5e5, "helium": 1e5, "lfm2": 1e6,
    "llama4_text": 5e5, "minimax": 1e6, "mixtral": 1e6, "phimoe": 1e6, "smollm3": 2e6,
}  # fmt: skip
#: the ``head_dim`` common classes fill in when the config has none (transformers 5.23: the field's default), read
#: when transformers is absent; a class missing here derives it (``hidden_size // num_attention_heads``)
CLASS_HEAD_DIM: dict[str, int] = {
    "gemma": 256, "gemma2": 256, "gemma3_text": 256, "gemma3n_text": 256, "glm": 128, "glm4": 128, "gpt_oss": 64,
    "helium": 128, "llama4_text": 128, "ministral3": 128, "neomme": 64, "qwen3": 128, "qwen3_next": 256,
    "t5gemma2_decoder": 256, "t5gemma2_text": 256,
}  # fmt: skip
#: the layer types of transformers' per-layer-type configs
FULL, SLIDING = "full_attention", "sliding_attention"
#: transformers' name of the pre-training length
ORIGINAL = "original_max_position_embeddings"
#: model types whose config class declares original_max_position_embeddings as an argument, with its default
#: (transformers 5.23: Phi3Config, Phi4MultimodalConfig); read when transformers is absent
DECLARED_ORIGINAL: dict[str, int] = {"phi3": 4096, "phi4_multimodal": 4096}
#: model types whose config class copies the parameters' original_max_position_embeddings onto the attribute after
#: standardising (PhiMoE's ``validate_rope``), so that a top-level one never wins
ORIGINAL_FROM_PARAMETERS = frozenset({"phimoe"})
#: model types whose config class renames the old rope types "su" and "yarn" to longrope, after standardising
#: (transformers 5.23: Phi3Config, Phi4MultimodalConfig)
RENAMED_TO_LONGROPE = frozenset({"phi3", "phi4_multimodal"})
#: the rope types those classes rename
OLD_LONGROPE = ("su", "yarn")
#: model types whose config class labels its RoPE parameters otherwise than by its layer_types (the class attribute
#: ``_rope_type_labels``, transformers 5.23); read when transformers is absent
ROPE_TYPE_LABELS: dict[str, tuple[str, ...]] = {
    "deepseek_v4": ("main", "compress"), "lfm3": (FULL, SLIDING),
}  # fmt: skip



@dataclass(frozen=True)
class PerLayerClass:
    """A config class that always nests its RoPE parameters by layer type (its ``convert_rope_params_to_dict``).

    ``scaled``: the layer types a 4.x ``rope_scaling`` is merged into (over ``rope_type: "default"``, so
    that its old ``type`` key never counts); ``thetas``: ``(layer type, top-level field, class default)``
    of each layer type that states no ``rope_theta`` (field ``None``: the class never reads one for it, as
    Olmo3's sliding layers, whose ``rope_theta`` the full layers took first); ``partials``: the
    ``partial_rotary_factor`` per layer type the class fills in (NeoMME). The default ``layer_types`` (when
    the config gives none) make layer ``i`` of ``layers`` full attention when ``(i + offset) % every == 0``
    (``every`` read from ``pattern_field`` when the class has one), and the last one too when ``last_full``.
    """

    scaled: tuple[str, ...]
    thetas: tuple[tuple[str, str | None, float], ...]
    pattern_field: str | None
    every: int
    offset: int
    layers: int
    partials: tuple[tuple[str, float], ...] = ()
    last_full: bool = False


_MODERNBERT = PerLayerClass((FULL, SLIDING), ((FULL, "global_rope_theta", 160000.0), (SLIDING, "local_rope_theta", 10000.0)),
                            "global_attn_every_n_layers", 3, 0, 22)  # fmt: skip
#: Gemma 3's: scaling on full attention, the local theta under its own name (T5Gemma 2 too; Gemma 3n every 5th full)
_GEMMA3_THETAS = ((FULL, "rope_theta", 1e6), (SLIDING, "rope_local_base_freq", 10000.0))
#: the config classes of transformers 5.23 posembed reads as they fill in their nested parameters
PER_LAYER_CLASSES: dict[str, PerLayerClass] = {
    "gemma3_text": PerLayerClass((FULL,), _GEMMA3_THETAS, "sliding_window_pattern", 6, 1, 26),
    "gemma3n_text": PerLayerClass((FULL,), _GEMMA3_THETAS, None, 5, 1, 35),
    "t5gemma2_text": PerLayerClass((FULL,), _GEMMA3_THETAS, "sliding_window_pattern", 6, 1, 26),
    "t5gemma2_decoder": PerLayerClass((FULL,), _GEMMA3_THETAS, "sliding_window_pattern", 6, 1, 26),
    "olmo3": PerLayerClass((FULL,), ((FULL, "rope_theta", 5e5), (SLIDING, None, 5e5)), None, 4, 1, 32),
    "neomme": PerLayerClass((), ((FULL, "rope_theta", 1e6), (SLIDING, "rope_theta", 10000.0)), None, 6, 1, 17,
                            partials=((FULL, 0.25), (SLIDING, 1.0)), last_full=True),
    "modernbert": _MODERNBERT,
    "modernbert-decoder": _MODERNBERT,
}  # fmt: skip


def model_type_of(raw: Mapping) -> str | None:
    """The config's ``model_type`` when it is a string, else ``None``."""
    return raw.get("model_type") if isinstance(raw.get("model_type"), str) else None


def _config_class(model_type: Any) -> tuple[bool, Any]:
    """``(transformers installed, its config class of model_type or None)``; transformers is imported on first need."""
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return False, None
    known = isinstance(model_type, str) and model_type in CONFIG_MAPPING
    return True, CONFIG_MAPPING[model_type] if known else None


@functools.lru_cache(maxsize=None)
def _declares(config_class: type, name: str) -> bool:
    """Whether the config class takes ``name`` as an ``__init__`` argument (a field of its dataclass)."""
    return name in inspect.signature(config_class.__init__).parameters


def class_theta(model_type: Any) -> float | None:
    """The ``rope_theta`` transformers' config class of ``model_type`` fills into RoPE parameters that name none.

    ``convert_rope_params_to_dict`` takes the class's ``rope_theta`` field where it declares one, else its
    ``default_theta``: :data:`DEFAULT_THETA` unless the class overrides it (Cohere 5e5, GPT-OSS 1.5e5,
    PhiMoE 1e6, ...). ``None`` for a model type transformers does not know and for a class whose default is
    per layer type (:data:`PER_LAYER_CLASSES`); without transformers, :data:`CLASS_THETA`.

    >>> class_theta("cohere"), class_theta("phimoe"), class_theta(None)
    (500000.0, 1000000.0, None)
    """
    installed, config_class = _config_class(model_type)
    if not installed:
        return CLASS_THETA.get(model_type) if isinstance(model_type, str) else None
    value = getattr(config_class, "rope_theta", getattr(config_class, "default_theta", None))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rotary_class(model_type: Any) -> bool:
    """Whether transformers' config class of ``model_type`` always holds RoPE parameters (it declares
    ``rope_parameters``), so that a config stating no RoPE field still builds a rotary model; ``False``
    without transformers."""
    _, config_class = _config_class(model_type)
    return config_class is not None and _declares(config_class, "rope_parameters")


def class_partial(model_type: Any) -> float | None:
    """The ``partial_rotary_factor`` transformers' config class of ``model_type`` fills into flat RoPE parameters
    that name none (GLM and Phi 0.5, GPT-NeoX and StableLM 0.25): read from the class built with
    ``rope_parameters={"rope_type": "default"}``. ``None`` when it fills in none, without transformers, and for a
    class that cannot be built so or nests its parameters.
    """
    if not rotary_class(model_type):
        return None
    value = (_flat_parameters(_config_class(model_type)[1]) or {}).get("partial_rotary_factor")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def class_parameters(model_type: Any, partial_rotary_factor: float | None = None) -> dict | None:
    """The RoPE parameters transformers' config class of ``model_type`` holds for a config that states no RoPE
    field: the class built without arguments (Llama: the default type at 10000; GPT-OSS: yarn at 1.5e5;
    Laguna: nested by layer type), a ``partial_rotary_factor`` the config gives at the top level replacing
    the class's flat one. A fresh copy; ``None`` without transformers, for a class that is not a
    :func:`rotary_class` and for one that cannot be built without arguments.
    """
    if not rotary_class(model_type):
        return None
    made = copy.deepcopy(_bare_parameters(_config_class(model_type)[1]))
    if made and partial_rotary_factor is not None:
        made.pop("partial_rotary_factor", None)  # the config's own, read beside the parameters
    return made or None


@functools.lru_cache(maxsize=None)
def _bare_parameters(config_class: type) -> dict | None:
    return _built_parameters(config_class)


@functools.lru_cache(maxsize=None)
def _flat_parameters(config_class: type) -> dict | None:
    return _built_parameters(config_class, rope_parameters={"rope_type": "default"})


def _built_parameters(config_class: type, **kwargs: Any) -> dict | None:
    """The ``rope_parameters`` of the class built with ``kwargs``; ``None`` when it cannot be built so."""
    try:
        made = getattr(config_class(**kwargs), "rope_parameters", None)
    except Exception:  # noqa: BLE001 - a class that needs arguments, or fails its own validation, has no such default
        return None
    return made if isinstance(made, dict) else None


@functools.lru_cache(maxsize=None)
def class_labels(model_type: Any) -> tuple[bool, tuple[str, ...] | None]:
    """``(known, labels)``: the class's ``_rope_type_labels``, ``()`` for a class that reads ``layer_types`` and
    ``None`` for one without that field (its parameters are flat), as transformers 5.23 declares them."""
    if model_type in PER_LAYER_CLASSES:
        return True, ()
    _, config_class = _config_class(model_type)
    if config_class is None:  # no transformers, or a model type it does not know (remote code)
        return model_type in ROPE_TYPE_LABELS, ROPE_TYPE_LABELS.get(model_type)
    labels = getattr(config_class, "_rope_type_labels", None)
    if labels:
        return True, tuple(labels)
    return True, () if _declares(config_class, "layer_types") else None


def default_layer_types(raw: dict) -> list[str] | None:
    """Each layer's type as the config gives it (``layer_types``), else as its :data:`PER_LAYER_CLASSES` class
    fills it in; ``None`` for other configs without ``layer_types``.

    >>> default_layer_types({"model_type": "modernbert", "num_hidden_layers": 4})
    ['full_attention', 'sliding_attention', 'sliding_attention', 'full_attention']
    """
    if isinstance(raw.get("layer_types"), (list, tuple)):
        return list(raw["layer_types"])
    spec = PER_LAYER_CLASSES.get(model_type_of(raw))
    if spec is None:
        return None
    every = int((raw.get(spec.pattern_field) if spec.pattern_field else None) or spec.every)
    layers = int(raw.get("num_hidden_layers") or spec.layers)
    last = layers - 1 if spec.last_full else None
    return [FULL if (i + spec.offset) % every == 0 or i == last else SLIDING for i in range(layers)]


def per_layer_parameters(raw: dict, spec: PerLayerClass, stated: Mapping, scaling: Mapping | None) -> tuple[dict[str, dict], dict[str, bool], tuple[str, ...]]:
    """``(parameters per layer type, theta given per layer type, stated keys ignored)`` as a :class:`PerLayerClass`
    builds them from the config's ``rope_parameters`` (``stated``, ``{}`` for none) and 4.x ``rope_scaling``;
    only the config's layer types (:func:`default_layer_types`) are kept."""
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
    names = set(default_layer_types(raw) or ())
    keys = [key for key, value in nested.items() if key in names and isinstance(value, Mapping)]
    own = {layer for layer, _, _ in spec.thetas}  # the class fills these in itself, whether its layers use them or not
    ignored = tuple(key for key in stated if key not in keys and key not in own)
    return {key: nested[key] for key in keys}, {key: given.get(key, True) for key in keys}, ignored


def why_ignored(raw: dict) -> str:
    """Why transformers does not take the config's other keys as layer types, in words."""
    known, labels = class_labels(model_type_of(raw))
    if known and labels is None:
        return f"transformers' {raw.get('model_type')} config class has no layer_types"
    if labels:
        return f"transformers' {raw.get('model_type')} config class labels its layer types {', '.join(labels)}"
    return "the config's layer_types does not name them"


def declared_original(model_type: Any) -> tuple[bool, int | None]:
    """``(declared, class default)``: whether transformers' config class of ``model_type`` takes
    ``original_max_position_embeddings`` as an ``__init__`` argument, and its default there.

    Such a class holds the attribute even when the config has no top-level value, so for yarn,
    llama3 and longrope that default overwrites the parameters' one. Asked of transformers'
    ``CONFIG_MAPPING`` when it is installed (imported here, on first need), else :data:`DECLARED_ORIGINAL`.

    >>> declared_original("phi3"), declared_original("llama"), declared_original(None)
    ((True, 4096), (False, None), (False, None))
    """
    return _declared_original(model_type) if isinstance(model_type, str) and model_type else (False, None)


@functools.lru_cache(maxsize=None)
def _declared_original(model_type: str) -> tuple[bool, int | None]:
    installed, config_class = _config_class(model_type)
    if not installed:
        return model_type in DECLARED_ORIGINAL, DECLARED_ORIGINAL.get(model_type)
    found = inspect.signature(config_class.__init__).parameters.get(ORIGINAL) if config_class else None
    default = getattr(found, "default", None)
    return found is not None, default if isinstance(default, int) else None


def clear_caches() -> None:
    """Forget what was asked of transformers (for tests that hide it), here and in the modules that
    registered their caches (:data:`CACHES`)."""
    for cached in (class_labels, _declared_original, _declares, _bare_parameters, _flat_parameters, *CACHES):
        cached.cache_clear()
