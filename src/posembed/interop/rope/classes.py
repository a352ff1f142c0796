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
- the width and layout of its rotary channels: the ``head_dim`` it fills in, multi-head latent attention
  (:class:`LatentClass`) and ``rope_interleave``, which :mod:`posembed.interop.rope.latent` reads a config against.

transformers is asked lazily (its ``CONFIG_MAPPING``, imported on first need); without it the tables
stand in (:data:`CLASS_THETA`, :data:`CLASS_HEAD_DIM`, :data:`DECLARED_ORIGINAL`, :data:`ROPE_TYPE_LABELS`,
:data:`LATENT_CLASSES`, :data:`HEAD_DIM_ALIASED`, :data:`ROPE_INTERLEAVE`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "DEFAULT_THETA", "CLASS_THETA", "CLASS_HEAD_DIM", "FULL", "SLIDING", "ORIGINAL", "DECLARED_ORIGINAL", "ORIGINAL_FROM_PARAMETERS",
    "RENAMED_TO_LONGROPE", "OLD_LONGROPE", "ROPE_TYPE_LABELS", "PerLayerClass", "PER_LAYER_CLASSES", "LatentClass",
    "LATENT_CLASSES", "HEAD_DIM_ALIASED", "ROPE_INTERLEAVE", "ALWAYS_INTERLEAVED", "ClassFacts", "class_facts", "config_facts",
    "model_type_of", "class_theta", "class_partial", "rotary_class", "default_layer_types", "why_ignored", "declared_original",
    "clear_caches",
]  # fmt: skip

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


@dataclass(frozen=True)
class LatentClass:
    """A multi-head latent attention config class: its rotary embedding reads ``head_dim``, which the class sets
    from ``width`` (``"qk_rope_head_dim"``, or ``"qk_head_dim"``: ``qk_nope_head_dim + qk_rope_head_dim`` with the
    partial factor ``qk_rope_head_dim / head_dim``, Mistral 4), whatever head_dim the config states;
    ``rope`` / ``nope``: the class's defaults of ``qk_rope_head_dim`` / ``qk_nope_head_dim``."""

    width: str
    rope: int
    nope: int


#: the multi-head latent attention classes of transformers 5.23, read when transformers is absent (with it, every
#: class that declares ``qk_rope_head_dim`` is asked: :func:`class_facts`)
LATENT_CLASSES: dict[str, LatentClass] = {
    "deepseek_v2": LatentClass("qk_rope_head_dim", 64, 128), "deepseek_v3": LatentClass("qk_rope_head_dim", 64, 128),
    "deepseek_v32": LatentClass("qk_rope_head_dim", 64, 128), "minicpm3": LatentClass("qk_rope_head_dim", 32, 64),
    "glm4_moe_lite": LatentClass("qk_rope_head_dim", 64, 192), "glm_moe_dsa": LatentClass("qk_rope_head_dim", 64, 192),
    "youtu": LatentClass("qk_rope_head_dim", 64, 128),
    "mistral_large4_text": LatentClass("qk_rope_head_dim", 64, 64), "mistral4": LatentClass("qk_head_dim", 64, 64),
}  # fmt: skip
#: latent classes whose ``attribute_map`` aliases ``head_dim`` to ``qk_rope_head_dim``, read when transformers is absent
HEAD_DIM_ALIASED = frozenset({"glm4_moe_lite"})
#: classes whose layout is their ``rope_interleave`` field (default ``True``: pairs (2i, 2i + 1)), read when
#: transformers is absent
ROPE_INTERLEAVE = frozenset({"deepseek_v3", "glm4_moe_lite", "mistral4", "youtu", "axk1"})
#: classes that always rotate interleaved pairs (2i, 2i + 1): GPT-J and CodeGen (their original weights pair channels
#: so), DeepSeek-V2 as complex numbers (``view_as_complex``), the others through
#: ``apply_rotary_pos_emb_interleave`` (transformers 5.23)
ALWAYS_INTERLEAVED = frozenset({"gptj", "codegen", "deepseek_v2", "bailing_hybrid", "longcat_flash", "llama4", "llama4_text"})


