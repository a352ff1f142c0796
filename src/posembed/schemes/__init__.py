"""Positional schemes, one per file; each declares its :class:`~posembed.schemes.base.Kind`.

:func:`all_schemes` imports every scheme module so that :data:`SCHEMES` is complete.
"""

from __future__ import annotations

import importlib

from posembed.schemes.base import SCHEMES, AbsoluteScheme, BiasScheme, Kind, PositionScheme, RotaryScheme

__all__ = ["SCHEMES", "AbsoluteScheme", "BiasScheme", "Kind", "PositionScheme", "RotaryScheme", "all_schemes"]

#: every module that defines schemes
SCHEME_MODULES = (
    "learned",
    "sinusoidal",
    "sinusoidal_nd",
    "rotary",
    "rotary_scaling",
    "rotary_yarn",
    "rotary_longrope",
    "xpos",
    "alibi",
    "t5_bias",
    "shaw",
    "nope",
)


def all_schemes() -> dict[str, type[PositionScheme]]:
    """Every registered scheme class by name, after importing all scheme modules."""
    for module in SCHEME_MODULES:
        importlib.import_module(f"posembed.schemes.{module}")
    return dict(SCHEMES)
