"""Rotary input checks: each names the offending value and the limit."""

import pytest
import torch

from posembed.schemes.rotary.checks import check_cache_range, check_rotary_dim, resolve_qk_positions
from tests.helpers import assert_close


def test_query_and_key_positions_default_to_arange_and_broadcast_one_row():
    q, k = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 5, 4)
    q_pos, k_pos = resolve_qk_positions(q, q, None, None)
    assert q_pos is k_pos
    assert_close(q_pos, torch.arange(3), atol=0, rtol=0)
    _, k_pos = resolve_qk_positions(q, k, torch.arange(3)[None], torch.arange(5))
    assert_close(k_pos, torch.arange(5), atol=0, rtol=0)


@pytest.mark.parametrize(
    "q_ids, k_ids, match",
    [
        (
            torch.zeros(3, 3, dtype=torch.long),
            None,
            r"position_ids has shape \(3, 3\); expected \(3,\), \(1, 3\) or \(2, 3\)",
        ),
        (None, torch.zeros(4, 5, dtype=torch.long), r"k_position_ids has shape \(4, 5\).*k of shape \(2, 1, 5, 4\)"),
        (torch.zeros(2, 1, 3, dtype=torch.long), None, r"position_ids has shape \(2, 1, 3\)"),
        (None, None, "k has length 5 but q has length 3; pass k_position_ids"),
    ],
)
def test_mismatched_positions_name_both_shapes(q_ids, k_ids, match):
    q, k = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 5, 4)
    with pytest.raises(ValueError, match=match):
        resolve_qk_positions(q, k, q_ids, k_ids)


def test_cache_range_and_rotary_dim():
    check_cache_range(0, 0)
    with pytest.raises(ValueError, match="length must be >= 0, got -1"):
        check_cache_range(-1, 0)
    with pytest.raises(TypeError, match="offset must be an int, got True"):
        check_cache_range(1, True)
    assert check_rotary_dim(None, 8) == 8
    with pytest.raises(ValueError, match="rotary_dim=10 exceeds head_dim=8"):
        check_rotary_dim(10, 8)
