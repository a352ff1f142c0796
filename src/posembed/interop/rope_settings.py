"""Read the RoPE settings of a transformers config, as written, in either spelling.

A config arrives as a transformers config object, a ``config.json`` dict, a checkpoint folder
or the path of its ``config.json``. Its RoPE fields are read as written (not as a loader would
repair them), so that :mod:`posembed.interop.rope_traps` can see what is missing:

- transformers 5.x: ``rope_parameters`` (flat, or nested by layer type: ModernBERT, Gemma 3)
  holding ``rope_type``, ``rope_theta`` and the type's fields; ``config.to_dict()`` holds it so;
- transformers 4.x: ``rope_scaling`` (``rope_type`` or the older ``type``) plus a top-level
  ``rope_theta``; per layer type Gemma 3's ``rope_local_base_freq`` and ModernBERT's
  ``global_rope_theta`` / ``local_rope_theta``; GPT-NeoX's ``rotary_emb_base`` / ``rotary_pct``
  and GPT-J's ``rotary_dim``.

:func:`read_rope_settings` returns one :class:`RopeSettings` per layer type, and
:func:`flat_config` the flat, 5.x-spelled view that ``RotaryEmbedding.from_hf_config`` reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from posembed.interop.rope_config import read_config

__all__ = ["RopeSettings", "load_config_dict", "read_rope_settings", "flat_config", "DEFAULT_THETA", "ALL_LAYERS"]

#: the theta loaders fall back on when a config names none
DEFAULT_THETA = 10000.0
#: layer-type name of a config with one set of RoPE parameters for every layer
ALL_LAYERS = "all"
#: model types whose original weights pair channels (2i, 2i + 1); the rest use NeoX halves
INTERLEAVED_MODEL_TYPES = frozenset({"gptj", "codegen"})
#: fields that mean a config uses RoPE
_ROPE_FIELDS = (
    "rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base", "rotary_dim", "rotary_pct",
    "rope_local_base_freq", "global_rope_theta", "local_rope_theta",
)  # fmt: skip
#: types whose frequencies depend on the pre-training length
ORIGINAL_USERS = frozenset({"yarn", "longrope", "llama3"})


@dataclass(frozen=True)
class RopeSettings:
    """The RoPE settings of one layer type, as the config states them.

    ``params`` is the flat 5.x dict (``rope_type``, ``rope_theta``, the type's fields);
    ``theta_given`` / ``original_given`` say whether the config wrote them; ``original_max_len``
    is resolved as transformers does (``rope_parameters``, then the top level, then
    ``max_position_embeddings``).
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

    @property
    def factor(self) -> float:
        value = self.params.get("factor")
        return 1.0 if value is None else float(value)


def load_config_dict(config: Any) -> tuple[dict, Any, str]:
    """``(raw dict, transformers config object or None, where from)`` for any accepted input.

    Raises ``FileNotFoundError`` for a missing path and ``ValueError`` for a folder with no
    ``config.json`` or a file that is not a JSON object.
    """
    if isinstance(config, (str, Path)):
        path = Path(config)
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist")
        file = path / "config.json" if path.is_dir() else path
        if not file.is_file():
            raise ValueError(f"{path} is not a checkpoint: it has no config.json")
        return read_config(file), None, str(file)
    if isinstance(config, dict):
        return dict(config), None, "dict"
    if hasattr(config, "to_dict"):
        return dict(config.to_dict()), config, type(config).__name__
    if hasattr(config, "__dict__"):
        return dict(vars(config)), None, type(config).__name__
    raise TypeError(f"expected a transformers config, a dict, a folder or a config.json path; got {type(config).__name__}")


def has_rope(raw: dict) -> bool:
    """Whether the config describes rotary position embeddings at all."""
    return any(raw.get(name) not in (None, {}) for name in _ROPE_FIELDS) or raw.get("model_type") in INTERLEAVED_MODEL_TYPES


def _layer_params(raw: dict) -> dict[str, dict]:
    """Flat 5.x parameters per layer type (``{"all": ...}`` for one set), in either spelling."""
    stated = raw.get("rope_parameters")
    if isinstance(stated, dict) and stated:
        if all(isinstance(value, dict) for value in stated.values()):
            return {layer: dict(value) for layer, value in stated.items()}
        return {ALL_LAYERS: dict(stated)}
    params = dict(raw.get("rope_scaling") or {})
    if "type" in params and "rope_type" not in params:
        params["rope_type"] = params.pop("type")
    theta = raw.get("rope_theta", raw.get("rotary_emb_base"))
    if theta is not None:
        params.setdefault("rope_theta", theta)
    if raw.get("rope_local_base_freq") is not None:  # Gemma 3, 4.x spelling
        return {"full_attention": params, "sliding_attention": {"rope_theta": raw["rope_local_base_freq"]}}
    if raw.get("global_rope_theta") is not None or raw.get("local_rope_theta") is not None:  # ModernBERT 4.x
        local = {"rope_theta": raw["local_rope_theta"]} if raw.get("local_rope_theta") is not None else {}
        glob = {**params, **({"rope_theta": raw["global_rope_theta"]} if raw.get("global_rope_theta") else {})}
        return {"full_attention": glob, "sliding_attention": local}
    return {ALL_LAYERS: params}


def _shape(raw: dict) -> tuple[int, bool, int | None, int | None]:
    hidden = raw.get("hidden_size", raw.get("n_embd", raw.get("d_model")))
    heads = raw.get("num_attention_heads", raw.get("n_head"))
    if raw.get("head_dim"):
        return int(raw["head_dim"]), True, hidden, heads
    if not hidden or not heads:
        raise ValueError("the config needs head_dim, or hidden_size and num_attention_heads, to place RoPE")
    return int(hidden) // int(heads), False, hidden, heads


def _partial(raw: dict, params: dict, head_dim: int) -> float:
    for value in (params.get("partial_rotary_factor"), raw.get("partial_rotary_factor"), raw.get("rotary_pct")):
        if value is not None:
            return float(value)
    if raw.get("rotary_dim"):
        return int(raw["rotary_dim"]) / head_dim
    return 1.0


def read_rope_settings(raw: dict) -> list[RopeSettings]:
    """One :class:`RopeSettings` per layer type of a config dict.

    Raises ``ValueError`` when the config has no RoPE (naming the fields looked for).
    """
    if not has_rope(raw):
        kind = raw.get("position_embedding_type") or raw.get("model_type") or "this model"
        raise ValueError(
            f"the config has no RoPE ({kind!s}): none of {', '.join(_ROPE_FIELDS)} is set"
        )
    head_dim, head_dim_given, hidden, heads = _shape(raw)
    layout = "interleaved" if raw.get("model_type") in INTERLEAVED_MODEL_TYPES else "half"
    max_pos = raw.get("max_position_embeddings", raw.get("n_positions"))
    settings = []
    for layer, params in _layer_params(raw).items():
        rope_type = params.get("rope_type", "default")
        params = {**params, "rope_type": rope_type}
        theta_given = params.get("rope_theta") is not None
        params["rope_theta"] = float(params["rope_theta"]) if theta_given else DEFAULT_THETA
        original = params.get("original_max_position_embeddings") or raw.get("original_max_position_embeddings")
        partial = _partial(raw, params, head_dim)
        settings.append(
            RopeSettings(
                layer_type=layer, rope_type=rope_type, theta=params["rope_theta"], theta_given=theta_given,
                head_dim=head_dim, head_dim_given=head_dim_given, hidden_size=hidden, num_heads=heads,
                rotary_dim=int(head_dim * partial), partial_rotary_factor=partial, layout=layout,
                max_position_embeddings=max_pos, original_max_len=int(original) if original else max_pos,
                original_given=bool(original), params=params,
            )  # fmt: skip
        )
    return settings


class _FlatConfig(SimpleNamespace):
    """A config-like object (attributes and ``to_dict``) with one layer type's flat parameters."""

    def to_dict(self) -> dict:
        return dict(vars(self))


def flat_config(raw: dict, settings: RopeSettings) -> _FlatConfig:
    """The 5.x-spelled, single-layer-type view of a config for ``RotaryEmbedding.from_hf_config``."""
    params = dict(settings.params)
    if settings.partial_rotary_factor != 1.0:
        params["partial_rotary_factor"] = settings.partial_rotary_factor
    fields = {
        "hidden_size": settings.hidden_size,
        "num_attention_heads": settings.num_heads,
        "head_dim": settings.head_dim,
        "max_position_embeddings": settings.max_position_embeddings,
        "partial_rotary_factor": settings.partial_rotary_factor,
        "rope_theta": settings.theta,
        "rope_parameters": params,
        "model_type": raw.get("model_type"),
    }
    if raw.get("original_max_position_embeddings"):
        fields["original_max_position_embeddings"] = raw["original_max_position_embeddings"]
    return _FlatConfig(**fields)
