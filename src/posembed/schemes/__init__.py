"""Positional schemes, one per file; each declares its :class:`~posembed.schemes.base.Kind`.

:mod:`posembed.schemes.factory` is the one list of schemes and says how each is built from a
model's sizes; :data:`SCHEMES` (name -> class) and :func:`all_schemes` are read from it. Both
load every scheme module on first use, so ``import posembed.schemes`` stays light.
"""

from __future__ import annotations

from typing import Mapping

from posembed.schemes.base import AbsoluteScheme, BiasScheme, Kind, PositionScheme, RotaryScheme

__all__ = ["SCHEMES", "AbsoluteScheme", "BiasScheme", "Kind", "PositionScheme", "RotaryScheme", "all_schemes"]


def all_schemes() -> dict[str, type[PositionScheme]]:
    """Every scheme class by name, in the factory's order."""
    from posembed.schemes.factory import SCHEME_CLASSES

    return dict(SCHEME_CLASSES)


def __getattr__(name: str) -> Mapping[str, type[PositionScheme]]:
    if name == "SCHEMES":  # read-only name -> class view of the factory
        from posembed.schemes.factory import SCHEME_CLASSES

        return SCHEME_CLASSES
    raise AttributeError(f"module 'posembed.schemes' has no attribute {name!r}")
