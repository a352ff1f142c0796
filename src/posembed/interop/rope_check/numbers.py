"""The numeric fields of a transformers config's RoPE, and the ones it gives as something else.

transformers keeps a number written as a string (``"rope_theta": "1e4"``, YAML 1.1's reading of ``1e4``), and its
rope init or config class then fails with a ``TypeError``. :func:`read_numbers` finds each such field by its path (an
error trap) and converts the readable ones, so that the check still shows what the config means.

Example:
    >>> raw = {"model_type": "llama", "rope_theta": "1e4", "rope_scaling": {"rope_type": "linear", "factor": 4}}
    >>> numbers, strings = read_numbers(raw)
    >>> strings, numbers["rope_theta"]
    ([('rope_theta', '1e4', 10000.0)], 10000.0)
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["read_numbers", "THETA_FIELDS"]

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


def _fields(raw: Mapping) -> Iterator[tuple[tuple, bool, Any]]:
    """``(path, integer?, value)`` of every numeric RoPE field the config states (``None`` is absent)."""
    for name in INTEGER_FIELDS + REAL_FIELDS:
        if raw.get(name) is not None:
            yield (name,), name in INTEGER_FIELDS, raw[name]
    for field in ("rope_parameters", "rope_scaling"):
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
                    yield from ((prefix + (name, i), False, v) for i, v in enumerate(values))


def read_numbers(raw: Mapping) -> tuple[dict, list[tuple[str, Any, int | float | None]]]:
    """``(numbers, strings)``: a copy of the config with each numeric RoPE field written as a readable string
    converted, and ``(field, value, the number it reads as)`` for each field given as something other than a number
    (a string, a bool): its dotted path (``rope_scaling.factor``, ``rope_parameters.long_factor[3]``), the number
    ``None`` (the value then left as it is) for a theta no number can be read from, which
    :func:`~posembed.interop.rope.settings.read_rope_settings` refuses naming its layer type; any other such field
    (``"ten thousand"``, ``true``) raises ``ValueError`` naming it and its value."""
    found = [
        (path, integer, v)
        for path, integer, v in _fields(raw)
        if isinstance(v, bool) or not isinstance(v, (int, float))
    ]
    numbers, strings = copy.deepcopy(dict(raw)) if found else dict(raw), []
    for path, integer, value in found:
        shown = "".join(
            f"[{part}]" if isinstance(part, int) else (f".{part}" if i else part) for i, part in enumerate(path)
        )
        try:
            number = float(value.strip()) if isinstance(value, str) else math.nan
        except ValueError:
            number = math.nan
        readable = math.isfinite(number) and (not integer or number.is_integer())
        if not readable and path[-1] not in THETA_FIELDS:
            raise ValueError(f"{shown} must be {'an integer' if integer else 'a number'}, got {value!r}")
        number = (int(number) if integer else number) if readable else None
        if readable:
            functools.reduce(lambda parent, part: parent[part], path[:-1], numbers)[path[-1]] = number
        strings.append((shown, value, number))
    return numbers, strings
