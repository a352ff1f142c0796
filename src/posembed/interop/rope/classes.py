"""What transformers' config classes do to a config's RoPE fields: the class knowledge of the one reader.

:mod:`posembed.interop.rope.settings` reads a config's RoPE fields as written; a transformers 5.23 config
class then fills in, renames or nests some of them before the model is built. This module says which
and how, per model type, in one answer: :func:`class_facts` (a model type) or :func:`config_facts` (a config,
with its layer types) give one frozen :class:`ClassFacts`, which the reader asks for once:

- the ``rope_theta`` a class fills in when the config names none (its ``default_theta``,
  ``RotaryEmbeddingConfigMixin``'s :data:`DEFAULT_THETA` unless the class overrides it), the whole RoPE
  parameters it holds for a config that states no RoPE field at all, and the ``partial_rotary_factor`` it fills in;
- which keys of nested parameters are layer types (its labels, :func:`default_layer_types`), and the classes
  that always nest them by layer type (:data:`PER_LAYER_CLASSES`);
- the classes that declare ``original_max_position_embeddings`` (:func:`declared_original`), copy it from the
  parameters (:data:`ORIGINAL_FROM_PARAMETERS`) or rename old rope types to longrope (:data:`RENAMED_TO_LONGROPE`);
- whether it is multi-head latent attention (:class:`LatentClass`), for the traps; the widths and the layout
  themselves are the model's own code's (:mod:`posembed.interop.rope.model`).

transformers is asked lazily (its ``CONFIG_MAPPING``, imported on first need). Without it, or for a model type it
does not know, nothing is known of the class but how the per-layer classes nest their parameters
(:data:`PER_LAYER_CLASSES`): the config dict is read as written (:data:`DEFAULT_THETA` where it names no theta; no
latent class, class defaults or declared pre-training length).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "DEFAULT_THETA", "FULL", "SLIDING", "ORIGINAL", "ORIGINAL_FROM_PARAMETERS", "RENAMED_TO_LONGROPE", "OLD_LONGROPE",
    "PerLayerClass", "PER_LAYER_CLASSES", "LatentClass", "ClassFacts", "class_facts", "config_facts", "model_type_of",
    "class_theta", "class_partial", "rotary_class", "default_layer_types", "why_ignored", "declared_original", "latent_class",
    "clear_caches",
]  # fmt: skip

#: the theta of ``RotaryEmbeddingConfigMixin`` (transformers 5.23): what a config class fills in when neither the
#: config nor the class names another, and what posembed takes for a model type it cannot ask about
DEFAULT_THETA = 10000.0
#: the layer types of transformers' per-layer-type configs
FULL, SLIDING = "full_attention", "sliding_attention"
#: transformers' name of the pre-training length
ORIGINAL = "original_max_position_embeddings"
#: model types whose config class copies the parameters' original_max_position_embeddings onto the attribute after
#: standardising (PhiMoE's ``validate_rope``), so that a top-level one never wins
ORIGINAL_FROM_PARAMETERS = frozenset({"phimoe"})
#: model types whose config class renames the old rope types "su" and "yarn" to longrope, after standardising
#: (transformers 5.23: Phi3Config, Phi4MultimodalConfig)
RENAMED_TO_LONGROPE = frozenset({"phi3", "phi4_multimodal"})
#: the rope types those classes rename
OLD_LONGROPE = ("su", "yarn")
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


@dataclass(frozen=True)
class LatentClass:
    """A multi-head latent attention config class: its rotary embedding reads ``head_dim``, which the class sets
    from ``width`` (``"qk_rope_head_dim"``, or ``"qk_head_dim"``: ``qk_nope_head_dim + qk_rope_head_dim`` with the
    partial factor ``qk_rope_head_dim / head_dim``, Mistral 4), whatever head_dim the config states;
    ``rope`` / ``nope``: the class's defaults of ``qk_rope_head_dim`` / ``qk_nope_head_dim``."""

    width: str
    rope: int
    nope: int