@dataclass(frozen=True)
class ClassFacts:
    """Everything transformers' config class of one model type declares about RoPE, asked once (:func:`class_facts`).

    ``known`` / ``labels``: whether posembed knows which keys of nested parameters the class takes as layer
    types, and its ``_rope_type_labels`` (``()``: it reads ``layer_types``; ``None``: it has no such field and
    its parameters are flat). ``theta``: the ``rope_theta`` it fills into parameters that name none (``None``:
    unknown, or per layer type). ``rotary``: it declares ``rope_parameters``, so a config stating no RoPE field
    still builds a rotary model, with the class's ``parameters`` (the class built without arguments) and its
    flat ``partial`` factor. ``original``: ``(declared, default)`` of ``original_max_position_embeddings`` as an
    ``__init__`` argument. ``per_layer``: its :data:`PER_LAYER_CLASSES` entry. ``head_dim``: the field's default
    (``None``: derived); ``latent``: its :class:`LatentClass`; ``head_dim_alias``: a stated ``head_dim`` is its
    ``qk_rope_head_dim``; ``interleave``: its ``rope_interleave`` default (``None``: no such field);
    ``always_interleaved``: :data:`ALWAYS_INTERLEAVED`. ``layer_types``: a config's own or its class's default
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
    head_dim: int | None
    latent: LatentClass | None
    head_dim_alias: bool
    interleave: bool | None
    always_interleaved: bool
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
    >>> facts.theta, facts.rotary, facts.latent, facts.interleave
    (10000.0, True, LatentClass(width='qk_rope_head_dim', rope=64, nope=128), True)
    """
    return _class_facts(model_type if isinstance(model_type, str) else None)


@functools.lru_cache(maxsize=None)
def _class_facts(model_type: str | None) -> ClassFacts:
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        installed, config_class = False, None
    else:
        installed, config_class = True, CONFIG_MAPPING[model_type] if model_type in CONFIG_MAPPING else None
    per_layer = PER_LAYER_CLASSES.get(model_type)
    known, labels = (True, ()) if per_layer else (model_type in ROPE_TYPE_LABELS, ROPE_TYPE_LABELS.get(model_type))
    fixed = {"model_type": model_type, "per_layer": per_layer, "always_interleaved": model_type in ALWAYS_INTERLEAVED}
    if config_class is None:  # no transformers: the tables stand in; a model type it does not know (remote code): none
        table = None if installed else model_type
        return ClassFacts(
            known=known, labels=labels, theta=CLASS_THETA.get(table), rotary=False, parameters=None, partial=None,
            original=(table in DECLARED_ORIGINAL, DECLARED_ORIGINAL.get(table)), head_dim=CLASS_HEAD_DIM.get(table),
            latent=LATENT_CLASSES.get(table), head_dim_alias=table in HEAD_DIM_ALIASED,
            interleave=True if table in ROPE_INTERLEAVE else None, **fixed,
        )  # fmt: skip
    if not per_layer:
        declared = getattr(config_class, "_rope_type_labels", None)
        labels = tuple(declared) if declared else () if _declares(config_class, "layer_types") else None
    rotary, latent = _declares(config_class, "rope_parameters"), _latent_class(config_class)
    flat = (_built_parameters(config_class, rope_parameters={"rope_type": "default"}) or {}) if rotary else {}
    original = inspect.signature(config_class.__init__).parameters.get(ORIGINAL)
    head_dim = None if latent else _number(getattr(config_class, "head_dim", None), int)
    return ClassFacts(
        known=True, labels=labels, theta=_number(getattr(config_class, "rope_theta", getattr(config_class, "default_theta", None))),
        rotary=rotary, parameters=_built_parameters(config_class) if rotary else None,
        partial=_number(flat.get("partial_rotary_factor")),
        original=(original is not None, _number(getattr(original, "default", None), int)),
        head_dim=head_dim if head_dim and head_dim > 0 else None, latent=latent,
        head_dim_alias=(getattr(config_class, "attribute_map", None) or {}).get("head_dim") == "qk_rope_head_dim",
        interleave=getattr(config_class, "rope_interleave", True) if _declares(config_class, "rope_interleave") else None,
        **fixed,
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
    PhiMoE 1e6, ...). ``None`` for a model type transformers does not know and for a class whose default is
    per layer type (:data:`PER_LAYER_CLASSES`); without transformers, :data:`CLASS_THETA`.

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
    ``CONFIG_MAPPING`` when it is installed (imported here, on first need), else :data:`DECLARED_ORIGINAL`.

    >>> declared_original("phi3"), declared_original("llama"), declared_original(None)
    ((True, 4096), (False, None), (False, None))
    """
    return class_facts(model_type).original


def clear_caches() -> None:
    """Forget what was asked of transformers (for tests that hide it)."""
    _class_facts.cache_clear()
