"""posembed.interop.extend.methods: the table-growing functions, on small known tables."""

import re

import pytest
import torch

from posembed.interop.extend.methods import (
    KEEPS_TRAINED_ROWS,
    METHODS,
    copy_rows,
    extend_table,
    grouped_rows,
    hierarchical_rows,
    interpolate_rows,
)


def test_copy_tiles_exactly():
    table = torch.randn(5, 3)
    out = copy_rows(table, 12)
    assert out.shape == (12, 3)
    for p in range(12):
        assert torch.equal(out[p], table[p % 5])


def test_interpolate_keeps_ends_and_is_linear_on_a_line():
    line = torch.linspace(0, 1, 9)[:, None].repeat(1, 4)  # each column is a straight line
    out = interpolate_rows(line, 33)
    torch.testing.assert_close(out[:, 0], torch.linspace(0, 1, 33), atol=1e-7, rtol=0)
    table = torch.randn(9, 4)
    out = interpolate_rows(table, 25)
    assert torch.equal(out[0], table[0]) and torch.equal(out[-1], table[-1])
    torch.testing.assert_close(out[3], table[1], atol=1e-6, rtol=0)  # 3 * 8 / 24 = 1 exactly


def test_hierarchical_first_rows_exact_and_formula():
    table = torch.randn(6, 4, dtype=torch.float64)
    out = hierarchical_rows(table, 36)
    assert torch.equal(out[:6], table)
    u = (table - 0.4 * table[0]) / 0.6
    for p in range(36):
        torch.testing.assert_close(out[p], 0.4 * u[p // 6] + 0.6 * u[p % 6], atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="at most L\\*\\*2 = 36"):
        hierarchical_rows(table, 37)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_dtype_kept_and_bad_sizes(method):
    table = torch.randn(8, 2).to(torch.bfloat16)
    assert METHODS[method](table, 20).dtype == torch.bfloat16
    for bad in (8, 3, 10.0, True):
        with pytest.raises(ValueError, match="larger than the 8 trained rows"):
            METHODS[method](table, bad)


def test_extend_table_keeps_offset_rows():
    table = torch.randn(10, 3)
    out = extend_table(table, 16, "copy", offset=2)
    assert out.shape == (18, 3)
    assert torch.equal(out[:10], table) and torch.equal(out[10:], table[2:])
    with pytest.raises(
        ValueError,
        match="unknown extension method 'alibi'; choose one of copy, interpolate, hierarchical, recurrent, grouped",
    ):
        extend_table(table, 16, "alibi")


def test_recurrent_is_longembeds_p_mod_l_which_is_copy():
    table = torch.randn(7, 3)
    out = METHODS["recurrent"](table, 30)
    assert torch.equal(out, copy_rows(table, 30))
    assert all(torch.equal(out[p], table[p % 7]) for p in range(30))


def test_grouped_is_longembeds_floor_p_over_s():
    table = torch.randn(8, 3)
    for to, group in ((16, 2), (17, 3), (64, 8), (9, 2)):
        out = grouped_rows(table, to)
        assert out.shape == (to, 3)
        for p in range(to):  # LongEmbed: pid -> floor(pid / s), s = ceil(L_t / L_o)
            assert torch.equal(out[p], table[p // group])
    assert not torch.equal(grouped_rows(table, 16)[:8], table)  # short inputs change


def test_which_methods_keep_the_trained_rows():
    table = torch.randn(8, 4)
    for method in METHODS:
        keeps = torch.equal(METHODS[method](table, 24)[:8], table)
        assert keeps == (method in KEEPS_TRAINED_ROWS), method


# ---------------------------------------------------------------------- bounds and defaults, exactly


def test_interpolate_matches_the_hand_formula_at_every_row_including_the_last_interval():
    table = torch.randn(9, 4, dtype=torch.float64)
    out = interpolate_rows(table, 25)
    for p in range(25):  # x = p * 8 / 24 = p / 3, between rows floor(x) and floor(x) + 1
        low, frac = divmod(p, 3)
        expected = table[low] if frac == 0 else table[low] * (1 - frac / 3) + table[low + 1] * (frac / 3)
        torch.testing.assert_close(out[p], expected, atol=1e-12, rtol=0)
    # p = 23 reads x = 7 2/3, inside the last interval (rows 7 and 8)
    torch.testing.assert_close(out[23], table[7] / 3 + 2 * table[8] / 3, atol=1e-12, rtol=0)


def test_the_fewest_trained_rows_each_method_takes():
    one = torch.tensor([[1.5, -2.0]])
    assert torch.equal(copy_rows(one, 3), one.repeat(3, 1))
    assert torch.equal(grouped_rows(one, 4), one.repeat(4, 1))
    with pytest.raises(ValueError, match="at least 2 trained rows, the table has 1"):
        interpolate_rows(one, 3)
    two = torch.tensor([[0.0, 10.0], [3.0, 4.0]])
    # two rows: the one interval, x = p / 3
    expected = torch.tensor([[0.0, 10.0], [1.0, 8.0], [2.0, 6.0], [3.0, 4.0]])
    torch.testing.assert_close(interpolate_rows(two, 4), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_tables_that_are_not_2d_are_refused(method):
    for shape in ((8,), (8, 2, 2)):
        with pytest.raises(ValueError, match=r"must be 2-D \(L, C\), got shape " + re.escape(str(shape))):
            METHODS[method](torch.zeros(shape), 20)


def test_hierarchical_alpha_must_lie_strictly_between_0_and_1():
    table = torch.randn(4, 2, dtype=torch.float64)
    for alpha in (0.0, 1.0, 1.5, -0.2):
        with pytest.raises(ValueError, match=rf"alpha must lie in \(0, 1\), got {alpha}"):
            hierarchical_rows(table, 10, alpha=alpha)
    out = hierarchical_rows(table, 10, alpha=0.25)
    u = (table - 0.25 * table[0]) / 0.75
    torch.testing.assert_close(out[9], 0.25 * u[2] + 0.75 * u[1], atol=1e-12, rtol=0)


def test_extend_table_offset_bounds_and_default():
    table = torch.randn(10, 3)
    assert torch.equal(extend_table(table, 15, "copy"), copy_rows(table, 15))  # offset 0 by default
    assert torch.equal(extend_table(table, 15, "copy", offset=0), copy_rows(table, 15))
    out = extend_table(table, 4, "copy", offset=9)  # the last row is the one trained position
    assert torch.equal(out, torch.cat([table, table[9:].repeat(3, 1)]))
    for offset in (10, 11, -1):
        with pytest.raises(ValueError, match=rf"^offset {offset} must lie in 0\.\.9 for a table of 10 rows$"):
            extend_table(table, 20, "copy", offset=offset)
