"""AxialRotary's settings (``layout``, ``axis_order``, ``frequency_order``, ``layout_span``, ``num_axes``)
against the axial vision rotaries of transformers 5.24 (``rope_type="axial"``): cos/sin and full q/k
tensors rotated by the function the tower's attention calls, at a 4 x 5 patch grid.

The modules, their sub-configs and rotation functions are the catalogue's (tests/interop/rope_catalogue.py);
the position form each forward reads is found by :func:`tests.interop.rope_catalogue_compare.axial_call`.
"""

from __future__ import annotations

import pytest
import torch

from posembed.schemes.rotary.axial import AxialRotary

pytest.importorskip("transformers")

from tests.interop import rope_catalogue  # noqa: E402
from tests.interop import rope_catalogue_compare as compare

#: one rotary class per formula -> the settings that make AxialRotary equal to it
FORMULAS = {
    "Qwen2VLVisionRotaryEmbedding": dict(layout="half"),
    "Glm4vVisionRotaryEmbedding": dict(layout="half"),
    "Sam2VideoVisionRotaryEmbedding": dict(layout="interleaved"),
    "Sam3ViTRotaryEmbedding": dict(layout="interleaved"),
    "Gemma4VisionRotaryEmbedding": dict(layout="half", layout_span="axis"),
    "Step3p7VisionRotaryEmbedding": dict(layout="half", axis_order=(1, 0)),
    "Inkling2VisionRotaryEmbedding": dict(layout="interleaved", axis_order=(1, 0)),
    "Kimi_K25VisionRotaryEmbedding": dict(layout="half", axis_order=(1, 0), frequency_order="interleaved"),
    "MiniMaxM3VLVisionRotaryEmbedding": dict(layout="half", num_axes=3),
}


def _pair(rotary: str):
    return next(p for p in rope_catalogue.catalogue() if p.rotary_class == rotary)


@pytest.mark.parametrize("rotary_class", list(FORMULAS))
def test_axial_settings_equal_transformers(rotary_class):
    pair = _pair(rotary_class)
    module, _, sub, rotary = compare.default_reference(pair)
    settings = FORMULAS[rotary_class]
    out, form, coords = compare.axial_call(rotary, settings.get("num_axes", 2))
    cos, sin = compare.their_cos_sin(out)
    head_dim = getattr(sub, "head_dim", None) or cos.shape[-1]
    ours = AxialRotary(head_dim, base=sub.rope_parameters["rope_theta"], angles="fp32", **settings)
    our_cos, our_sin = ours.cos_sin(coords)
    assert compare.values_match(cos, our_cos) and compare.values_match(sin, our_sin)
    q, k = torch.randn(3, coords.shape[0], head_dim), torch.randn(3, coords.shape[0], head_dim)
    their_q, their_k = compare.their_rotation(getattr(module, pair.apply), q, k, out, form, cos.shape[-1])
    our_q, our_k = ours(q[None], k[None], coords)
    torch.testing.assert_close(our_q[0], their_q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(our_k[0], their_k, rtol=1e-5, atol=1e-5)
    plain = AxialRotary(head_dim, base=sub.rope_parameters["rope_theta"], angles="fp32", layout=settings["layout"],
                        num_axes=settings.get("num_axes", 2))  # fmt: skip
    if len(settings) > 1 and "num_axes" not in settings:  # the settings are what make it equal
        assert not torch.allclose(plain(q[None], k[None], coords)[0][0], their_q, atol=1e-3)


def test_bad_axial_settings_are_refused():
    with pytest.raises(ValueError, match=r"axis_order must be a permutation of range\(num_axes=2\); got \(0, 0\)"):
        AxialRotary(8, axis_order=(0, 0))
    with pytest.raises(ValueError, match="frequency_order must be one of .* got 'zigzag'"):
        AxialRotary(8, frequency_order="zigzag")
    with pytest.raises(ValueError, match="layout_span must be one of .* got 'row'"):
        AxialRotary(8, layout_span="row")
    with pytest.raises(ValueError, match="frequency_order='interleaved' has no blocks"):
        AxialRotary(8, layout_span="axis", frequency_order="interleaved")
    text = repr(AxialRotary(8, axis_order=(1, 0), frequency_order="interleaved"))
    assert "axis_order=(1, 0), frequency_order='interleaved'" in text


def test_layout_span_axis_keeps_the_norm_and_passes_the_rest():
    rope = AxialRotary(10, axis_dim=4, layout="half", layout_span="axis")
    q = torch.randn(1, 2, 6, 10)
    coords = torch.randint(0, 9, (6, 2))
    out, _ = rope(q, q, coords)
    torch.testing.assert_close(out.norm(dim=-1), q.norm(dim=-1))
    assert torch.equal(out[..., 8:], q[..., 8:])
