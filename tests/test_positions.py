import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.positions import (
    default_positions,
    positions_from_documents,
    positions_from_mask,
    positions_with_offset,
    resolve_positions,
)


@given(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.integers(0, 3), st.booleans())
@settings(max_examples=50, deadline=None)
def test_mask_positions_count_real_tokens(lengths, extra, left):
    width = max(lengths) + extra
    rows = []
    for n in lengths:
        row = [1] * n + [0] * (width - n)
        rows.append(row[::-1] if left else row)
    mask = torch.tensor(rows, dtype=torch.long).reshape(len(rows), width)
    positions = positions_from_mask(mask)
    for row_mask, row_pos in zip(mask, positions):
        assert row_pos[row_mask.bool()].tolist() == list(range(int(row_mask.sum())))
        assert (row_pos[~row_mask.bool()] == 0).all()


def test_full_mask_equals_default():
    assert torch.equal(positions_from_mask(torch.ones(2, 7, dtype=torch.long))[0], default_positions(7))


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_document_positions_reset(doc_lengths):
    doc_ids = torch.cat([torch.full((n,), i) for i, n in enumerate(doc_lengths)])
    expected = torch.cat([torch.arange(n) for n in doc_lengths])
    assert torch.equal(positions_from_documents(doc_ids), expected)
    assert torch.equal(positions_from_documents(doc_ids[None].repeat(2, 1))[1], expected)


def test_single_document_equals_default():
    assert torch.equal(positions_from_documents(torch.zeros(9, dtype=torch.long)), default_positions(9))


def test_offset_positions():
    assert torch.equal(positions_with_offset(4, 0), default_positions(4))
    assert positions_with_offset(3, torch.tensor([1, 10])).tolist() == [[1, 2, 3], [10, 11, 12]]


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: positions_with_offset(3, -1), ValueError),
        (lambda: positions_with_offset(3, 1.5), TypeError),
        (lambda: positions_from_mask(torch.ones(3)), ValueError),
        (lambda: positions_from_mask(torch.ones(2, 3)), TypeError),
        (lambda: positions_from_mask(torch.full((2, 3), 2)), ValueError),
        (lambda: resolve_positions(torch.zeros(4, dtype=torch.long), 5, None), ValueError),
        (lambda: resolve_positions(torch.zeros(5), 5, None), TypeError),
    ],
)
def test_bad_positions(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.parametrize(
    "length, offset, error, match",
    [
        (3, torch.tensor([1.5, 2.0]), TypeError, r"offset must hold integers.*float32"),
        (3, torch.tensor([True]), TypeError, r"offset must hold integers.*bool"),
        (-2, 0, ValueError, r"length must be >= 0 \(the number of new tokens\), got -2"),
        (-2, torch.tensor([0, 4]), ValueError, "length must be >= 0"),
        (2.0, 0, TypeError, "length must be an int, got 2.0"),
    ],
)
def test_offset_positions_refuse_float_offsets_and_negative_lengths(length, offset, error, match):
    with pytest.raises(error, match=match):
        positions_with_offset(length, offset)
    assert positions_with_offset(0, 7).shape == (0,)
