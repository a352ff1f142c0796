"""Re-rotating cached keys equals rotating the unrotated keys afresh, for every rotary variant."""

from __future__ import annotations

import pytest
import torch

from posembed.schemes.rotary.longrope import LongRoPERotary
from posembed.schemes.rotary.rerotate import rerotate_keys, rotation_between
from posembed.schemes.rotary.rope import RotaryEmbedding
from posembed.schemes.rotary.scaling import (
    DynamicNTKRotary,
    LinearScalingRotary,
    Llama3Rotary,
    NTKAwareRotary,
    ProportionalRotary,
)  # fmt: skip
from posembed.schemes.rotary.xpos import XPos
from posembed.schemes.rotary.yarn import YaRNRotary
from tests.helpers import assert_close

D = 16
ATOL = 2e-5  # fp32: one ulp of angles up to ~60 rad, times |k|


def _variants(layout: str) -> dict[str, RotaryEmbedding]:
    common = {"layout": layout}
    return {
        "rope": RotaryEmbedding(D, **common),
        "rope_partial": RotaryEmbedding(D, rotary_dim=8, **common),
        "linear": LinearScalingRotary(D, factor=4.0, **common),
        "ntk": NTKAwareRotary(D, factor=4.0, **common),
        "dynamic_ntk": DynamicNTKRotary(D, factor=4.0, original_max_len=16, **common),
        "yarn": YaRNRotary(D, factor=4.0, original_max_len=16, **common),
        "llama3": Llama3Rotary(D, factor=8.0, original_max_len=16, base=500000.0, **common),
        "longrope": LongRoPERotary(
            D,
            short_factor=[1.0 + i / 10 for i in range(D // 2)],
            long_factor=[1.0 + i for i in range(D // 2)],
            original_max_len=16,
            factor=4.0,
            **common,
        ),  # fmt: skip
        "proportional": ProportionalRotary(D, rope_fraction=0.5, factor=2.0, **common),
    }


def _rotated(scheme: RotaryEmbedding, k: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return scheme(k, k, position_ids=positions)[1]


CASES = [(layout, name) for layout in ("half", "interleaved") for name in _variants("half")]


@pytest.mark.parametrize(("layout", "name"), CASES)
@pytest.mark.parametrize(
    ("old", "new"),
    [
        (torch.tensor([0, 1, 9, 10, 11, 12]), torch.arange(6)),  # attention sinks: evict 2..8, shift down
        (torch.arange(20, 26), torch.arange(3, 9)),  # across the trained length (16) of dynamic / longrope
        (torch.arange(6), torch.arange(40, 46)),  # forwards
    ],
)
def test_rerotate_equals_fresh_rotation(layout, name, old, new):
    scheme = _variants(layout)[name]
    k = torch.randn(2, 3, 6, D)
    moved = rerotate_keys(_rotated(scheme, k, old), scheme, old, new)
    assert_close(moved, _rotated(scheme, k, new), atol=ATOL)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_per_row_positions(layout):
    scheme = YaRNRotary(D, factor=4.0, original_max_len=16, layout=layout)
    k = torch.randn(2, 3, 5, D)
    old = torch.stack([torch.arange(5) + 10, torch.tensor([0, 3, 4, 8, 30])])
    new = torch.stack([torch.arange(5), torch.arange(5) + 1])
    moved = rerotate_keys(_rotated(scheme, k, old), scheme, old, new)
    assert_close(moved, _rotated(scheme, k, new), atol=ATOL)


@pytest.mark.parametrize(
    "new_scheme",
    [
        YaRNRotary(D, factor=4.0, original_max_len=16),  # scale switch: plain -> YaRN (attention factor too)
        LinearScalingRotary(D, factor=2.0),
        RotaryEmbedding(D, rotary_dim=8),  # another width: unrotate, then rotate
        RotaryEmbedding(D, layout="interleaved"),  # another layout
    ],
    ids=["yarn", "linear", "partial", "interleaved"],
)
def test_scheme_switch_equals_rotation_by_new_scheme(new_scheme):
    old_scheme = RotaryEmbedding(D)
    k = torch.randn(1, 2, 7, D)
    old, new = torch.arange(7) + 3, torch.arange(7)
    moved = rerotate_keys(_rotated(old_scheme, k, old), old_scheme, old, new, new_scheme=new_scheme)
    assert_close(moved, _rotated(new_scheme, k, new), atol=ATOL)


def test_same_positions_is_identity_and_norm_kept():
    scheme = RotaryEmbedding(D)
    k = torch.randn(1, 1, 4, D)
    pos = torch.arange(4) + 100
    assert_close(rerotate_keys(k, scheme, pos, pos), k)
    cos, sin = rotation_between(scheme, pos, pos + 3)
    assert_close(cos * cos + sin * sin, torch.ones_like(cos))


def test_xpos_is_refused_with_reason():
    with pytest.raises(ValueError, match="not a rotation"):
        rerotate_keys(torch.randn(1, 1, 3, D), XPos(D), torch.arange(3), torch.arange(3))


def test_bad_arguments():
    scheme = RotaryEmbedding(D)
    k = torch.randn(1, 1, 3, D)
    with pytest.raises(ValueError, match=r"old_positions has shape \(4,\)"):
        rerotate_keys(k, scheme, torch.arange(4), torch.arange(3))
    with pytest.raises(ValueError, match="head_dim"):
        rerotate_keys(k, scheme, torch.arange(3), torch.arange(3), new_scheme=RotaryEmbedding(8))
    with pytest.raises(TypeError, match="rotary scheme"):
        rerotate_keys(k, object(), torch.arange(3), torch.arange(3))