@dataclass(frozen=True)
class ClassFacts:
    """Everything transformers' config class of one model type declares about RoPE, asked once (:func:`class_facts`).

    ``known`` / ``labels``: whether posembed knows which keys of nested parameters the class takes as layer
    types, and its ``_rope_type_labels`` (``()``: it reads ``layer_types``; ``None``: it has no such field and
    its parameters are flat). ``theta``: the ``rope_theta`` it fills into parameters that name none (``None``:
    unknown, or per layer type). ``rotary``: it declares ``rope_parameters``, so a config stating no RoPE field
    still builds a rotary model, with the class's ``parameters`` (the class built without arguments) and its
    flat ``partial`` factor. ``original``: ``(declared, default)`` of ``original_max_position_embeddings`` as an
    ``__init__`` argument. ``per_layer``: its :data:`PER_LAYER_CLASSES` entry; ``latent``: its :class:`LatentClass`.
    ``layer_types``: a config's own or its class's default
    (:func:`config_facts` fills it in). The dict ``parameters`` is shared: copy it before changing it.
    """

    model_type: str | None
    known: bool
    labels: tuple[str, ...] | None
    theta: float | None
    rotary: bool
    parameters: dict | None
    partial: float | None
    original: tuple[bool, int | None]
    per_layer: PerLayerClass | None
    latent: LatentClass | None
    layer_types: list[str] | None = None

    @property
    def why_ignored(self) -> str:
        """Why transformers does not take a config's other keys as layer types, in words."""
        if self.known and self.labels is None:
            return f"transformers' {self.model_type} config class has no layer_types"
        if self.labels:
            return f"transformers' {self.model_type} config class labels its layer types {', '.join(self.labels)}"
        return "the config's layer_types does not name them"


def model_type_of(raw: Mapping) -> str | None:
    """The config's ``model_type`` when it is a string, else ``None``."""
    return raw.get("model_type") if isinstance(raw.get("model_type"), str) else None


def config_facts(raw: Mapping) -> ClassFacts:
    """The :class:`ClassFacts` of the config's model type, with the config's layer types (:func:`default_layer_types`)."""
    return dataclasses.replace(class_facts(model_type_of(raw)), layer_types=default_layer_types(raw))


def class_facts(model_type: Any) -> ClassFacts:
    """The :class:`ClassFacts` of ``model_type`` (any value but a string: no class), asked of transformers once per
    model type (:func:`clear_caches` forgets them).

    >>> facts = class_facts("deepseek_v3")
    >>> facts.theta, facts.rotary, facts.latent
    (10000.0, True, LatentClass(width='qk_rope_head_dim', rope=64, nope=128))
    """
    return _class_facts(model_type if isinstance(model_type, str) else None)


@functools.lru_cache(maxsize=None)
def _class_facts(model_type: str | None) -> ClassFacts:
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        config_class = None
    else:
        config_class = CONFIG_MAPPING[model_type] if model_type in CONFIG_MAPPING else None
    per_layer = PER_LAYER_CLASSES.get(model_type)
    if config_class is None:  # no transformers, or a model type it does not know (remote code): the dict as written
        return ClassFacts(model_type, bool(per_layer), () if per_layer else None, None, False, None, None, (False, None), per_layer, None)
    labels: tuple[str, ...] | None = ()
    if not per_layer:
        declared = getattr(config_class, "_rope_type_labels", None)
        labels = tuple(declared) if declared else () if _declares(config_class, "layer_types") else None
    rotary = _declares(config_class, "rope_parameters")
    flat = (_built_parameters(config_class, rope_parameters={"rope_type": "default"}) or {}) if rotary else {}
    original = inspect.signature(config_class.__init__).parameters.get(ORIGINAL)
    return ClassFacts(
        model_type, known=True, labels=labels,
        theta=_number(getattr(config_class, "rope_theta", getattr(config_class, "default_theta", None))),
        rotary=rotary, parameters=_built_parameters(config_class) if rotary else None,
        partial=_number(flat.get("partial_rotary_factor")),
        original=(original is not None, _number(getattr(original, "default", None), int)),
        per_layer=per_layer, latent=_latent_class(config_class),
    )  # fmt: skip


def _number(value: Any, kind: type = float) -> Any:
    """``value`` as ``kind`` when it is a number (an int for ``int``), else ``None``; never a bool."""
    if isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float)):
        return None
    return kind(value)


def _declares(config_class: type, name: str) -> bool:
    """Whether the config class takes ``name`` as an ``__init__`` argument (a field of its dataclass)."""
    return name in inspect.signature(config_class.__init__).parameters


