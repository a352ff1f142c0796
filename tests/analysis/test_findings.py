"""inspect's words follow its numbers: each wording rule on both sides of its threshold."""

from __future__ import annotations

import pytest

from posembed.analysis import findings
from posembed.analysis.findings import (
    CLOSE_DIMENSION_SHARE,
    CLOSE_GAP,
    CLOSE_R2,
    PARTLY_GAP,
    SEGMENT_LARGE,
    SEGMENT_SMALL,
    segments_finding,
    sinusoid_verdict,
    spectrum_finding,
)  # fmt: skip

EPS = 1e-6


def _fit(r2: float, shuffled: float = 0.0, dims: int = 16) -> dict:
    return {"r2": r2, "r2_shuffled_rows": shuffled, "num_basis_frequencies": 8, "dimensions_with_r2_above_0.9": dims}


def test_the_reported_case_is_partly_not_close():
    """Issue 35: R² 0.63 with 25 of 384 dimensions above 0.9 was called close to sinusoidal."""
    text, _ = spectrum_finding(_fit(0.63, 0.01, 25), 384)
    assert text.startswith("The table is partly sinusoidal: R² 0.63") and "25 of 384" in text
    assert "'close' needs R² ≥ 0.9, at least 50% of the dimensions above 0.9" in text


@pytest.mark.parametrize("r2, expected", [(CLOSE_R2, "close to sinusoidal"), (CLOSE_R2 - EPS, "partly sinusoidal")])
def test_close_needs_the_r2(r2, expected):
    assert sinusoid_verdict(_fit(r2, dims=16), 16) == expected


@pytest.mark.parametrize("dims, expected", [(8, "close to sinusoidal"), (7, "partly sinusoidal")])
def test_close_needs_half_the_dimensions(dims, expected):
    assert CLOSE_DIMENSION_SHARE == 0.5
    assert sinusoid_verdict(_fit(0.95, dims=dims), 16) == expected


@pytest.mark.parametrize(
    "shuffled, expected", [(0.95 - CLOSE_GAP, "close to sinusoidal"), (0.95 - CLOSE_GAP + 0.01, "partly sinusoidal")]
)
def test_close_needs_the_gap_over_shuffled_rows(shuffled, expected):
    assert sinusoid_verdict(_fit(0.95, shuffled, 16), 16) == expected


@pytest.mark.parametrize(
    "shuffled, expected", [(0.5 - PARTLY_GAP, "partly sinusoidal"), (0.5 - PARTLY_GAP + 0.01, "not sinusoidal")]
)
def test_partly_needs_its_gap(shuffled, expected):
    assert sinusoid_verdict(_fit(0.5, shuffled, 0), 16) == expected
    text, _ = spectrum_finding(_fit(0.5, shuffled, 0), 16)
    assert text.startswith(f"The table is {expected}:")
    assert ("'partly' needs R² 0.2 above the shuffled rows" in text) == (expected == "not sinusoidal")


def _segments(position: float | None, token: float) -> str:
    return segments_finding(
        {"segment_to_position_ratio": position, "segment_to_token_ratio": token, "segment_difference_norm": 1.0}
    )[0]


def test_the_reported_case_is_not_called_small_against_positions():
    """Issue 35: 'segment vectors are small' beside 1x the mean position norm."""
    text = _segments(1.0, 0.3)
    assert text.startswith("Segment vectors are small against tokens but comparable to positions: 1x the mean position")


@pytest.mark.parametrize(
    "token, words",
    [
        (SEGMENT_SMALL - EPS, "small against tokens"),
        (SEGMENT_SMALL, "comparable to tokens"),
        (SEGMENT_LARGE, "comparable to tokens"),
        (SEGMENT_LARGE + EPS, "larger than tokens"),
    ],
)
def test_size_against_tokens_either_side_of_each_threshold(token, words):
    assert _segments(None, token).startswith(f"Segment vectors are {words}: ")


@pytest.mark.parametrize(
    "position, words",
    [
        (SEGMENT_SMALL - EPS, "small against tokens and positions"),
        (SEGMENT_SMALL, "small against tokens but comparable to positions"),
        (SEGMENT_LARGE + EPS, "small against tokens but larger than positions"),
    ],
)
def test_size_against_positions_either_side(position, words):
    assert _segments(position, 0.1).startswith(f"Segment vectors are {words}: ")


def test_the_sentence_states_its_thresholds():
    assert '("small" below 0.5x, "larger" above 2x)' in _segments(1.0, 1.0)
    assert findings.DIMENSION_R2 == 0.9
