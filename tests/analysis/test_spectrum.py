"""Spectra and the sinusoidal-basis fit, checked against numpy's own least squares."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posembed import Sinusoidal
from posembed.analysis.spectrum import dimension_spectrum, sinusoid_fit, sinusoidal_basis
from tests.helpers import assert_close


def test_dominant_frequency_of_pure_tones():
    t = np.arange(128)
    table = np.stack([np.sin(2 * np.pi * 4 * t / 128), np.cos(2 * np.pi * 10 * t / 128) + 3.0], axis=1)
    frequencies, power, dominant = dimension_spectrum(table)
    assert dominant.tolist() == [4 / 128, 10 / 128]
    assert_close(torch.from_numpy(power), torch.from_numpy(np.abs(np.fft.rfft(table - table.mean(0), axis=0)) ** 2))
    assert frequencies.shape == (65,)


def test_fit_matches_numpy_lstsq():
    table = np.random.default_rng(0).normal(size=(96, 5)).cumsum(axis=0)  # smooth-ish random walks
    fit = sinusoid_fit(table, num_frequencies=6)
    basis = sinusoidal_basis(96, 6)
    coef, *_ = np.linalg.lstsq(basis, table, rcond=None)
    residual = table - basis @ coef
    centred = table - table.mean(axis=0)
    per = 1 - (residual**2).sum(0) / (centred**2).sum(0)
    assert_close(torch.from_numpy(fit.r2_per_dimension), torch.from_numpy(per), atol=1e-9, rtol=1e-9)
    assert fit.r2 == pytest.approx(1 - (residual**2).sum() / (centred**2).sum(), abs=1e-9)


def test_basis_columns_fit_exactly_and_noise_does_not():
    basis = sinusoidal_basis(128, 8)
    assert sinusoid_fit(2.0 * basis[:, 1:] - 1.0, num_frequencies=8).r2 == pytest.approx(1.0, abs=1e-9)
    noise = sinusoid_fit(np.random.default_rng(0).normal(size=(128, 32)), num_frequencies=8)
    assert noise.r2 < 0.3
    assert abs(noise.r2 - noise.r2_shuffled) < 0.08


def test_sinusoidal_table_beats_its_shuffled_control():
    table = Sinusoidal(dim=64)(torch.arange(256)).double().numpy()
    fit = sinusoid_fit(table, num_frequencies=16)
    assert fit.r2 > 0.6 > 0.3 > fit.r2_shuffled


def test_bad_input():
    with pytest.raises(ValueError, match=r"num_frequencies must be in 1..7 for 16 positions, got 8"):
        sinusoidal_basis(16, 8)
    with pytest.raises(ValueError, match=r"T >= 4, got shape \(3,\)"):
        dimension_spectrum(np.ones(3))
