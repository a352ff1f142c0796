"""The catalogue's call of a rotary module that computes its own positions (its forward takes no ``position_ids``).

Llama 4's vision tower builds one complex table for its config's patch grid and returns it whatever it is given; its
model hands it its ``pixel_values``. :func:`own_grid_call` calls it so and pairs its output with the coordinates
posembed's read says the model rotates at (``AxialSettings.positions()``), so that the comparison of
:mod:`tests.interop.rope_catalogue_compare` fails where those coordinates (offset, class token, axis order) are wrong.
"""

from __future__ import annotations

import torch


class OwnPositions(LookupError):
    """The module's forward computes its own positions (it takes no ``position_ids``): the harness cannot place them."""


def own_grid_call(rotary, sub, names: list[str]):
    """``(module output, coordinates, coordinates)`` of a module that computes its own positions, called as its model
    calls it (Llama 4's vision model hands it its ``pixel_values``: one image of the config's ``image_size``), at the
    coordinates posembed's read says the model rotates at (``AxialSettings.positions()``: its patch grid, offset, and
    class token); :class:`OwnPositions` where posembed reads none (its refusal is then the verdict)."""
    from posembed.interop.rope.settings import layer_settings

    try:
        axial = layer_settings(sub).axial
    except ValueError:
        axial = None
    at = None if axial is None else axial.positions()
    if at is None:
        raise OwnPositions(f"forward({', '.join(names)}) takes no position ids")
    size = int(sub.image_size)
    out = rotary(torch.zeros(1, int(getattr(sub, "num_channels", 3)), size, size))
    return out, at, at
