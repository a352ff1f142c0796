"""cos and sin of ``position * frequency``, exact at every position a float32 table can hold.

Every sinusoid (absolute tables, RoPE's cos/sin) needs ``cos(p w)`` and ``sin(p w)`` for an
integer position ``p`` and a float32 frequency ``w``. The usual recipe (transformers,
rotary-embedding-torch, positional-encodings) multiplies in float32: the angle ``p w`` is rounded
to 24 bits, an error of up to ``ulp(p w) / 2`` radians, which grows with the position — about
3e-5 rad at ``p w = 1000``, 4e-3 at 1e5, and at ``p = 2**24`` neighbouring positions collapse
onto one angle.

:func:`cos_sin` with ``angles="exact"`` (the default of every scheme) takes the product in
float64 instead — exact for integer positions below ``2**29`` since the two factors hold 24 bits
each — reduces it to ``[-pi, pi]`` in float64, and only then rounds to float32 for the cos and sin.

Guarantee (``angles="exact"``): for integer positions ``0 <= p <= 2**24`` and any float32
frequencies, ``|cos_sin(p, w) - fp32(cos(float64(p) * float64(w)))| <= 2.5e-7`` (the same for
sin): the rounding of the reduced angle to float32 (at most 1.2e-7 rad) plus float32's own
cos/sin (about one ulp). The tests check 1e-6 at 1e4, 1e5, 1e6 and ``2**24 - 1``.

``angles="fp32"`` is the float32 product of the reference libraries, bit for bit; it is there for
parity with them (and for checkpoints whose training saw exactly those angles), not for accuracy.

The float64 step runs where the table or cache is built (once per module), and per call only
for explicit positions without a cache. MPS has no float64: the angles are reduced on the CPU there.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["ANGLE_MODES", "check_angles", "cos_sin"]

#: how the angle ``p * w`` is formed: exactly in float64, or rounded in float32 as the references do
ANGLE_MODES: tuple[str, ...] = ("exact", "fp32")

_TWO_PI = 2.0 * math.pi


def check_angles(angles: object) -> str:
    """``angles`` if it is one of :data:`ANGLE_MODES`."""
    if angles not in ANGLE_MODES:
        raise ValueError(f"angles must be one of {ANGLE_MODES}, got angles={angles!r}")
    return angles


def reduced_angles(positions: Tensor, inv_freq: Tensor) -> Tensor:
    """``positions[..., None] * inv_freq`` formed in float64 and reduced to ``[-pi, pi]``, float64.

    Shape: ``(...)`` and ``(F,)`` -> ``(..., F)``.

    >>> reduced_angles(torch.tensor([0, 7, 2**24]), torch.tensor([1.0]))  # 7 - 2 pi, 2**24 - 2670176 * 2 pi
    tensor([[ 0.0000],
            [ 0.7168],
            [-0.8940]], dtype=torch.float64)
    """
    device = positions.device
    work = torch.device("cpu") if device.type == "mps" else device  # no float64 on MPS
    angle = positions.to(work, torch.float64)[..., None] * inv_freq.to(work, torch.float64)  # (..., F)
    turns = angle * (1.0 / _TWO_PI)
    turns.round_()  # in place from here: the same operations, two fresh float64 buffers fewer per call
    return angle.sub_(turns.mul_(_TWO_PI)).to(device)


def cos_sin(positions: Tensor, inv_freq: Tensor, angles: str = "exact") -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` of ``positions[..., None] * inv_freq``, float32.

    Args:
        positions: any shape, integer or float (floats are used as given).
        inv_freq: ``(F,)`` float32 frequencies (any dtype; float32 values are what count).
        angles: ``"exact"`` (float64 product, see the module docstring for the bound) or
            ``"fp32"`` (the float32 product of the reference libraries, bit for bit).

    Shape:
        ``(...)`` and ``(F,)`` -> two tensors ``(..., F)``, float32.

    >>> position, w = torch.tensor([1_000_003]), torch.tensor([0.7])
    >>> truth = (position.double() * w.double()).sin()  # the float64 reference
    >>> abs(float(cos_sin(position, w)[1] - truth)) < 1e-7, abs(float(cos_sin(position, w, "fp32")[1] - truth)) > 6e-3
    (True, True)
    """
    if angles == "fp32":
        angle = positions.to(torch.float32)[..., None] * inv_freq.to(torch.float32)  # (..., F)
        return angle.cos(), angle.sin()
    check_angles(angles)
    reduced = reduced_angles(positions, inv_freq).to(torch.float32)  # (..., F), in [-pi, pi]
    return reduced.cos(), reduced.sin()
