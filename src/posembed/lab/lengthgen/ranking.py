"""Rank a length-generalisation sweep's schemes the way Kazemnejad et al. 2023 do.

Per task, each (scheme, variant) gets its mean exact match over the lengths past the training
length L (out of distribution); schemes are ranked by it (ties share their mean rank) and the
reciprocal ranks are averaged over tasks (mean reciprocal rank, MRR). With one task the MRR is
simply ``1 / rank``. The rows come from a run's store through
:func:`posembed.lab.sweep.listing.store_rows`.

>>> rows = [("copy", "t5_bias", "base", 16, 0.5), ("copy", "t5_bias", "base", 20, 0.2),
...         ("copy", "rope", "base", 16, 1.0), ("copy", "rope", "base", 20, 0.0),
...         ("copy", "nope", "base", 20, 0.0)]
>>> scores = ood_scores(rows, {"copy": 16})
>>> scores[("copy", "t5_bias", "base")], scores[("copy", "rope", "base")]
(0.2, 0.0)
>>> mean_reciprocal_rank(scores)  # rope and nope tie for ranks 2-3: both 1 / 2.5
{('t5_bias', 'base'): 1.0, ('rope', 'base'): 0.4, ('nope', 'base'): 0.4}
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

__all__ = ["PUBLISHED_MRR", "Row", "ood_scores", "mean_reciprocal_rank"]

#: Kazemnejad et al. 2023, mean reciprocal rank over all their tasks (absolute = learned / sinusoidal)
PUBLISHED_MRR = {"nope": 0.687, "t5_bias": 0.549, "alibi": 0.502, "rope": 0.330, "absolute": 0.215}

Row = tuple[str, str, str, int, "float | None"]


def ood_scores(rows: Iterable[Row], context: dict[str, int]) -> dict[tuple[str, str, str], float]:
    """Mean exact match past L per ``(task, scheme, variant)``; rows are ``(task, scheme, variant,
    length, value)`` (seeds averaged in), ``context`` maps a task to its L. Unmeasured values (None)
    are skipped."""
    found: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for task, scheme, variant, length, value in rows:
        if length > context[task] and value is not None:
            found[(task, scheme, variant)].append(value)
    return {key: sum(values) / len(values) for key, values in found.items()}


def mean_reciprocal_rank(scores: dict[tuple[str, str, str], float]) -> dict[tuple[str, str], float]:
    """``(scheme, variant)`` -> reciprocal rank averaged over tasks, best first (ties: mean rank)."""
    by_task: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for (task, scheme, variant), score in scores.items():
        by_task[task][(scheme, variant)] = score
    reciprocal: dict[tuple[str, str], list[float]] = defaultdict(list)
    for entries in by_task.values():
        ordered = sorted(entries.values(), reverse=True)
        for key, score in entries.items():
            first = ordered.index(score) + 1
            ties = ordered.count(score)
            reciprocal[key].append(1.0 / (first + (ties - 1) / 2))
    mrr = {key: sum(values) / len(values) for key, values in reciprocal.items()}
    return dict(sorted(mrr.items(), key=lambda item: -item[1]))
