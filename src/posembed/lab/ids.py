"""The one id function of the lab and the context study: a SHA-256 of a config's canonical JSON.

Both key what they store by it: a sweep's trials (:attr:`~posembed.lab.config.TrialConfig.trial_id`, its
first 16 hex digits) and its experiment (:attr:`~posembed.lab.config.ExperimentConfig.config_hash`, all 64),
and a context study's runs and trained models (:func:`~posembed.lab.context.store.config_id_of`,
:func:`~posembed.lab.context.store.train_id_of`). A field added after stores existed is hashed only away
from the value those stores trained with (:func:`without_later_defaults`), so their ids do not move.

The JSON's spacing is part of an id. The lab's ids were defined on compact JSON (``","``, ``":"``), the
context study's on ``json.dumps``' default spacing (``", "``, ``": "``); each keeps its own, named by
``spacing``, so that every stored id stays what it is.

>>> content_id({"b": 1, "a": [1, 2]}) == content_id({"a": [1, 2], "b": 1})
True
>>> content_id({"a": 1}, digits=16), content_id({"a": 1}, spacing="json", digits=16)
('015abd7f5cc57a2d', 'f9d86028c6e0d64e')
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["content_id", "without_later_defaults", "SEPARATORS"]

#: the JSON separators of each id's spacing
SEPARATORS = {"compact": (",", ":"), "json": (", ", ": ")}


def content_id(value: Any, *, spacing: Literal["compact", "json"] = "compact", digits: int | None = None) -> str:
    """SHA-256 hex digest of ``value`` as JSON with sorted keys and ``spacing``; its first ``digits`` hex
    digits (``None``: all 64)."""
    if spacing not in SEPARATORS:
        raise ValueError(f"spacing must be one of {', '.join(SEPARATORS)}, got {spacing!r}")
    text = json.dumps(value, sort_keys=True, separators=SEPARATORS[spacing])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits]


def without_later_defaults(body: Mapping[str, Any], later: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` without the fields of ``later`` that hold the value stores from before them trained with.

    >>> without_later_defaults({"steps": 10, "matmuls": "fp32"}, {"matmuls": "fp32"})
    {'steps': 10}
    """
    return {k: v for k, v in body.items() if k not in later or v != later[k]}
