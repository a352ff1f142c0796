"""A context study's stored rows over its seeds, indexed for the report (:mod:`posembed.lab.report.context`),
and the exploratory numbers the report states from them.

:class:`Results` keeps every value per seed, so a comparison can pair two arms on the seeds they
share (the RoPE methods are one trained model per seed; the references train on the same seed and
the same data stream), and :func:`display_name` names a model or method by what the study stores
and the paper of its scheme in :data:`posembed.schemes.factory.FACTORY` (no name table here).
Exploratory (means over the seeds, no test, no winner): :meth:`Results.table` (a metric per line
and length), :func:`reference_rows` and :func:`reference_note` (the references past L) and
:func:`empty_heatmaps` (the lines that never retrieved the key).

The words the report puts around its numbers: :func:`intro` (what the study trained),
:func:`too_small` (why it cannot conclude), :func:`published_rows` (where each published figure
comes from and why it might not hold here), :func:`retrieval_note` and :func:`empty_note`
(passkey retrieval over the seeds).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

from posembed.lab.context.published import CLAIMS
from posembed.lab.context.store import NO_DEPTH, ContextStore

__all__ = [
    "Results",
    "display_name",
    "paper_of",
    "group_text",
    "INTERVAL_NOTE",
    "FLAT",
    "RETRIEVES",
    "SMOKE_PRESETS",
    "reference_rows",
    "reference_note",
    "empty_heatmaps",
    "intro",
    "too_small",
    "published_rows",
    "retrieval_note",
    "empty_note",
]

#: what a table cell's brackets are (:func:`posembed.stats.verdict.describe`)
INTERVAL_NOTE = (
    "a cell is the mean over the seeds and, in brackets, a 95 % t interval of that mean (with 2 seeds: "
    "the seeds' range; for accuracies cut to [0, 1]); perplexity cells are geometric means with the "
    "interval taken on log perplexity"
)
#: relative perplexity change (longest length against L, means) within which a reference is described as flat
FLAT = 0.05
#: passkey accuracy at L from which one seed's model counts as having learned retrieval
RETRIEVES = 0.8
#: presets that test the pipeline: too small and short for any verdict
SMOKE_PRESETS = ("context-smoke",)


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
    """``mean [low, high]`` of one group over its seeds (:func:`posembed.stats.verdict.describe`; on the log
    scale for perplexity, shown back as a geometric mean); a single seed is its bare value."""
    from posembed._utils.html import format_cell
    from posembed.stats.verdict import describe

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
    return (
        f"{format_cell(float(f'{mean:.{digits}g}'))} [{format_cell(float(f'{low:.{digits}g}'))}, "
        f"{format_cell(float(f'{high:.{digits}g}'))}]"
    )


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
    def load(cls, store_path: str | os.PathLike, config_id: str | Sequence[str] | None = None) -> Results:
        """The study of the store: one run's ``config_id``, the runs (one per seed) of a list of ids,
        or, when omitted, every run of the only study the store holds (runs that differ only in
        their seed make one study)."""
        return cls.of(ContextStore(store_path), config_id)

    @classmethod
    def of(cls, store: ContextStore, config_id: str | Sequence[str] | None = None) -> Results:
        """:meth:`load` from a store already open (the one the study ran into)."""
        store_path, configs = store.path, store.configs()
        if config_id is None:
            studies: dict[str, list[str]] = {}
            for cid, (_, body) in configs.items():
                studies.setdefault(_study_key(body), []).append(cid)
            if len(studies) != 1:
                raise ValueError(
                    f"{store_path} holds {len(studies)} studies; name one of: {', '.join(configs) or 'none'}"
                )
            ids = next(iter(studies.values()))
        else:
            ids = [config_id] if isinstance(config_id, str) else list(config_id)
        missing = [cid for cid in ids if cid not in configs]
        if missing:
            raise ValueError(
                f"study {', '.join(missing)} is not in {store_path}; it holds: {', '.join(configs) or 'none'}"
            )
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

    def table(self, metric: str) -> tuple[list[str], list[list]]:
        """``(header, rows)``: ``metric`` per line (a row) and length (a column), as :meth:`cell` s."""
        header = ["model / method", *[f"{n // self.context}x ({n})" for n in self.lengths]]
        return header, [[self.label(line), *[self.cell(*line, n, metric) for n in self.lengths]] for line in self.lines]


def empty_heatmaps(results: Results) -> list[str]:
    """Labels of the lines whose passkey accuracy is 0 at every length and depth."""
    return [
        results.label(line)
        for line in results.lines
        if (values := [results.value(*line, n, "passkey", d) for n in results.lengths for d in results.depths])
        and all(v is not None for v in values)
        and max(values) == 0.0
    ]


def _references(results: Results) -> list[str]:
    return [model for model, method in results.lines if method == "none"]


def _perplexity_word(at_l: float | None, longest: float | None) -> str:
    """A description of one reference's mean ratio (no test): within :data:`FLAT`, falls or rises."""
    from posembed.lab.verdicts import FAIL_RATIO

    if at_l is None or longest is None:
        return "not measured"
    ratio = longest / at_l
    if abs(ratio - 1.0) <= FLAT:
        return f"flat (within {FLAT:.0%})"
    if ratio < 1.0:
        return "falls"
    return f"fails (>= {FAIL_RATIO:g}x)" if ratio >= FAIL_RATIO else "rises"


