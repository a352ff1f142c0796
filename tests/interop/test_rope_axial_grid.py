"""A rotary that rotates its own patch grid (Llama 4's vision tower) read as an axial RoPE at the coordinates its model
uses (posembed.interop.rope.axial.model_grid_axial), and the coordinates helper
(posembed.schemes.positions.patch_grid_positions).

Llama 4's ``Llama4VisionRotaryEmbedding.forward`` takes no positions: it returns the complex table it built at init
for the config's ``image_size // patch_size`` grid, patches at ``(row + 1, column + 1)``, its CLS token (appended
last) at no rotation. Full-tensor parity with that table and with q·k through ``vision_apply_rotary_emb``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.schemes.positions import patch_grid_positions

transformers = pytest.importorskip("transformers")

from posembed.interop.rope.axial import AxialSettings, model_grid_axial  # noqa: E402
from posembed.interop.rope.config import rotary_from_hf_config  # noqa: E402
from posembed.schemes.rotary.axial import AxialRotary  # noqa: E402
from tests.interop import rope_catalogue as catalogue  # noqa: E402
from tests.interop import rope_catalogue_compare as compare  # noqa: E402

#: a small Llama 4 vision tower: a 4 x 4 grid of patches, 4 heads of 16 channels
SMALL = {"image_size": 56, "patch_size": 14, "hidden_size": 64, "num_attention_heads": 4}


def _module():
    from transformers.models.llama4 import modeling_llama4

    return modeling_llama4


def test_llama4_vision_is_read_as_its_axial_rope_at_its_own_grid():
    config = transformers.CONFIG_MAPPING["llama4_vision_model"]()
    found = model_grid_axial(config)
    assert found == AxialSettings(2, 24, "interleaved", (1, 0), "blocks", "head", 48, (32, 32), 1, "last")
    assert torch.equal(found.positions(), patch_grid_positions(32, 32, offset=1, cls_token="last"))
    scheme = rotary_from_hf_config(config, angles="fp32")
    assert isinstance(scheme, AxialRotary) and (scheme.head_dim, scheme.axis_dim, scheme.axis_order) == (48, 24, (1, 0))
    assert scheme.layout == "interleaved"


def test_rope_check_compares_it_with_its_own_table():
    """``rope check`` reads the frequencies off the module's own table (its forward takes no positions, and the
    tower has no init function to call), and a wrong reading would show."""
    from posembed.interop.rope_check.check import check_rope_config, format_report

    report = check_rope_config(transformers.Llama4VisionConfig(**SMALL).to_dict())
    (layer,) = report.layers
    assert layer.comparisons and all(c.equal for c in layer.comparisons), layer.comparison_note
    assert layer.settings.axial.grid is not None
    assert "rotates a 4 x 4 patch grid at (row + 1, column + 1), the class token at (0, 0), last" in format_report(
        report
    )


def test_the_small_tower_is_exact_in_full_tensors():
    config = transformers.Llama4VisionConfig(**SMALL)
    module = _module()
    table = module.Llama4VisionRotaryEmbedding(config)(torch.zeros(1, 3, 56, 56))  # (17, 1, 8) complex
    found = model_grid_axial(config)
    assert (found.grid, found.grid_offset, found.cls_token, found.head_dim) == ((4, 4), 1, "last", 16)
    at = found.positions()  # (17, 2): the 16 patches, then the CLS token at (0, 0)
    scheme = rotary_from_hf_config(config, angles="fp32")
    cos, sin = scheme.cos_sin(at)
    assert torch.allclose(cos, table.real[:, 0], rtol=0, atol=1e-6) and torch.allclose(
        sin, table.imag[:, 0], rtol=0, atol=1e-6
    )
    q, k = torch.randn(2, 1, 17, 4, 16).unbind(0)  # (B, T, H, D) as its attention hands them
    tq, tk = module.vision_apply_rotary_emb(q, k, freqs_ci=table)
    oq, ok = scheme(q.transpose(1, 2), k.transpose(1, 2), position_ids=at)
    torch.testing.assert_close(oq.transpose(1, 2), tq, rtol=0, atol=1e-5)
    torch.testing.assert_close(ok.transpose(1, 2), tk, rtol=0, atol=1e-5)


@pytest.mark.parametrize("rotary", ["Llama4VisionRotaryEmbedding"])
def test_the_catalogue_calls_it_as_its_model_does_and_finds_it_exact(rotary):
    pairs = [pair for pair in catalogue.catalogue() if pair.rotary_class == rotary]
    assert {pair.model_type for pair in pairs} == {"llama4", "llama4_vision_model"}
    for pair in pairs:
        assert compare.verdict(pair, "default") == (compare.EXACT, "")


@pytest.mark.parametrize(("field", "value", "verdict"), [
    ("grid_offset", 0, compare.VALUES), ("cls_token", "first", compare.VALUES),
    ("axis_order", (0, 1), compare.LAYOUT),  # the same values per token, on the other pairs: q·k differs
])  # fmt: skip
def test_the_catalogue_sees_wrong_coordinates_or_order(monkeypatch, field, value, verdict):
    """The harness compares at the coordinates posembed states: a wrong offset, class-token place or axis order
    fails."""
    import posembed.interop.rope.width as width

    pair = next(pair for pair in catalogue.catalogue() if pair.key == "llama4_vision_model/Llama4VisionRotaryEmbedding")
    real = width.model_grid_axial
    monkeypatch.setattr(width, "model_grid_axial", lambda config: real(config)._replace(**{field: value}))
    assert compare.verdict(pair, "default")[0] == verdict


@pytest.mark.parametrize("model_type", ["efficientloftr", "eomt_dinov3", "llama"])
def test_other_modules_have_no_grid_reading(model_type):
    """EfficientLoFTR's feature map and EoMT-DINOv3's pixel centres give no fixed integer grid; Llama's rotary takes
    positions."""
    assert model_grid_axial(transformers.CONFIG_MAPPING[model_type]()) is None


def test_positions_are_none_where_the_caller_passes_them():
    assert AxialSettings(2, 8, "half", (0, 1), "blocks", "head", 16).positions() is None


def test_patch_grid_positions_places_the_class_token():
    assert patch_grid_positions(1, 2).tolist() == [[0, 0], [0, 1]]
    assert patch_grid_positions(1, 2, offset=1, cls_token="first").tolist() == [[0, 0], [1, 1], [1, 2]]
    assert patch_grid_positions(2, 1, offset=2, cls_token="last").tolist() == [[2, 2], [3, 2], [0, 0]]
    assert patch_grid_positions(2, 3).dtype == torch.long


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 3), st.sampled_from([None, "first", "last"]))
@settings(max_examples=40, deadline=None)
def test_patch_grid_positions_is_the_offset_grid(height, width, offset, cls_token):
    found = patch_grid_positions(height, width, offset=offset, cls_token=cls_token)
    patches = found[1:] if cls_token == "first" else found[:-1] if cls_token == "last" else found
    assert found.shape == (height * width + (cls_token is not None), 2)
    rows, columns = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    assert torch.equal(patches, torch.stack([rows.flatten(), columns.flatten()], -1) + offset)
    if cls_token is not None:
        assert found[0 if cls_token == "first" else -1].tolist() == [0, 0]


@pytest.mark.parametrize(("args", "kwargs", "error", "message"), [
    ((0, 2), {}, ValueError, "height must be positive, got 0"),
    ((2, -1), {}, ValueError, "width must be positive, got -1"),
    ((True, 2), {}, TypeError, "height must be an int, got True"),
    ((2, 2.0), {}, TypeError, "width must be an int, got 2.0"),
    ((2, 2), {"offset": -1}, ValueError, "offset must be >= 0, got -1"),
    ((2, 2), {"offset": 1.5}, TypeError, "offset must be an int, got 1.5"),
    ((2, 2), {"cls_token": "middle"}, ValueError,
     r"cls_token must be one of \('first', 'last'\) or None, got 'middle'"),
])  # fmt: skip
def test_patch_grid_positions_refuses_bad_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        patch_grid_positions(*args, **kwargs)
