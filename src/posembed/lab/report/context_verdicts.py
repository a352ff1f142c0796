"""The context report's decisions: its primary comparisons, named before any run, decided by
:func:`posembed.stats.verdict.decide` as one family; and passkey retrieval counted per seed.

Primary comparisons (:data:`PRIMARY`): the published orderings of
:data:`~posembed.lab.context.published.CLAIMS`, which are the study's two questions, *the method
ordering at the longest length* (YaRN against PI, PI against extrapolation, ALiBi against RoPE,
no fine-tuning) and *after fine-tuning* (passkey retrieval of the YaRN and PI fine-tunes at the
fine-tuning length, their perplexity there and past it). Each is tested **seed-paired**: the RoPE
methods are one trained model per seed, the fine-tunes start from it, and the references train
on the same seed and data stream. Perplexity is tested on the log scale (a difference of log
perplexity is a ratio), passkey accuracy as accuracy. Holm holds the family-wise error of all their
difference and equivalence tests at 5 %; "alike" comes only from the equivalence test (TOST) at
the margin each names; a comparison that decides nothing is "cannot tell", with the smallest
difference it could have detected (80 % power). Everything else the report shows is exploratory:
numbers, no winner words.

Retrieval (:func:`retrieval_counts`) is a count over seeds: a seed has learned it when its own
accuracy at L (mean over depths) is at least :data:`RETRIEVES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from posembed.lab.context.published import CLAIMS, Claim
from posembed.lab.report.context_results import RETRIEVES, Results, display_name, group_text
from posembed.stats.verdict import Outcome, seeds_clause

__all__ = [
    "Primary",
    "PRIMARY",
    "PERPLEXITY_MARGIN",
    "PASSKEY_MARGIN",
    "RETRIEVES",
    "ONE_SEED",
    "comparisons",
    "verdicts",
    "retrieval_counts",
    "claim_length",
    "study_model",
]

#: equivalence margin of a perplexity comparison, on log perplexity: a ratio within 2 %
PERPLEXITY_MARGIN = math.log(1.02)
#: equivalence margin of a passkey comparison: 0.05 of accuracy (4 of 80 documents)
PASSKEY_MARGIN = 0.05
ONE_SEED = "cannot tell (1 seed)"


@dataclass(frozen=True)
class Primary:
    """One primary comparison: the published claim it tests and its equivalence margin."""

    claim: Claim
    margin: float

    @property
    def log_scale(self) -> bool:
        return self.claim.metric != "passkey_mean"


PRIMARY: tuple[Primary, ...] = tuple(
    Primary(claim, PASSKEY_MARGIN if claim.metric == "passkey_mean" else PERPLEXITY_MARGIN) for claim in CLAIMS
)


def study_model(name: str, body: dict) -> str:
    """The stored model name of a claim's side: ``rope+yarn`` -> ``rope+yarn@4x``."""
    return f"{name}@{body['finetune_scale']}x" if name.startswith("rope+") else name


def claim_length(results: Results, claim: Claim) -> int | None:
    body = results.body
    wanted = {
        "max": max(results.lengths, default=0),
        "ft": results.context * body["finetune_scale"],
        "2ft": results.context * body["finetune_scale"] * 2,
    }[claim.scale]
    return wanted if wanted in results.lengths else None


def _metric(claim: Claim) -> str:
    return "perplexity" if claim.metric == "perplexity_tie" else claim.metric


def _paired(results: Results, primary: Primary) -> tuple[str, str, list[float], list[float]] | None:
    """The claim's two arms (display names) and their values on the seeds both have."""
    claim, length = primary.claim, claim_length(results, primary.claim)
    if length is None:
        return None
    (better, b_method), (worse, w_method) = claim.better, claim.worse
    better, worse = study_model(better, results.body), study_model(worse, results.body)
    a = results.per_seed(better, b_method, length, _metric(claim))
    b = results.per_seed(worse, w_method, length, _metric(claim))
    seeds = sorted(a.keys() & b.keys())
    return (display_name(better, b_method), display_name(worse, w_method), [a[s] for s in seeds], [b[s] for s in seeds])


def comparisons(results: Results) -> dict[str, object]:
    """Claim key -> its :class:`posembed.stats.verdict.Comparison` (``a`` = the side published as better),
    or the reason it is not tested: ``"not measured"``, :data:`ONE_SEED`, ``"not testable ..."``."""
    from posembed.stats.verdict import Comparison

    out: dict[str, object] = {}
    for primary in PRIMARY:
        found = _paired(results, primary)
        if found is None or not found[2]:
            out[primary.claim.key] = "not measured"
            continue
        a, b, values_a, values_b = found
        if primary.claim.metric == "passkey_mean" and max(values_a + values_b) == 0.0:
            out[primary.claim.key] = "not testable (both retrieve nothing)"
        elif len(values_a) < 2:
            out[primary.claim.key] = ONE_SEED
        else:
            out[primary.claim.key] = Comparison(
                primary.claim.text,
                a,
                b,
                tuple(values_a),
                tuple(values_b),
                higher_is_better=primary.claim.metric == "passkey_mean",
                margin=primary.margin,
                test="paired",
                log_scale=primary.log_scale,
            )
    return out