def reference_rows(results: Results) -> list[dict]:
    """One row per reference (exploratory, means over the seeds): perplexity at L and at the longest
    length, their ratio and its description, passkey accuracy at L and the best past L."""
    context, longest = results.context, max(results.lengths, default=0)
    rows = []
    for model in _references(results):
        at_l = results.value(model, "none", context, "perplexity")
        at_max = results.value(model, "none", longest, "perplexity")
        past = [(n, results.value(model, "none", n, "passkey_mean")) for n in results.lengths if n > context]
        past = [(n, v) for n, v in past if v is not None]
        best = max(past, key=lambda item: item[1], default=None)
        rows.append(
            {
                "reference": model,
                "paper": paper_of(model),
                "perplexity at L": at_l,
                f"at {longest // context}x": at_max,
                "ratio": None if at_l is None or at_max is None else at_max / at_l,
                "perplexity past L": _perplexity_word(at_l, at_max),
                "passkey at L": results.value(model, "none", context, "passkey_mean"),
                "max passkey past L": "not measured"
                if best is None
                else ("0" if best[1] == 0 else f"{best[1]:.2f} at {best[0] // context}x"),
            }
        )
    return rows


def reference_note(results: Results, rows: list[dict]) -> str:
    """The references (their :func:`reference_rows`) in words, exploratory (means, no test): which stay
    within :data:`FLAT` of their perplexity at L, the range of the references and of RoPE's methods at
    the longest length, and which reach :data:`RETRIEVES` passkey accuracy past L."""
    if not rows:
        return "No reference was trained in this study."
    models, context, longest = _references(results), results.context, max(results.lengths)
    scale = f"{longest // context}x"
    flat = [row["reference"] for row in rows if row["perplexity past L"].startswith("flat")]
    parts = [
        f"Exploratory (means over the seeds, no test): references whose mean perplexity at {scale} is within "
        f"{FLAT:.0%} of their mean at L: {', '.join(flat) or 'none'}."
    ]
    at_max = [v for m in models if (v := results.value(m, "none", longest, "perplexity")) is not None]
    rope = [
        v
        for model, method in results.lines
        if model == "rope"
        if (v := results.value("rope", method, longest, "perplexity")) is not None
    ]
    if at_max:
        text = f"Mean perplexity at {scale}: references {min(at_max):.3g} to {max(at_max):.3g}"
        if rope:
            text += f"; RoPE's methods without fine-tuning {min(rope):.3g} to {max(rope):.3g}"
        parts.append(text + " (which of them differ is not tested here).")
    past = {
        model: max((results.value(model, "none", n, "passkey_mean") or 0.0) for n in results.lengths if n > context)
        for model in models
        if any(n > context for n in results.lengths)
    }
    retrieving = [f"{m} {v:.2f}" for m, v in past.items() if v >= RETRIEVES]
    above = [f"{m} {v:.2f}" for m, v in past.items() if 0 < v < RETRIEVES]
    parts.append(
        f"Passkey past L (each reference's highest mean accuracy over the longer lengths): >= {RETRIEVES:.0%} for "
        f"{', '.join(retrieving) or 'no reference'}" + (f"; above 0 for {', '.join(above)}" if above else "") + "."
    )
    return " ".join(parts)


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


def _seeds_text(results: Results) -> str:
    n = len(results.seeds)
    return f"{n} seed{'s' if n != 1 else ''} ({', '.join(map(str, results.seeds))})"


def _count_text(count: tuple[int, int, list[float]]) -> str:
    """``2 of 3 seeds (1, 0.01, 1)``."""
    k, n, values = count
    return f"{k} of {n} seed{'s' if n != 1 else ''} ({', '.join(f'{v:.2g}' for v in values)})"


