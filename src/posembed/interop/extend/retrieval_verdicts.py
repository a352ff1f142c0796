"""The verdicts of ``posembed extend-eval``, under the one rule of :mod:`posembed.stats.verdict`.

The primary comparisons follow from the protocol alone, before any cell is measured:

1. **beyond the table**: every system that is not a truncation against the longest truncation
   (``truncate-T`` with the largest ``T``: the most of a document the original model reads), over
   every query of every document longer than the model's positions (both tasks, every long
   length, every data seed);
2. **within the table**: each extension method that edits the trained rows (``interpolate``,
   ``grouped``: :data:`~posembed.interop.extend.methods.KEEPS_TRAINED_ROWS` lacks them) against the
   same truncation, over every query of the documents that fit the table (there the truncation is
   the original model on the whole document).

The unit is the query. A pair is one query of one data seed, task and length under both systems:
the same fact, the same candidates, so no pair crosses a seed's filler span or candidate pool.
The test is the exact McNemar test on the discordant pairs (``test="mcnemar"``). Given the
discordant pairs, each one is a fair coin under "no difference" whatever its seed, task and
length, so pooling the strata's discordant pairs is the exact stratified test with the data seed
(and task and length) as blocks. Holm runs over the family's two tests per comparison (the
difference, and equivalence within :data:`MARGIN`), so the chance of any false "better" or false
"alike" on the report is at most 5 %. A winner must also lead in every data seed and in every
task: a "better" whose difference changes sign in some seed (or task) is reported as "cannot
tell" with the note "the data seeds disagree" (or "the tasks disagree"); this can only make the
family more conservative.

Each task and length alone is exploratory: its numbers are shown, with no winner word.

>>> cells = [{"task": "passkey", "system": s, "length": 1024, "outcomes": [[0.0, h, 0] for h in hits]}
...          for s, hits in (("truncate-512", [0] * 30), ("copy", [1] * 20 + [0] * 10))]
>>> [d["word"] for d in primary_decisions(cells, 512)]
['copy better']
"""

from __future__ import annotations

from collections.abc import Sequence

from posembed.interop.extend.methods import KEEPS_TRAINED_ROWS, METHODS
from posembed.stats.verdict import CANNOT_TELL, Comparison, Decision, decide

__all__ = ["MARGIN", "baseline", "primary_comparisons", "primary_decisions", "exploratory_decisions", "paired_hits"]

#: the equivalence margin: systems whose top-1 accuracies differ by less than this are "alike"
MARGIN = 0.10


def baseline(cells: Sequence[dict]) -> str | None:
    """The longest truncation among the cells' systems (``None`` without one)."""
    sizes = {
        int(c["system"].removeprefix("truncate-")): c["system"] for c in cells if c["system"].startswith("truncate-")
    }
    return sizes[max(sizes)] if sizes else None


def _ordered(values) -> list:
    return list(dict.fromkeys(values))


def _seed(outcome: Sequence) -> int:
    return int(outcome[2]) if len(outcome) > 2 else 0  # outcomes before data seeds: one seed


def paired_hits(
    cells: Sequence[dict], system: str, base: str, lengths: Sequence[int]
) -> tuple[list[int], list[int], list[int], list[str]]:
    """``(baseline hits, system hits, data seed, task)`` per query over ``lengths`` (every task),
    paired within each cell: the same query of the same seed, task and length under both systems."""
    at = {(c["task"], c["system"], c["length"]): c for c in cells}
    hits_a, hits_b, seeds, tasks = [], [], [], []
    for task in _ordered(c["task"] for c in cells):
        for length in lengths:
            mine, theirs = at.get((task, system, length)), at.get((task, base, length))
            if mine is None or theirs is None:
                continue
            a, b = theirs["outcomes"], mine["outcomes"]
            if [(o[0], _seed(o)) for o in a] != [(o[0], _seed(o)) for o in b]:
                raise ValueError(f"{task} @ {length}: the outcomes of {system} and {base} are not the same queries")
            hits_a += [int(o[1]) for o in a]
            hits_b += [int(o[1]) for o in b]
            seeds += [_seed(o) for o in a]
            tasks += [task] * len(a)
    return hits_a, hits_b, seeds, tasks


def _regions(cells: Sequence[dict], original_positions: int) -> list[tuple[str, list[int], list[str]]]:
    """``(region, lengths, systems compared there)``, as the module docstring names them."""
    lengths = sorted({c["length"] for c in cells})
    systems = [s for s in _ordered(c["system"] for c in cells) if not s.startswith("truncate-")]
    edits = [s for s in systems if s in METHODS and s not in KEEPS_TRAINED_ROWS]
    long = [L for L in lengths if L > original_positions]
    short = [L for L in lengths if L <= original_positions]
    return [
        (region, where, names)
        for region, where, names in (("beyond the table", long, systems), ("within the table", short, edits))
        if where and names
    ]


