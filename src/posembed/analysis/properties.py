"""Similarity of position vectors and the three properties of Wang et al. (ICLR 2021).

Wang, Shang, Lioma, Jiang, Yang, Liu, Simonsen, "On Position Embeddings in BERT", ICLR 2021.
With a closeness ``phi(x, y)`` between the vectors of positions ``x`` and ``y`` (dot product or
cosine), a position embedding is

- *monotone* when ``m > n  =>  phi(x, x+m) < phi(x, x+n)`` (closeness falls with distance),
- *translation invariant* when ``phi(x1, x1+k) = phi(x2, x2+k)`` (closeness depends on the offset only),
- *symmetric* when ``phi(x, y) = phi(y, x)``.

How posembed measures them (all on a ``(T, C)`` table, float64 numpy):

- ``offset_closeness``: ``phi(k)`` = mean over ``x`` of ``S[x, x+k]`` (the k-th super-diagonal).
- monotonicity: Spearman's rank correlation between ``k`` and ``phi(k)`` (−1 = perfectly monotone),
  locally (``k = 1..20``) and over all offsets; plus the first offset ``k`` with ``phi(k+1) > phi(k)``.
- translation invariance: for each offset ``k`` the spread (standard deviation over ``x``) of
  ``S[x, x+k]``, averaged over ``k = 1..T/2`` and divided by the standard deviation of all
  off-diagonal entries of ``S`` (0 = perfectly invariant, ~1 = the offset explains nothing).
- symmetry: ``||S - S^T||_F / ||S||_F`` (0 = symmetric). Dot product and cosine of one table are
  symmetric by construction; the measure is informative for asymmetric closeness such as
  first-layer query-key logits between positions.

Example:
    >>> import torch
    >>> table = torch.randn(16, 8, dtype=torch.float64).numpy()
    >>> dot, cos = similarity_matrices(table)
    >>> dot.shape, float(round(cos[3, 3], 6)), symmetry_error(dot) < 1e-12
    ((16, 16), 1.0, True)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import spearmanr

__all__ = [
    "similarity_matrices",
    "offset_closeness",
    "first_nonmonotone_offset",
    "monotonicity",
    "translation_invariance_error",
    "symmetry_error",
    "Properties",
    "position_properties",
]

#: offsets 1..LOCAL_WINDOW count as "local" for the local monotonicity score
LOCAL_WINDOW = 20


def _as_table(table) -> np.ndarray:
    array = np.asarray(table, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] < 2 or array.shape[1] < 1:
        raise ValueError(f"expected a (T, C) table with T >= 2 positions, got shape {tuple(array.shape)}")
    return array


def similarity_matrices(table) -> tuple[np.ndarray, np.ndarray]:
    """Dot-product and cosine similarity between every pair of position vectors.

    Shape:
        table ``(T, C)`` -> two ``(T, T)`` arrays.
    """
    table = _as_table(table)
    dot = table @ table.T
    norms = np.linalg.norm(table, axis=1)
    cosine = dot / np.maximum(np.outer(norms, norms), 1e-12)
    return dot, cosine


def offset_closeness(similarity: np.ndarray, max_offset: int | None = None) -> np.ndarray:
    """``phi(k)`` for ``k = 0..K``: the mean of the k-th super-diagonal of a ``(T, T)`` closeness matrix."""
    size = similarity.shape[0]
    last = size - 1 if max_offset is None else min(int(max_offset), size - 1)
    return np.array([np.diagonal(similarity, offset=k).mean() for k in range(last + 1)])


def first_nonmonotone_offset(phi: np.ndarray) -> int | None:
    """The first offset ``k >= 0`` with ``phi(k+1) > phi(k)``, or None when ``phi`` never rises.

    >>> first_nonmonotone_offset(np.array([3.0, 2.0, 1.0, 1.5]))
    2
    """
    rises = np.flatnonzero(np.diff(phi) > 0)
    return int(rises[0]) if rises.size else None


def monotonicity(phi: np.ndarray, last: int | None = None) -> float:
    """Spearman's rho between offset ``k`` and ``phi(k)`` over ``k = 1..last`` (−1 = monotone decreasing)."""
    last = len(phi) - 1 if last is None else min(int(last), len(phi) - 1)
    if last < 2:
        raise ValueError(f"monotonicity needs at least offsets 1..2, got last={last}")
    values = phi[1 : last + 1]
    if np.ptp(values) == 0:
        return 0.0
    return float(spearmanr(np.arange(1, last + 1), values).statistic)


def translation_invariance_error(similarity: np.ndarray, max_offset: int | None = None) -> float:
    """Mean over offsets of the spread of ``S[x, x+k]`` over ``x``, relative to the spread of ``S``.

    0 when closeness depends on the offset only; around 1 when the offset explains nothing.
    """
    size = similarity.shape[0]
    last = max(1, size // 2) if max_offset is None else min(int(max_offset), size - 2)
    spreads = [np.diagonal(similarity, offset=k).std() for k in range(1, last + 1)]
    off_diagonal = similarity[~np.eye(size, dtype=bool)]
    scale = off_diagonal.std()
    return float(np.mean(spreads) / scale) if scale > 0 else 0.0


def symmetry_error(similarity: np.ndarray) -> float:
    """``||S - S^T||_F / ||S||_F`` (0 = symmetric)."""
    norm = np.linalg.norm(similarity)
    return float(np.linalg.norm(similarity - similarity.T) / norm) if norm > 0 else 0.0


@dataclass(frozen=True)
class Properties:
    """Wang et al.'s properties of one closeness matrix (see the module docstring for the formulas)."""

    closeness: str
    phi_0: float
    phi_1: float
    first_nonmonotone_offset: int | None
    monotonicity_local: float
    monotonicity_all: float
    translation_invariance_error: float
    symmetry_error: float

    def as_dict(self) -> dict:
        return asdict(self)


def position_properties(similarity: np.ndarray, closeness: str) -> Properties:
    """All of Wang et al.'s properties of a ``(T, T)`` closeness matrix (rows = query position)."""
    if similarity.ndim != 2 or similarity.shape[0] != similarity.shape[1] or similarity.shape[0] < 4:
        raise ValueError(f"expected a square (T, T) closeness matrix with T >= 4, got {tuple(similarity.shape)}")
    phi = offset_closeness(similarity)
    return Properties(
        closeness=closeness,
        phi_0=float(phi[0]),
        phi_1=float(phi[1]),
        first_nonmonotone_offset=first_nonmonotone_offset(phi),
        monotonicity_local=monotonicity(phi, LOCAL_WINDOW),
        monotonicity_all=monotonicity(phi),
        translation_invariance_error=translation_invariance_error(similarity),
        symmetry_error=symmetry_error(similarity),
    )
