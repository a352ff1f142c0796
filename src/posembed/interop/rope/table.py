"""The rotation each transformers family's attention applies, as declared in ``rotations.json``: :func:`class_rotation`,
:func:`type_rotation`, :func:`declared_rotation`.

The table ships with the package; ``tools/rope_table.py`` derives it from the pinned transformers (calling each
family's rotation function on one-hot vectors) and CI checks the two agree (``tests/interop/test_rope_table.py``).
Nothing here reads transformers' source. An entry is ``{"rotation": [layout, direction, channels]}``: ``layout``
``"half"`` (NeoX halves, Llama's ``rotate_half``) or ``"interleaved"`` (adjacent pairs), ``direction``
``"forward"`` or ``"reversed"`` (nanochat's ``cat(x2, -x1)``), ``channels`` ``"first"`` or ``"last"`` (the
channels a partial rotation turns: DeepSeek-V4's last); ``"interleave"``: the rotation where the config sets
``rope_interleave`` (the attention switches on it, DeepSeek-V3), with ``"interleave_default"`` the class's default.

A model type the table does not know is read from its declared fields (:func:`declared_rotation`): ``rope_interleave``
decides the layout; without it posembed logs one warning naming the model type and what to pass, and reads halves.

Example:
    >>> type_rotation("cohere"), type_rotation("deepseek_v3"), type_rotation("deepseek_v3", interleave=False)
    (('interleaved', 'forward', 'first'), ('interleaved', 'forward', 'first'), ('half', 'forward', 'first'))
    >>> type_rotation("no such model") is None
    True
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from importlib import resources
from typing import Any

__all__ = ["Rotation", "TABLE", "rotation_table", "class_rotation", "type_rotation", "declared_rotation"]

logger = logging.getLogger(__name__)

#: ``(layout, direction, channels)``
Rotation = tuple[str, str, str]
#: the table's file name in this package
TABLE = "rotations.json"
#: the rotation read for a model type neither the table nor its config decides (after one warning)
_UNDECIDED: Rotation = ("half", "forward", "first")
_warned: set[str] = set()


@functools.lru_cache(maxsize=1)
def rotation_table() -> dict:
    """The shipped table: ``{"transformers": the version it was derived from, "classes": {config class name: entry},
    "model_types": {model_type: config class name}}``."""
    return json.loads(resources.files(__package__).joinpath(TABLE).read_text(encoding="utf-8"))


def _rotation(entry: Mapping | None, interleave: bool | None) -> Rotation | None:
    if entry is None:
        return None
    switched = entry.get("interleave")
    if interleave is None:
        interleave = bool(entry.get("interleave_default", False))
    return tuple(switched if switched is not None and interleave else entry["rotation"])


def class_rotation(class_name: str, interleave: bool | None = None) -> Rotation | None:
    """The rotation of a transformers config class (by its name) with ``rope_interleave`` set to ``interleave``
    (``None``: the class's default); ``None``: not in the table."""
    return _rotation(rotation_table()["classes"].get(class_name), interleave)


def type_rotation(model_type: Any, interleave: bool | None = None) -> Rotation | None:
    """The rotation of a model type's own config class (:func:`class_rotation`), read without transformers;
    ``None``: a model type not in the table."""
    name = rotation_table()["model_types"].get(model_type) if isinstance(model_type, str) else None
    return None if name is None else class_rotation(name, interleave)


def declared_rotation(model_type: Any, interleave: Any) -> Rotation:
    """The rotation of a model type the table does not know, from its config's ``rope_interleave`` (``None``: not
    declared): adjacent pairs when true, halves when false; undeclared, halves after one warning per model type
    naming it and what to pass."""
    if interleave is not None:
        return ("interleaved" if interleave else "half", "forward", "first")
    name = str(model_type) if model_type else "a config without model_type"
    if name not in _warned:
        _warned.add(name)
        known = rotation_table()["transformers"]
        logger.warning(
            "posembed: the rotation layout of %s is not declared (posembed's table covers transformers %s, and the "
            "config sets no rope_interleave); reading it as 'half' (Llama's rotate_half): if its attention rotates "
            "adjacent pairs, pass layout='interleaved' to rotary_from_hf_config or set rope_interleave in the config",
            repr(model_type) if model_type else name, known,
        )  # fmt: skip
    return _UNDECIDED
