"""Axial, Pixtral and M-RoPE keep their float32 frequencies under dtype casts with no ``_apply``
override (an :class:`~posembed.schemes.fp32_buffers.Fp32Buffer`): every cast scheme rotates
exactly as a scheme built fresh in float32, which is what the old rebuild-on-``_apply`` gave."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from posembed.schemes.fp32_buffers import Fp32Buffer
from posembed.schemes.rotary.axial import AxialRotary, SectionedRotary, axial_cos_sin, axial_frequencies
from posembed.schemes.rotary.mrope import MRoPE
from posembed.schemes.rotary.pixtral import PixtralRotary
from posembed.schemes.rotary.rotation import apply_rotary

HEAD_DIM, LENGTH = 32, 12
AXIAL = {
    "axial": lambda: AxialRotary(HEAD_DIM, num_axes=2),
    "axial_pixel_half": lambda: AxialRotary(HEAD_DIM, num_axes=3, frequencies="pixel", layout="half"),
    "axial_per_axis": lambda: AxialRotary(HEAD_DIM, layout="half", layout_span="axis", axis_order=(1, 0)),
    "pixtral": lambda: PixtralRotary(HEAD_DIM),
    "mrope": lambda: MRoPE(HEAD_DIM, mrope_section=(4, 6, 6)),
}
CASTS = {
    "half": (lambda m: m.half(), torch.float16),
    "bf16": (lambda m: m.to(torch.bfloat16), torch.bfloat16),
    "double": (lambda m: m.double(), torch.float64),
    "float": (lambda m: m.float(), torch.float32),
    "round trip": (lambda m: m.half().float(), torch.float32),
}


def _coords(scheme: SectionedRotary) -> torch.Tensor:
    grid = torch.randint(0, 9, (LENGTH, scheme.num_axes), generator=torch.Generator().manual_seed(3))
    return grid.float() / 8 if getattr(scheme, "frequencies", "lang") == "pixel" else grid


def test_no_axial_scheme_overrides_apply():
    assert SectionedRotary._apply is nn.Module._apply
    for make in AXIAL.values():
        assert type(make())._apply is nn.Module._apply
    assert isinstance(SectionedRotary.inv_freq, Fp32Buffer)


@pytest.mark.parametrize("cast", CASTS)
@pytest.mark.parametrize("name", AXIAL)
def test_a_cast_axial_scheme_rotates_as_a_fresh_float32_one(name, cast):
    to, dtype = CASTS[cast]
    generator = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 2, LENGTH, HEAD_DIM, generator=generator).to(dtype) for _ in range(2))
    fresh, cast_scheme = AXIAL[name](), to(AXIAL[name]())
    assert cast_scheme.inv_freq.dtype == torch.float32 and torch.equal(cast_scheme.inv_freq, fresh.inv_freq)
    assert torch.equal(cast_scheme.axis_of, fresh.axis_of)
    coords = _coords(fresh)
    for a, b in zip(cast_scheme(q, k, coords), fresh(q, k, coords)):
        assert a.dtype == dtype and torch.equal(a, b)


@pytest.mark.parametrize("cast", CASTS)
def test_a_cast_axial_scheme_equals_the_float32_formula(cast):
    """The rotation, computed here from the float32 frequencies of :func:`axial_frequencies`."""
    to, dtype = CASTS[cast]
    scheme = to(AxialRotary(HEAD_DIM, num_axes=2, layout="half", angles="fp32"))
    inv_freq, axis_of = axial_frequencies(HEAD_DIM // 2, 2)
    assert inv_freq.dtype == torch.float32 and torch.equal(scheme.inv_freq, inv_freq)
    coords = _coords(scheme)
    cos, sin = axial_cos_sin(coords, inv_freq, axis_of, "fp32")
    q = torch.randn(1, 2, LENGTH, HEAD_DIM, generator=torch.Generator().manual_seed(1)).to(dtype)
    assert torch.equal(scheme(q, q, coords)[0], apply_rotary(q, cos, sin, "half"))


def test_the_frequencies_move_with_to_and_survive_to_empty():
    scheme = AxialRotary(HEAD_DIM, num_axes=2, device="meta")
    assert scheme.inv_freq.is_meta and scheme.inv_freq.dtype == torch.float32
    scheme.half().to_empty(device="cpu")
    scheme.reset_parameters()
    fresh = AxialRotary(HEAD_DIM, num_axes=2)
    assert torch.equal(scheme.inv_freq, fresh.inv_freq) and torch.equal(scheme.axis_of, fresh.axis_of)
    assert scheme.state_dict() == {}
