"""Wang et al. properties: exact values on the library's sinusoidal table (REFERENCES.md) and invariants."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed import Sinusoidal
from posembed.analysis.properties import (
    first_nonmonotone_offset,
    monotonicity,
    offset_closeness,
    position_properties,
    similarity_matrices,
    symmetry_error,
    translation_invariance_error,
)
from tests.helpers import assert_close


def sinusoidal_table(dim: int, length: int = 512) -> np.ndarray:
    return Sinusoidal(dim=dim)(torch.arange(length)).double().numpy()


def formula_table(dim: int, length: int = 512) -> np.ndarray:
    """Vaswani et al. written out here, interleaved sin/cos, float64."""
    angles = np.arange(length)[:, None] / 10000 ** (np.arange(0, dim, 2) / dim)[None, :]
    table = np.empty((length, dim))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table


def test_library_table_matches_the_formula():
    assert_close(
        torch.from_numpy(sinusoidal_table(768)), torch.from_numpy(formula_table(768)), atol=1e-4, rtol=0
    )  # fp32 angles up to 511 rad


@pytest.mark.parametrize("make", [sinusoidal_table, formula_table], ids=["posembed.Sinusoidal", "formula"])
def test_sinusoidal_d768_reference_values(make):
    dot, _ = similarity_matrices(make(768))
    found = position_properties(dot, "dot")
    assert found.phi_0 == pytest.approx(384.0, abs=1e-5)
    assert found.phi_1 == pytest.approx(373.77, abs=5e-3)
    assert found.first_nonmonotone_offset == 43
    assert found.monotonicity_local == pytest.approx(-1.0, abs=1e-12)
    assert found.monotonicity_all == pytest.approx(-0.984, abs=5e-4)
    assert found.translation_invariance_error < 1e-6
    assert found.symmetry_error == 0.0


@pytest.mark.parametrize(("dim", "offset"), [(128, 11), (64, 5)])
def test_sinusoidal_first_nonmonotone_offset_by_width(dim, offset):
    dot, _ = similarity_matrices(sinusoidal_table(dim))
    assert first_nonmonotone_offset(offset_closeness(dot)) == offset


def test_phi_is_the_cosine_sum_at_every_offset():
    dot, _ = similarity_matrices(formula_table(768))
    omegas = 1 / 10000 ** (np.arange(0, 768, 2) / 768)
    expected = np.cos(np.arange(512)[:, None] * omegas[None, :]).sum(axis=1)
    assert_close(torch.from_numpy(offset_closeness(dot)), torch.from_numpy(expected), atol=1e-9, rtol=1e-9)


def test_similarity_matches_torch():
    table = torch.randn(40, 12, dtype=torch.float64)
    dot, cosine = similarity_matrices(table.numpy())
    assert_close(torch.from_numpy(dot), table @ table.T)
    expected = torch.nn.functional.cosine_similarity(table[:, None, :], table[None, :, :], dim=-1)
    assert_close(torch.from_numpy(cosine), expected)


def test_asymmetric_and_shift_dependent_matrices_are_detected():
    rng = np.random.default_rng(0)
    noise = rng.normal(size=(64, 64))
    assert symmetry_error(noise) > 0.5
    assert translation_invariance_error(noise) > 0.7
    toeplitz = np.fromfunction(lambda i, j: np.exp(-np.abs(i - j) / 5.0), (64, 64))
    assert translation_invariance_error(toeplitz) < 1e-12
    assert monotonicity(offset_closeness(toeplitz)) == pytest.approx(-1.0)


@settings(max_examples=25, deadline=None)
@given(st.integers(4, 40), st.integers(1, 16), st.floats(0.1, 10.0), st.integers(0, 2**16))
def test_properties_of_any_table(length, width, scale, seed):
    table = np.random.default_rng(seed).normal(size=(length, width))
    dot, cosine = similarity_matrices(table)
    assert symmetry_error(dot) < 1e-12 and symmetry_error(cosine) < 1e-12
    assert_close(torch.from_numpy(np.diag(cosine).copy()), torch.ones(length, dtype=torch.float64))
    # cosine closeness ignores the scale of the table; the dot product scales with its square
    scaled_dot, scaled_cos = similarity_matrices(scale * table)
    assert_close(torch.from_numpy(scaled_cos), torch.from_numpy(cosine), atol=1e-9, rtol=1e-9)
    assert_close(torch.from_numpy(scaled_dot), torch.from_numpy(scale**2 * dot), atol=1e-9, rtol=1e-9)


def test_bad_input():
    with pytest.raises(ValueError, match=r"\(T, C\) table with T >= 2.*\(1, 4\)"):
        similarity_matrices(np.ones((1, 4)))
    with pytest.raises(ValueError, match=r"square.*\(3, 4\)"):
        position_properties(np.ones((3, 4)), "dot")
    with pytest.raises(ValueError, match="last=1"):
        monotonicity(np.array([1.0, 0.5]))
