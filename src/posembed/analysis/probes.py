"""Position probes: how much position information a set of vectors carries.

- Absolute probe (Wang & Chen, "What Do Position Embeddings Learn?", EMNLP 2020; code MiuLab/PE-Study):
  linear regression from a position vector back to its position, 5-fold cross-validation (shuffled),
  scored by the mean of ``|round(prediction) - position|``.
- Relative probe (same paper): logistic regression on the concatenation ``[p_i; p_j]`` predicting
  whether ``j > i``, 5-fold cross-validation, scored by the error rate.
- Per-layer probe (Haviv et al., "Transformer Language Models without Positional Encodings Still
  Learn Positional Information", Findings of EMNLP 2022): a 2-layer ReLU MLP classifying the absolute
  position of a token from one layer's hidden state, scored by the mean absolute distance between the
  predicted and true position on held-out windows.

All numerical work is scikit-learn's (``LinearRegression``, ``LogisticRegression``, ``MLPClassifier``).

Example:
    >>> import numpy as np
    >>> table = np.outer(np.arange(32.0), np.ones(4)) + 0.01 * np.random.default_rng(0).normal(size=(32, 4))
    >>> absolute_probe(table).mean_absolute_error
    0.0
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ProbeResult", "absolute_probe", "relative_probe", "layer_probe", "layer_probes"]

logger = logging.getLogger(__name__)

FOLDS = 5
#: fewest positions a table needs for the absolute probe (two per fold)
MIN_POSITIONS = 2 * FOLDS


@dataclass(frozen=True)
class ProbeResult:
    """A probe's score (lower is better) and what a guess would score (chance)."""

    name: str
    score: float
    chance: float
    metric: str

    @property
    def mean_absolute_error(self) -> float:
        return self.score

    def as_dict(self) -> dict:
        return {"name": self.name, "score": self.score, "chance": self.chance, "metric": self.metric}


def _check_table(table, min_rows: int) -> np.ndarray:
    array = np.asarray(table, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] < min_rows:
        raise ValueError(f"probe needs a (T, C) table with T >= {min_rows} positions, got shape {tuple(array.shape)}")
    return array


def absolute_probe(table, folds: int = FOLDS, seed: int = 0) -> ProbeResult:
    """Linear regression position <- vector, shuffled k-fold CV; mean ``|round(pred) - pos|``.

    Shape:
        table ``(T, C)``: row ``t`` is the vector of position ``t``.
    """
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import KFold, cross_val_predict

    table = _check_table(table, 2 * folds)
    positions = np.arange(table.shape[0], dtype=np.float64)
    splitter = KFold(folds, shuffle=True, random_state=seed)
    with _one_blas_thread():
        predicted = cross_val_predict(LinearRegression(), table, positions, cv=splitter)
    error = float(np.abs(np.round(predicted) - positions).mean())
    chance = float(np.abs(positions - positions.mean()).mean())
    return ProbeResult("absolute (linear regression)", error, chance, "mean |round(pred) - pos|")


def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def relative_probe(table, pairs: int = 2000, folds: int = FOLDS, seed: int = 0) -> ProbeResult:
    """Logistic regression on ``[p_i; p_j]`` predicting ``j > i`` (random pairs, ``i != j``); CV error rate."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    table = _check_table(table, 3)
    rng = np.random.default_rng(seed)
    first = rng.integers(0, table.shape[0], size=pairs)
    second = (first + rng.integers(1, table.shape[0], size=pairs)) % table.shape[0]  # never equal
    features = np.concatenate([table[first], table[second]], axis=1)  # (pairs, 2C)
    labels = (second > first).astype(int)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000))
    splitter = StratifiedKFold(folds, shuffle=True, random_state=seed)
    with _one_blas_thread():  # lbfgs on small matrices is many times slower with threads competing
        accuracy = cross_val_score(model, features, labels, cv=splitter).mean()
    return ProbeResult("relative order (logistic regression)", float(1.0 - accuracy), 0.5, "error rate")


def layer_probe(
    hidden: np.ndarray,
    positions: np.ndarray,
    groups: np.ndarray,
    hidden_units: int = 128,
    seed: int = 0,
    max_iter: int = 60,
) -> ProbeResult:
    """2-layer ReLU MLP classifying the position of each token from its hidden state.

    Args:
        hidden: ``(N, C)`` hidden states of N tokens.
        positions: ``(N,)`` integer positions (the classes).
        groups: ``(N,)`` window ids; whole windows are held out (no window in both train and test).

    Returns the mean absolute distance between predicted and true position on the held-out 20%.
    """
    from sklearn.model_selection import GroupShuffleSplit
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    hidden = _check_table(hidden, 10)
    if not (len(hidden) == len(positions) == len(groups)):
        raise ValueError(
            f"hidden ({len(hidden)}), positions ({len(positions)}) and groups ({len(groups)}) differ in length"
        )
    if len(np.unique(groups)) < 2:
        raise ValueError("the per-layer probe needs at least 2 windows of text to hold one out")
    train, test = next(GroupShuffleSplit(n_splits=1, test_size=0.2, random_state=seed).split(hidden, positions, groups))
    mlp = MLPClassifier(hidden_layer_sizes=(hidden_units,), max_iter=max_iter, random_state=seed, early_stopping=False)
    model = make_pipeline(StandardScaler(), mlp)
    with _one_blas_thread():
        model.fit(hidden[train], positions[train])
    predicted = model.predict(hidden[test])
    error = float(np.abs(predicted - positions[test]).mean())
    chance = float(np.abs(positions[test] - np.median(positions[train])).mean())
    return ProbeResult("absolute position (2-layer MLP)", error, chance, "mean |pred - pos| (held-out windows)")


def layer_probes(
    hidden_states: Sequence[np.ndarray], positions: np.ndarray, groups: np.ndarray, **kwargs
) -> list[ProbeResult]:
    """:func:`layer_probe` on every layer's ``(N, C)`` hidden states (index 0 = embedding output)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    try:  # progress on a terminal when tqdm is there (it comes with transformers); plain loop otherwise
        from tqdm.auto import tqdm
    except ModuleNotFoundError:  # pragma: no cover

        def tqdm(items, **_):
            return items

    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a probe, not a model: a fixed budget
        for index, hidden in enumerate(tqdm(hidden_states, desc="per-layer probe", unit="layer", disable=None)):
            results.append(layer_probe(hidden, positions, groups, **kwargs))
            logger.info("layer %d probe error %.2f", index, results[-1].score)
    return results