def _word(claim: Claim, decision) -> str:
    """The claim's verdict from the family's decision."""
    c = decision.comparison
    tie = claim.metric == "perplexity_tie"
    if decision.outcome is Outcome.ALIKE:
        return "reproduces (alike)" if tie else f"does not reproduce (alike within {_margin_text(c)})"
    if decision.outcome is Outcome.A_BETTER:
        return "does not reproduce (a difference)" if tie else "reproduces"
    if decision.outcome is Outcome.B_BETTER:
        return "does not reproduce (a difference)" if tie else "does not reproduce (reversed)"
    if math.isnan(decision.p):  # every seed pair differs alike (posembed.stats.verdict): no spread, no test
        return "cannot tell (no spread over the seed pairs to test)"
    return f"cannot tell (could detect {_size_text(c, decision.mdd)}{seeds_clause(decision)})"


def _margin_text(c) -> str:
    return f"{math.exp(c.margin) - 1:.0%} of perplexity" if c.log_scale else f"{c.margin:g} of accuracy"


def _size_text(c, size: float) -> str:
    """A difference on the tested scale in the reader's units: a perplexity ratio or accuracy points."""
    if c.log_scale:
        return f"a ratio of {math.exp(size):.3g}x" if math.isfinite(size) else "no ratio"
    return f"{size:.2g} of accuracy" if size <= 1.0 else "no difference of accuracy (it would take more than 1)"


def _difference_text(decision) -> str:
    """``b`` against ``a`` as a perplexity ratio or a difference of accuracy, with its labelled interval."""
    c, (low, high) = decision.comparison, decision.interval
    if c.log_scale:
        return (
            f"perplexity ratio {c.b} : {c.a} = {math.exp(decision.difference):.3g} [{math.exp(low):.3g}, "
            f"{math.exp(high):.3g}] ({decision.interval_label} over the seed pairs, on log perplexity)"
        )
    return (
        f"accuracy {c.b} - {c.a} = {decision.difference:+.2f} [{low:+.2f}, {high:+.2f}] "
        f"({decision.interval_label} over the seed pairs)"
    )


def verdicts(results: Results, alpha: float = 0.05) -> list[dict]:
    """One row per primary comparison: both sides over the seeds, the tested difference with its
    interval, Holm-adjusted p of the difference and of equivalence, the verdict in words and whether the
    comparison decided (``decided``: a difference or an equivalence shown; the reports branch on it, and the
    HTML table leaves it out)."""
    from posembed.stats.verdict import Comparison, decide

    found = comparisons(results)
    tested = [c for c in found.values() if isinstance(c, Comparison)]
    decisions = dict(zip((c.name for c in tested), decide(tested, alpha))) if tested else {}
    rows = []
    for primary in PRIMARY:
        claim, comparison = primary.claim, found[primary.claim.key]
        row = {
            "claim": claim.text,
            "length": claim_length(results, claim),
            "seeds": 0,
            "ours": "not measured",
            "difference": "",
            "p (Holm)": None,
            "alike p (Holm)": None,
            "verdict": comparison,
            "decided": False,
        }
        paired = _paired(results, primary)
        if paired is not None and paired[2]:
            a, b, values_a, values_b = paired
            row["seeds"] = len(values_a)
            row["ours"] = (
                f"{a} {group_text(values_a, primary.log_scale)} vs {b} {group_text(values_b, primary.log_scale)}"
            )
        if isinstance(comparison, Comparison):
            decision = decisions[comparison.name]
            row.update(
                {
                    "difference": _difference_text(decision),
                    "p (Holm)": decision.p_adjusted,
                    "alike p (Holm)": decision.p_equivalence_adjusted,
                    "verdict": _word(claim, decision),
                    "decided": decision.decides,
                }
            )
        rows.append(row)
    return rows


def retrieval_counts(results: Results) -> dict[str, tuple[int, int, list[float]]]:
    """Model -> ``(k, n, per-seed accuracies)``: on how many of its ``n`` seeds the model trained at
    L (RoPE as trained, each reference) reaches :data:`RETRIEVES` passkey accuracy at L."""
    out = {}
    for model, method in results.lines:
        if model.startswith("rope+") or method not in ("extrapolate", "none"):
            continue
        values = results.values(model, method, results.context, "passkey_mean")
        if values:
            out[model] = (sum(v >= RETRIEVES for v in values), len(values), values)
    return out