def primary_comparisons(cells: Sequence[dict], original_positions: int) -> list[tuple[Comparison, dict]]:
    """The family (see the module docstring) with, per comparison, what the report shows beside it."""
    base = baseline(cells)
    if base is None:
        return []
    family = []
    for region, lengths, systems in _regions(cells, original_positions):
        for system in systems:
            hits_a, hits_b, seeds, tasks = paired_hits(cells, system, base, lengths)
            if not hits_a:
                continue
            name = f"{system} vs {base}, {region} ({', '.join(map(str, lengths))} tokens)"
            comparison = Comparison(
                name, base, system, tuple(hits_a), tuple(hits_b), higher_is_better=True, margin=MARGIN, test="mcnemar"
            )
            family.append(
                (
                    comparison,
                    {
                        "system": system,
                        "baseline": base,
                        "region": region,
                        "lengths": lengths,
                        "per_seed": _per_group(hits_a, hits_b, seeds),
                        "per_task": _per_group(hits_a, hits_b, tasks),
                    },
                )
            )
    return family


def _per_group(hits_a: list[int], hits_b: list[int], groups: list) -> dict[str, float]:
    """Per group (data seed, or task), the system's accuracy minus the baseline's over its pairs."""
    out = {}
    for group in _ordered(groups):
        pairs = [(a, b) for a, b, g in zip(hits_a, hits_b, groups) if g == group]
        out[str(group)] = sum(b - a for a, b in pairs) / len(pairs)
    return out


def _record(decision: Decision, extra: dict) -> dict:
    c = decision.comparison
    only_a = sum(1 for x, y in zip(c.values_a, c.values_b) if x and not y)
    only_b = sum(1 for x, y in zip(c.values_a, c.values_b) if y and not x)
    return {
        "name": c.name,
        **extra,
        "word": decision.word,
        "primary": c.primary,
        "pairs": len(c.values_a),
        "accuracy_baseline": sum(c.values_a) / len(c.values_a),
        "accuracy_system": sum(c.values_b) / len(c.values_b),
        "only_system": only_b,
        "only_baseline": only_a,
        "difference": decision.difference,
        "interval": list(decision.interval),
        "interval_label": decision.interval_label,
        "p": decision.p,
        "p_adjusted": decision.p_adjusted,
        "p_equivalence_adjusted": decision.p_equivalence_adjusted,
        "mdd": decision.mdd,
        "margin": c.margin,
        "note": decision.note,
        "text": decision.text(),
    }


def primary_decisions(cells: Sequence[dict], original_positions: int) -> list[dict]:
    """The family's decisions, one JSON-able dict each (``word``: "X better", "alike", "cannot tell")."""
    family = primary_comparisons(cells, original_positions)
    records = []
    for decision, (_, extra) in zip(decide([c for c, _ in family]), family):
        record = _record(decision, extra)
        if decision.winner is not None:
            sign = 1 if decision.difference > 0 else -1
            for group, label in (("per_seed", "the data seeds disagree"), ("per_task", "the tasks disagree")):
                if record["word"] != CANNOT_TELL and any(diff * sign < 0 for diff in record[group].values()):
                    record["word"], record["note"] = CANNOT_TELL, label
        records.append(record)
    return records


def exploratory_decisions(cells: Sequence[dict]) -> list[dict]:
    """Per task and length, each system against the longest truncation: numbers, no word."""
    base = baseline(cells)
    found = []
    for task in _ordered(c["task"] for c in cells):
        for length in sorted({c["length"] for c in cells}):
            for system in _ordered(c["system"] for c in cells if c["task"] == task and c["length"] == length):
                if system.startswith("truncate-"):
                    continue
                hits_a, hits_b, *_ = paired_hits([c for c in cells if c["task"] == task], system, base, [length])
                if not hits_a:
                    continue
                comparison = Comparison(
                    f"{task} @ {length}: {system} vs {base}",
                    base,
                    system,
                    tuple(hits_a),
                    tuple(hits_b),
                    higher_is_better=True,
                    margin=MARGIN,
                    test="mcnemar",
                    primary=False,
                )
                found.append((comparison, {"task": task, "length": length, "system": system, "baseline": base}))
    return [_record(d, extra) for d, (_, extra) in zip(decide([c for c, _ in found]), found)]