def _built_parameters(config_class: type, **kwargs: Any) -> dict | None:
    """The ``rope_parameters`` of the class built with ``kwargs``; ``None`` when it cannot be built so."""
    try:
        made = getattr(config_class(**kwargs), "rope_parameters", None)
    except Exception:  # noqa: BLE001 - a class that needs arguments, or fails its own validation, has no such default
        return None
    return made if isinstance(made, dict) else None


def _latent_class(config_class: type) -> LatentClass | None:
    """A class that declares ``qk_rope_head_dim`` and, built with ``qk_rope_head_dim=8, qk_nope_head_dim=12``, holds
    ``head_dim`` 8 (DeepSeek-V2/V3, MiniCPM3, ...) or 20 (Mistral 4); not LongCat (its own ``head_dim`` field)."""
    if not _declares(config_class, "qk_rope_head_dim"):
        return None
    try:
        made = config_class(hidden_size=64, num_attention_heads=4, qk_rope_head_dim=8, qk_nope_head_dim=12)
    except Exception:  # noqa: BLE001 - a class that needs other arguments (or has no RoPE: GLM-5-Next) is not one
        return None
    width = {8: "qk_rope_head_dim", 20: "qk_head_dim"}.get(getattr(made, "head_dim", None))
    rope, nope = getattr(config_class, "qk_rope_head_dim", None), getattr(config_class, "qk_nope_head_dim", None)
    return None if width is None or not isinstance(rope, int) else LatentClass(width, rope, nope if isinstance(nope, int) else 0)


def class_theta(model_type: Any) -> float | None:
    """The ``rope_theta`` transformers' config class of ``model_type`` fills into RoPE parameters that name none.

    ``convert_rope_params_to_dict`` takes the class's ``rope_theta`` field where it declares one, else its
    ``default_theta``: :data:`DEFAULT_THETA` unless the class overrides it (Cohere 5e5, GPT-OSS 1.5e5,
    PhiMoE 1e6, ...). ``None`` for a model type transformers does not know, without transformers, and for a
    class whose default is per layer type (:data:`PER_LAYER_CLASSES`).

    >>> class_theta("cohere"), class_theta("phimoe"), class_theta(None)
    (500000.0, 1000000.0, None)
    """
    return class_facts(model_type).theta


def rotary_class(model_type: Any) -> bool:
    """Whether transformers' config class of ``model_type`` always holds RoPE parameters (it declares
    ``rope_parameters``), so that a config stating no RoPE field still builds a rotary model; ``False``
    without transformers."""
    return class_facts(model_type).rotary


def class_partial(model_type: Any) -> float | None:
    """The ``partial_rotary_factor`` transformers' config class of ``model_type`` fills into flat RoPE parameters
    that name none (GLM and Phi 0.5, GPT-NeoX and StableLM 0.25): read from the class built with
    ``rope_parameters={"rope_type": "default"}``. ``None`` when it fills in none, without transformers, and for a
    class that cannot be built so or nests its parameters.
    """
    return class_facts(model_type).partial


def default_layer_types(raw: Mapping) -> list[str] | None:
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


def why_ignored(raw: Mapping) -> str:
    """Why transformers does not take the config's other keys as layer types, in words (:attr:`ClassFacts.why_ignored`)."""
    return class_facts(model_type_of(raw)).why_ignored


def declared_original(model_type: Any) -> tuple[bool, int | None]:
    """``(declared, class default)``: whether transformers' config class of ``model_type`` takes
    ``original_max_position_embeddings`` as an ``__init__`` argument, and its default there.

    Such a class holds the attribute even when the config has no top-level value, so for yarn,
    llama3 and longrope that default overwrites the parameters' one. Asked of transformers'
    ``CONFIG_MAPPING`` (imported here, on first need); ``(False, None)`` without it.

    >>> declared_original("phi3"), declared_original("llama"), declared_original(None)
    ((True, 4096), (False, None), (False, None))
    """
    return class_facts(model_type).original


def latent_class(model_type: Any) -> LatentClass | None:
    """The :class:`LatentClass` of ``model_type`` (multi-head latent attention), ``None`` for other classes."""
    return class_facts(model_type).latent


def clear_caches() -> None:
    """Forget what was asked of transformers (for tests that hide it)."""
    _class_facts.cache_clear()
