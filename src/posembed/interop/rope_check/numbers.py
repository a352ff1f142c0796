"""The numeric fields of a transformers config's RoPE, and the ones it gives as something else.

transformers keeps a number written as a string (``"rope_theta": "1e4"``, YAML 1.1's reading of ``1e4``), and its
rope init or config class then fails with a ``TypeError``. :func:`non_numbers` finds each such field by its path (an
error trap); :func:`as_numbers` converts the readable ones, so that the check still shows what the config means.

Example:
    >>> raw = {"model_type": "llama", "rope_theta": "1e4", "rope_scaling": {"rope_type": "linear", "factor": 4}}
    >>> non_numbers(raw)
    [('rope_theta', '1e4', 10000.0)]
    >>> as_numbers(raw)["rope_theta"]
    10000.0
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["non_numbers", "as_numbers", "refuse_unreadable", "INTEGER_FIELDS", "REAL_FIELDS", "REAL_PARAMETERS", "LIST_PARAMETERS"]

#: top-level fields that count positions or channels (integers)
INTEGER_FIELDS = (
    "max_position_embeddings", "n_positions", "original_max_position_embeddings", "head_dim", "rotary_dim",
    "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head", "qk_rope_head_dim", "qk_nope_head_dim",
)  # fmt: skip
#: the top-level fields that hold a theta (the reader refuses one it cannot read, naming its layer type)
THETA_FIELDS = ("rope_theta", "rotary_emb_base", "rope_local_base_freq", "global_rope_theta", "local_rope_theta")
#: top-level fields that are real numbers
REAL_FIELDS = (*THETA_FIELDS, "partial_rotary_factor", "rotary_pct")
#: real-valued fields of the RoPE parameters (``rope_parameters`` / ``rope_scaling``, flat or per layer type)
REAL_PARAMETERS = (
    "rope_theta", "factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
    "low_freq_factor", "high_freq_factor", "partial_rotary_factor", "short_mscale", "long_mscale",
)  # fmt: skip
#: integer fields of the RoPE parameters
INTEGER_PARAMETERS = ("original_max_position_embeddings",)
#: list-valued fields of the RoPE parameters, one real number per frequency pair
LIST_PARAMETERS = ("short_factor", "long_factor")
_PARAMETER_FIELDS = ("rope_parameters", "rope_scaling")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fields(raw: Mapping) -> Iterator[tuple[tuple, bool, Any]]:
    """``(path, integer?, value)`` of every numeric RoPE field the config states (``None`` is absent)."""
    for name in INTEGER_FIELDS + REAL_FIELDS:
        if raw.get(name) is not None:
            yield (name,), name in INTEGER_FIELDS, raw[name]
    for field in _PARAMETER_FIELDS:
        stated = raw.get(field)
        if not isinstance(stated, Mapping):
            continue
        nested = [(key, value) for key, value in stated.items() if isinstance(value, Mapping)]
        for prefix, params in [((field,), stated)] + [((field, key), value) for key, value in nested]:
            for name in REAL_PARAMETERS + INTEGER_PARAMETERS:
                if params.get(name) is not None:
                    yield prefix + (name,), name in INTEGER_PARAMETERS, params[name]
            for name in LIST_PARAMETERS:
                values = params.get(name)
                if isinstance(values, (list, tuple)):
                    yield from ((prefix + (name, i), False, v) for i, v in enumerate(values) if not _is_number(v))


def _shown(path: tuple) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else (f".{part}" if i else part) for i, part in enumerate(path))


def non_numbers(raw: Mapping) -> list[tuple[str, Any, int | float | None]]:
    """``(field, value, the number it reads as)`` for every numeric RoPE field the config gives as something other
    than a number (a string, a bool); the field is its dotted path (``rope_scaling.factor``,
    ``rope_parameters.long_factor[3]``), the number ``None`` where none can be read."""
    found = []
    for path, integer, value in _fields(raw):
        if not _is_number(value):
            try:
                number = _number(_shown(path), integer, value)
            except ValueError:
                number = None
            found.append((_shown(path), value, number))
    return found


def _number(shown: str, integer: bool, value: Any) -> int | float:
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
        if math.isfinite(number) and (not integer or number.is_integer()):
            return int(number) if integer else number
    kind = "an integer" if integer else "a number"
    raise ValueError(f"{shown} must be {kind}, got {value!r}")


def as_numbers(raw: Mapping) -> dict:
    """A copy of the config with each numeric RoPE field given as a readable string converted to its number;
    a value no number can be read from (``"ten thousand"``, ``true``) is left as it is (see :func:`refuse_unreadable`)."""
    found = [(path, integer, value) for path, integer, value in _fields(raw) if not _is_number(value)]
    converted = copy.deepcopy(dict(raw)) if found else dict(raw)
    for path, integer, value in found:
        parent = converted
        for part in path[:-1]:
            parent = parent[part]
        try:
            parent[path[-1]] = _number(_shown(path), integer, value)
        except ValueError:
            continue
    return converted


def refuse_unreadable(raw: Mapping) -> None:
    """Raise ``ValueError`` naming the first numeric RoPE field no number can be read from, and its value; thetas
    are left to :func:`~posembed.interop.rope.settings.read_rope_settings`, which names the layer type whose theta
    it is."""
    for path, integer, value in _fields(raw):
        if not _is_number(value) and path[-1] not in THETA_FIELDS:
            _number(_shown(path), integer, value)
