"""Positional schemes, one per file; each declares its :class:`~posembed.schemes.base.Kind`.

:mod:`posembed.schemes.factory` is the one list of schemes and says how each is built from a
model's sizes; :data:`SCHEMES` (name -> class) and :func:`all_schemes` are read from it. Both
load every scheme module on first use, so ``import posembed.schemes`` stays light.

Files:

=================== ============================================================================
file                what
=================== ============================================================================
``base``            the scheme interface: ``PositionScheme`` and its three kinds
``factory``         the one list of schemes (``SchemeEntry``) and how each is built
``entry``           what an entry is: ``ModelSizes``, ``Arg``, ``SchemeEntry``
``config``          a scheme as a JSON-able dict and back
``catalog``         one row per factory entry (``posembed schemes``)
``phases``          cos and sin of position times frequency, exact in float32 (absolute and rotary)
``fp32_buffers``    fp32 tables kept exact under ``.half()`` / ``.to(dtype)`` (stored as int32 bits)
``positions``       position ids from masks, documents and offsets, a vision tower's patch grid
``absolute/``       absolute schemes: learned, sinusoidal, sinusoidal_nd
``rotary/``         rotary schemes: RoPE, its scaling variants, xPos, axial, Pixtral, M-RoPE
``bias/``           bias schemes: ALiBi, T5, KERPLE, FIRE, Sandwich, CoPE, ..., and NoPE
=================== ============================================================================
"""

from __future__ import annotations

from posembed._utils.names import import_submodule
from posembed.schemes.base import AbsoluteScheme, BiasScheme, Kind, PositionScheme, RotaryScheme

__all__ = ["SCHEMES", "AbsoluteScheme", "BiasScheme", "Kind", "PositionScheme", "RotaryScheme", "all_schemes"]


def __getattr__(name: str):
    if name in ("SCHEMES", "all_schemes"):  # from the factory, which loads every scheme: on first use only
        from posembed.schemes import factory

        return factory.SCHEME_CLASSES if name == "SCHEMES" else factory.all_schemes
    return import_submodule(__name__, name)  # posembed.schemes.<file>: imported on first use
