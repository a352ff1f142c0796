""" "Is it sinusoidal?": spectra of a position table and its best fit from a sinusoidal basis.

Vaswani et al. (2017) build positions from ``sin``/``cos`` of ``pos * w_i`` with geometric
frequencies ``w_i = 10000^(-2i/d)``. For a learned table we ask two things:

- the *spectrum*: the power of each dimension's FFT across positions (mean removed), and each
  dimension's dominant frequency;
- the *fit*: the least-squares fit of every column of the table from a sinusoidal basis
  ``[1, sin(pos w_1), cos(pos w_1), ..., sin(pos w_K), cos(pos w_K)]`` with ``K`` geometric frequencies
  between one period over the table and two positions per period (scikit-learn ``LinearRegression``).
  R^2 is reported overall (``1 - SS_res / SS_tot`` summed over all columns), per column, and
  for the same table with its rows shuffled (the chance level of a basis of ``2K + 1`` functions
  fitting ``T`` points).

Example:
    >>> basis = sinusoidal_basis(64, 8)
    >>> basis.shape
    (64, 17)
    >>> fit = sinusoid_fit(basis[:, 1:5] * 3.0 + 1.0, num_frequencies=8)
    >>> round(fit.r2, 9)
    1.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["dimension_spectrum", "sinusoidal_basis", "SinusoidFit", "sinusoid_fit"]

DEFAULT_FREQUENCIES = 32


def dimension_spectrum(table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Power spectrum of each dimension across positions.

    Returns:
        ``(frequencies, power, dominant)``: frequencies in cycles per position ``(F,)``,
        power ``(F, C)`` (``|rfft|^2`` of each mean-removed column), and each column's dominant
        non-zero frequency ``(C,)``.

    Shape:
        table ``(T, C)``; ``F = T // 2 + 1``.
    """
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] < 4:
        raise ValueError(f"spectrum needs a (T, C) table with T >= 4, got shape {tuple(table.shape)}")
    centred = table - table.mean(axis=0, keepdims=True)
    power = np.abs(np.fft.rfft(centred, axis=0)) ** 2  # (F, C)
    frequencies = np.fft.rfftfreq(table.shape[0])
    dominant = frequencies[1 + np.argmax(power[1:], axis=0)]
    return frequencies, power, dominant


def basis_frequencies(length: int, num_frequencies: int) -> np.ndarray:
    """``K`` angular frequencies, geometric from one period over ``length`` up to pi (period 2)."""
    return np.geomspace(2 * np.pi / length, np.pi, num_frequencies)


def sinusoidal_basis(length: int, num_frequencies: int = DEFAULT_FREQUENCIES) -> np.ndarray:
    """``(T, 2K + 1)`` design matrix ``[1, sin(t w_k), cos(t w_k) ...]`` for ``t = 0..T-1``."""
    if num_frequencies < 1 or 2 * num_frequencies + 1 > length:
        raise ValueError(
            f"num_frequencies must be in 1..{(length - 1) // 2} for {length} positions, got {num_frequencies}"
        )
    angles = np.arange(length, dtype=np.float64)[:, None] * basis_frequencies(length, num_frequencies)[None, :]
    columns = np.empty((length, 2 * num_frequencies + 1))
    columns[:, 0] = 1.0
    columns[:, 1::2] = np.sin(angles)
    columns[:, 2::2] = np.cos(angles)
    return columns


@dataclass(frozen=True)
class SinusoidFit:
    """R^2 of the best sinusoidal fit: overall, per column, and for a row-shuffled control."""

    r2: float
    r2_per_dimension: np.ndarray
    r2_shuffled: float
    num_frequencies: int
    frequencies: np.ndarray
    energy_per_frequency: np.ndarray

    def as_dict(self) -> dict:
        per = self.r2_per_dimension
        return {
            "r2": self.r2,
            "r2_shuffled_rows": self.r2_shuffled,
            "num_basis_frequencies": self.num_frequencies,
            "r2_per_dimension_median": float(np.median(per)),
            "r2_per_dimension_min": float(per.min()),
            "r2_per_dimension_max": float(per.max()),
            "dimensions_with_r2_above_0.9": int((per > 0.9).sum()),
        }


def _r2(table: np.ndarray, basis: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    from sklearn.linear_model import LinearRegression

    model = LinearRegression(fit_intercept=False).fit(basis, table)
    residual = table - model.predict(basis)
    total = ((table - table.mean(axis=0)) ** 2).sum(axis=0)
    ss_res = (residual**2).sum(axis=0)
    per = np.where(total > 0, 1.0 - ss_res / np.maximum(total, 1e-300), 1.0)
    overall = 1.0 - ss_res.sum() / total.sum() if total.sum() > 0 else 1.0
    return float(overall), per, model.coef_  # coef_: (C, 2K+1)


def sinusoid_fit(table, num_frequencies: int = DEFAULT_FREQUENCIES, seed: int = 0) -> SinusoidFit:
    """Least-squares fit of every column of ``table (T, C)`` from :func:`sinusoidal_basis`."""
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"expected a (T, C) table, got shape {tuple(table.shape)}")
    basis = sinusoidal_basis(table.shape[0], num_frequencies)
    overall, per, coef = _r2(table, basis)
    shuffled = table[np.random.default_rng(seed).permutation(table.shape[0])]
    control, _, _ = _r2(shuffled, basis)
    energy = (coef[:, 1::2] ** 2 + coef[:, 2::2] ** 2).sum(axis=0)  # (K,)
    return SinusoidFit(
        r2=overall,
        r2_per_dimension=per,
        r2_shuffled=control,
        num_frequencies=num_frequencies,
        frequencies=basis_frequencies(table.shape[0], num_frequencies),
        energy_per_frequency=energy / max(energy.sum(), 1e-300),
    )
