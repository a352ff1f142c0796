"""A context study's stored rows over its seeds, indexed for the report (:mod:`posembed.lab.report.context`).

:class:`Results` keeps every value per seed, so a comparison can pair two arms on the seeds they
share (the RoPE methods are one trained model per seed; the references train on the same seed and
the same data stream), and :func:`display_name` names a model or method by what the study stores
and the paper of its scheme in :data:`posembed.schemes.factory.FACTORY` (no name table here).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

from posembed.lab.context.store import NO_DEPTH, ContextStore

__all__ = ["Results", "display_name", "paper_of", "group_text", "INTERVAL_NOTE"]

#: what a table cell's brackets are (:func:`posembed.stats.describe`)
INTERVAL_NOTE = ("a cell is the mean over the seeds and, in brackets, a 95 % t interval of that mean (with 2 seeds: "
                 "the seeds' range; for accuracies cut to [0, 1]); perplexity cells are geometric means with the "
                 "interval taken on log perplexity")


def paper_of(model: str, method: str = "none") -> str:
    """The paper of the scheme behind ``(model, method)`` as the factory records it (``""`` if none):
    a RoPE method by its :attr:`~posembed.schemes.factory.SchemeEntry.method`, a model by its name."""
    from posembed.schemes.factory import FACTORY, METHOD_SCHEMES

    name = METHOD_SCHEMES.get(method) if method != "none" else model.split("+")[0]
    entry = FACTORY.get(name or "")
    return getattr(entry.cls, "paper", "") if entry is not None else ""


def display_name(model: str, method: str = "none") -> str:
    """``alibi``, ``rope / yarn``, ``rope+yarn@4x``: the names the study stores, as the tables show them."""
    return model if method == "none" or model.startswith("rope+") else f"{model} / {method}"


def group_text(values: Sequence[float], log_scale: bool = False, digits: int = 3) -> str:
    """``mean [low, high]`` of one group over its seeds (:func:`posembed.stats.describe`; on the log
    scale for perplexity, shown back as a geometric mean); a single seed is its bare value."""
    from posembed.report import format_cell
    from posembed.stats import describe

    if not values:
        return "not measured"
    if len(values) == 1:
        return f"{values[0]:.{digits}g}"
    if log_scale and min(values) > 0:
        mean, low, high, _ = describe([math.log(v) for v in values])
        mean, low, high = math.exp(mean), math.exp(low), math.exp(high)
    else:
        mean, low, high, _ = describe(values)
    if not log_scale:  # accuracies: an interval past [0, 1] says nothing more than the bound
        low, high = max(low, 0.0), min(high, 1.0)
    return f"{format_cell(float(f'{mean:.{digits}g}'))} [{format_cell(float(f'{low:.{digits}g}'))}, " \
           f"{format_cell(float(f'{high:.{digits}g}'))}]"


class Results:
    """A study's rows over its seeds, indexed: ``per_seed(model, method, length, metric, depth=-1)``
    maps each seed to its value, ``value`` is their mean, ``values`` them in seed order.

    ``rows`` may carry a ``seed`` (rows without one are seed ``body["seed"]``, 0 by default).
    """

    def __init__(self, rows: list[dict], body: dict) -> None:
        self.body = body
        self._values: dict[tuple, dict[int, float]] = {}
        default = body.get("seed", 0)
        for r in rows:
            if r["value"] is not None:
                key = (r["model"], r["method"], r["length"], r["metric"], r["depth"])
                self._values.setdefault(key, {})[r.get("seed", default)] = r["value"]
        self.seeds = sorted({r.get("seed", default) for r in rows})
        self.context = int(body["context"])
        self.lengths = sorted({r["length"] for r in rows})
        self.lines = sorted({(r["model"], r["method"]) for r in rows}, key=_line_order)
        self.depths = sorted({r["depth"] for r in rows if r["metric"] == "passkey"})

    @classmethod
    def load(cls, store_path: str | os.PathLike, config_id: str | Sequence[str] | None = None) -> "Results":
        """The study of the store: one run's ``config_id``, the runs (one per seed) of a list of ids,
        or, when omitted, every run of the only study the store holds (runs that differ only in
        their seed make one study)."""
        store = ContextStore(store_path)
        configs = store.configs()
        if config_id is None:
            studies: dict[str, list[str]] = {}
            for cid, (_, body) in configs.items():
                studies.setdefault(_study_key(body), []).append(cid)
            if len(studies) != 1:
                raise ValueError(f"{store_path} holds {len(studies)} studies; name one of: {', '.join(configs) or 'none'}")
            ids = next(iter(studies.values()))
        else:
            ids = [config_id] if isinstance(config_id, str) else list(config_id)
        missing = [cid for cid in ids if cid not in configs]
        if missing:
            raise ValueError(f"study {', '.join(missing)} is not in {store_path}; it holds: {', '.join(configs) or 'none'}")
        bodies = sorted((configs[cid][1] for cid in ids), key=lambda body: body.get("seed", 0))
        rows = [dict(row, seed=configs[cid][1].get("seed", 0)) for cid in ids for row in store.rows(cid)]
        return cls(rows, {**bodies[0], "name": configs[ids[0]][0]})

    def per_seed(self, model: str, method: str, length: int, metric: str, depth: float = NO_DEPTH) -> dict[int, float]:
        return dict(self._values.get((model, method, length, metric, depth), {}))

    def values(self, model: str, method: str, length: int, metric: str, depth: float = NO_DEPTH) -> list[float]:
        found = self.per_seed(model, method, length, metric, depth)
        return [found[seed] for seed in sorted(found)]

    def value(self, model: str, method: str, length: int, metric: str, depth: float = NO_DEPTH) -> float | None:
        """The mean over the seeds that have it (``None`` when not measured)."""
        values = self.values(model, method, length, metric, depth)
        return sum(values) / len(values) if values else None

    def cell(self, model: str, method: str, length: int, metric: str) -> str | float | None:
        """A table cell: the bare value for one seed, ``mean [low, high]`` (:func:`group_text`) for several."""
        values = self.values(model, method, length, metric)
        if len(values) <= 1:
            return self.value(model, method, length, metric)
        return group_text(values, log_scale=metric == "perplexity")

    def label(self, line: tuple[str, str]) -> str:
        return display_name(*line)


def _study_key(body: dict) -> str:
    """What the runs of one study share: the config less its seed (and the study's seed list)."""
    return json.dumps({k: v for k, v in body.items() if k not in ("seed", "seeds", "name")}, sort_keys=True)


def _line_order(line: tuple[str, str]) -> tuple:
    from posembed.lab.context import METHODS
    from posembed.lab.context.presets import REFERENCES

    model, method = line
    group = 0 if model == "rope" else (2 if model.startswith("rope+") else 1)
    known = REFERENCES.index(model) if model in REFERENCES else len(REFERENCES)
    return (group, METHODS.index(method) if method in METHODS else 99, known, model)