def _listed(names: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _adjacent_text(body: dict) -> str:
    adjacent = body.get("passkey_adjacent_steps", 0)
    return (
        f", in the first {adjacent} of them half the rows with the key sentence right before the question"
        if adjacent
        else ""
    )


def too_small(results: Results, decided: list[dict]) -> str:
    """Why this study cannot conclude (``""`` when it can): a smoke preset, one seed, or no primary
    comparison that decides (every verdict 'cannot tell', 'not measured' or 'not testable')."""
    reasons = []
    if results.body.get("name") in SMOKE_PRESETS:
        reasons.append(
            f"the {results.body['name']!r} preset trains tiny models for {results.body['steps']} steps to "
            "test the pipeline"
        )
    if len(results.seeds) < 2:
        reasons.append("it has one seed, so no number has an interval")
    elif not any(row["decided"] for row in decided):
        reasons.append("no primary comparison decides (every verdict 'cannot tell', 'not measured' or 'not testable')")
    if not reasons:
        return ""
    return (
        "This study is too small to conclude: " + "; ".join(reasons) + ". No verdict below is a finding; run "
        "`posembed lab context --preset context` (3 seeds) for answers."
    )


def intro(results: Results, rule: str) -> str:
    """What the study trained and evaluated, over how many seeds; ``rule``: how its verdicts are decided."""
    body = results.body
    trained = _listed(["rope", *body.get("references", ())])
    return (
        f"{trained} decoders ({body['depth']} layers, width {body['dim']}) trained on tinyshakespeare characters "
        f"at L = {results.context} ({body['steps']} steps: the first {body.get('passkey_only_steps', 0)} on passkey "
        f"documents alone{_adjacent_text(body)}, then {body['passkey_fraction']:.0%} passkey documents), "
        f"{_seeds_text(results)}; the RoPE model evaluated with each method swapped in, no retraining; "
        f"`rope+<method>@{body['finetune_scale']}x` fine-tuned {body['finetune_steps']} steps at "
        f"{body['finetune_scale']} L; the other schemes are the references, evaluated as they are. {rule} "
        f"In the tables {INTERVAL_NOTE}."
    )


def published_rows(results: Results, rope: tuple | None) -> list[dict]:
    """Each claim's published figure, its paper and data, how the figure was checked, and why it may
    not hold at this study's scale: the claim's general caveat, then what this run is (its seeds, its
    size, and, for passkey claims, on how many seeds the RoPE model learned retrieval at L: ``rope``)."""
    body = results.body
    rows = []
    for claim in CLAIMS:
        run = (
            f"This run: {_seeds_text(results)}, width {body['dim']}, {body['depth']} layers, {body['steps']} steps "
            f"at L = {results.context}"
        )
        if claim.better[0].startswith("rope+"):
            run += f", fine-tuned {body['finetune_steps']} steps at {body['finetune_scale']}x"
        if claim.metric == "passkey_mean":
            run += "; RoPE's passkey retrieval at L: " + (_count_text(rope) if rope else "not measured")
        rows.append(
            {
                "claim": claim.text,
                "published": claim.published,
                "source": claim.source,
                "checked": claim.checked,
                "why it might not hold here": f"{claim.why_not} {run}.",
            }
        )
    return rows


def retrieval_note(counts: dict[str, tuple[int, int, list[float]]]) -> str:
    """On how many seeds each model trained at L learned to retrieve the key at L (its own accuracy
    at L, mean over depths, at least :data:`RETRIEVES`): a passkey number past L means something
    only for those (a model that never learned retrieval scores 0 everywhere, whatever its scheme)."""
    if not counts:
        return "Passkey retrieval at L: not measured."
    found = "; ".join(f"{model} {_count_text(count)}" for model, count in counts.items())
    learned = [model for model, (k, _, _) in counts.items() if k]
    return (
        f"Passkey retrieval learned at L (a seed counts when its accuracy at L, mean over depths, is >= "
        f"{RETRIEVES:.0%}): {found}. The passkey columns past L say something only for seeds that learned it "
        f"({_listed(learned) if learned else 'no model'})."
    )


def empty_note(results: Results, empty: list[str], rope: tuple | None) -> str:
    """Why all-zero passkey panels (``empty``) are all zero (``""`` when none is); ``rope``: RoPE's retrieval count."""
    if not empty:
        return ""
    why = (
        "no model learned to retrieve the key even at the training length L"
        if len(empty) == len(results.lines)
        else "these models never retrieved the key, at L or beyond"
    )
    rope = "" if not rope else f" (RoPE's retrieval at L: {_count_text(rope)})"
    return (
        f"Passkey accuracy is 0 at every length and depth for {_listed(empty)}: {why}{rope}. A model that has "
        f"not learned retrieval at L scores 0 everywhere, whatever its positions, so these panels compare "
        f"nothing; it takes a longer passkey curriculum or more steps (this run: {results.body['steps']} steps, "
        f"the first {results.body.get('passkey_only_steps', 0)} on passkeys alone{_adjacent_text(results.body)})."
    )
