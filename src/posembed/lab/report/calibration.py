"""Question 6 of the lab report: calibration against published numbers.

- nanoGPT's CPU recipe on tinyshakespeare (:data:`posembed.lab.calibration.NANOGPT_CPU`):
  validation loss against ``TARGET_VAL_LOSS +/- TOLERANCE`` and the time per iteration, from any
  stored trial that trains that recipe (``posembed lab run --preset calibration``): one run of a
  fixed recipe, checked against a published tolerance, not a comparison of groups.
- Vaswani et al. 2017, Table 3 row (E): learned ~ sinusoidal (a no-difference finding): ``agree``
  only where the equivalence test puts Q1's difference within the margin ("alike"), ``disagree``
  only where the difference is shown to lie *beyond* the margin at the family's level
  (:data:`~posembed.lab.report.decisions.VASWANI_BEYOND`); a difference shown but not beyond the
  margin cannot tell. That paper measured BLEU on translation, this lab nats on a character LM:
  the check compares the finding "no difference", never the numbers.
- Press et al. 2022 (ALiBi): learned and sinusoidal fail beyond L (the *matched* 8x/1x
  perplexity ratio above ``FAIL_RATIO``: a seed-paired test of each seed's log matched ratio
  against log 1.5), and ALiBi degrades least (better than each scheme that paper compared; a
  scheme shown alike to ALiBi within the margin contradicts "least"). That paper measured
  word-level WikiText-103 models; the threshold is applied to a character LM here.
- Kazemnejad et al. 2023: NoPE or T5 bias generalise best on copy and reverse (one of them
  better than, or alike to, every other scheme beyond L).

Every part is a comparison of the report's one family (:mod:`posembed.lab.report.decisions`):
tested with the seed as the unit, Holm over the family at 5 %. A part that cannot tell makes the
paper's verdict ``cannot tell``; parts that disagree with each other make it ``partly``.
"""

from __future__ import annotations

import math
from typing import Any

from posembed.lab import verdicts as rules
from posembed.lab.calibration import NANOGPT_CPU, TARGET_VAL_LOSS, TOLERANCE
from posembed.lab.report.decisions import THRESHOLD, VASWANI_BEYOND, LabDecisions, beyond_margin
from posembed.lab.report.questions import DECISION_HEADER, Section, decision_row, ranking_scores
from posembed.lab.report.tables import LabData
from posembed.lab.sweep.store import TrialRecord
from posembed.lab.verdicts import FAIL_RATIO
from posembed.stats.verdict import Decision, Outcome, distinguishing

__all__ = ["calibration_section", "calibration_trials", "FAIL_RATIO"]

_RECIPE = (
    "task",
    "scheme",
    "combine",
    "inject",
    "untied",
    "freeze_positions",
    "randomized_positions",
    "dim",
    "depth",
    "heads",
    "mlp_ratio",
    "dropout",
    "context",
    "batch",
    "lr",
    "min_lr",
    "warmup",
    "weight_decay",
    "beta2",
    "grad_clip",
)


def calibration_trials(data: LabData) -> list[TrialRecord]:
    """Stored trials that train nanoGPT's CPU recipe (any seed, any number of steps)."""
    return [t for t in data.trials if all(getattr(t.config, k) == getattr(NANOGPT_CPU, k) for k in _RECIPE)]


def _nanogpt(data: LabData) -> tuple[str, list[list[Any]]]:
    rows, verdicts = [], []
    for trial in calibration_trials(data):
        loss = trial.metric("val_loss").get(trial.config.context)
        if trial.config.steps != NANOGPT_CPU.steps or trial.config.text != NANOGPT_CPU.text:
            verdict = f"not comparable ({trial.config.steps} steps on {trial.config.text!r})"
        elif loss is None:
            verdict = "n/a (no validation loss)"
        else:
            verdict = rules.nanogpt(loss, TARGET_VAL_LOSS, TOLERANCE)
        verdicts.append(verdict)
        rows.append(
            [
                trial.trial_id,
                trial.config.seed,
                trial.config.steps,
                loss,
                1000 * trial.seconds_per_step,
                trial.seconds,
                verdict,
            ]
        )
    if not rows:
        return (
            "no stored trial trains nanoGPT's CPU recipe "
            "(run `posembed lab run --preset calibration --out lab-calibration` and report that folder)"
        ), rows
    first = rows[0]
    return (
        f"val loss {first[3]:.4f} vs {TARGET_VAL_LOSS} ± {TOLERANCE}: {first[6]}, {first[4]:.1f} ms/iteration"
        if first[3] is not None
        else f"{first[6]}"
    ), rows


def _vaswani(decisions: LabDecisions) -> tuple[rules.PaperVerdict, str, list[Decision]]:
    tested = [d for d in decisions.primaries("Q1") if d.comparison.name.startswith("Q1 charlm")]
    if not tested:
        return rules.CANNOT_TELL, "no primary learned vs sinusoidal comparison in this store", []
    (q1,) = tested
    beyond = decisions.by_name.get(VASWANI_BEYOND)
    shown = tested + ([beyond] if beyond is not None else [])
    verdict = rules.no_difference(q1.outcome is Outcome.ALIKE, beyond is not None and beyond_margin(beyond))
    if verdict == rules.AGREE:
        why = "the equivalence test puts the difference within the margin"
    elif verdict == rules.DISAGREE:
        why = f"the difference is shown to lie beyond the {q1.comparison.margin:g}-nat margin"
    elif q1.winner is not None:
        why = (
            "a difference is shown, but not beyond the margin "
            "(the equivalence test does not fail at the family's level)"
        )
    else:
        why = "neither equivalence nor a difference is shown"
    return verdict, f"Q1 {q1.word}: {why}", shown


def _ratio_text(values: tuple[float, ...]) -> str:
    """Mean matched ratio and its interval (from the per-seed log ratios), each with the digits that
    place it against the 1.5 threshold."""
    mean, low, high, label = rules.describe(list(values))
    shown = [distinguishing(math.exp(v), [FAIL_RATIO]) for v in (mean, low, high)]
    return f"{shown[0]} [{shown[1]}, {shown[2]}] ({label}, geometric)" if len(values) > 1 else shown[0]


def _press(data: LabData, decisions: LabDecisions) -> tuple[rules.PaperVerdict, str, list[list[Any]], list[Decision]]:
    scores = ranking_scores(data, "charlm", "perplexity") if "charlm" in data.tasks() else []
    rows = [[r.scheme, r.at_train, r.at_longest, r.longest] for r in scores]
    tested = decisions.about("Press")
    fails = {d.comparison.a: d for d in tested if d.comparison.b == THRESHOLD}
    flatter = [d for d in tested if d.comparison.b != THRESHOLD]
    if not fails or not flatter:
        return (
            rules.CANNOT_TELL,
            "needs the matched loss (a store from before it has none) of charlm base trials of "
            "alibi and of learned or sinusoidal",
            rows,
            tested,
        )
    parts, claims = [], []
    for scheme, d in fails.items():
        part = rules.AGREE if d.winner == THRESHOLD else rules.DISAGREE if d.winner == scheme else rules.CANNOT_TELL
        parts.append(part)
        claims.append(f"{scheme} matched ratio {_ratio_text(d.comparison.values_a)}: fails (>= {FAIL_RATIO}) {part}")
    flat = (
        rules.AGREE
        if all(d.winner == "alibi" for d in flatter)
        else rules.DISAGREE
        if any(d.outcome is Outcome.ALIKE or d.winner not in (None, "alibi") for d in flatter)
        else rules.CANNOT_TELL
    )
    parts.append(flat)
    claims.append(
        f"alibi flatter than {', '.join(d.comparison.b for d in flatter)}: {flat} ("
        + ", ".join(f"against {d.comparison.b}: {d.word}" for d in flatter)
        + ")"
    )
    return rules.combine_strict(parts), "; ".join(claims), rows, tested


def _kazemnejad(data: LabData, decisions: LabDecisions) -> tuple[rules.PaperVerdict, str, list[Decision]]:
    parts, details, shown = [], [], []
    for task in ("copy", "reverse"):
        tested = decisions.about(f"Kazemnejad {task}")
        if not tested:
            details.append(f"{task}: cannot tell (needs nope or t5_bias and another scheme, base variant)")
            continue
        shown += tested
        by_favoured: dict[str, list[Decision]] = {}
        for d in tested:
            by_favoured.setdefault(d.comparison.b, []).append(d)
        if any(all(d.winner == f or d.outcome is Outcome.ALIKE for d in ds) for f, ds in by_favoured.items()):
            part = rules.AGREE
        elif all(any(d.winner not in (None, f) for d in ds) for f, ds in by_favoured.items()):
            part = rules.DISAGREE
        else:
            part = rules.CANNOT_TELL
        parts.append(part)
        details.append(f"{task}: {part}")
    if not parts:
        return rules.CANNOT_TELL, "; ".join(details) + f" (the presets {', '.join(_with_copy())} train copy)", shown
    return rules.combine_strict(parts), "; ".join(details), shown


def _with_copy() -> list[str]:
    from posembed.lab.report.questions import presets_with

    return presets_with(schemes=("nope", "t5_bias"), tasks=("copy", "reverse"))


def calibration_section(data: LabData, decisions: LabDecisions) -> Section:
    """Question 6: the nanoGPT calibration and agreement with three papers."""
    nanogpt, nano_rows = _nanogpt(data)
    vaswani, vaswani_detail, vaswani_tested = _vaswani(decisions)
    press, press_detail, press_rows, press_tested = _press(data, decisions)
    kazemnejad, kazemnejad_detail, kazemnejad_tested = _kazemnejad(data, decisions)
    answer = (
        f"nanoGPT CPU calibration: {nanogpt}. Vaswani et al. (learned ≈ sinusoidal): {vaswani}. "
        f"Press et al. (learned/sinusoidal fail beyond L, ALiBi flattest): {press}. "
        f"Kazemnejad et al. (NoPE and T5 bias best on copy/reverse): {kazemnejad}."
    )
    section = Section(
        "Q6. Do the published numbers hold here (nanoGPT, Vaswani, Press, Kazemnejad)?",
        answer,
        anchor="q6",
        verdict=f"Vaswani et al. {vaswani}; Press et al. {press}; Kazemnejad et al. {kazemnejad}; "
        f"nanoGPT calibration: {nano_rows[0][6] if nano_rows else 'not run'}",
        decided=any(v != rules.CANNOT_TELL for v in (vaswani, press, kazemnejad)),
    )
    section.paragraphs += [
        f"nanoGPT (README, CPU run of train_shakespeare_char: 4 layers, 4 heads, width 128, block 64, batch 12, "
        f"2000 iterations, dropout 0): validation loss ≈ {TARGET_VAL_LOSS}; the lab must land within ± {TOLERANCE}.",
        f"Vaswani et al. 2017, Table 3 (E): {vaswani} — {vaswani_detail}. {rules.NOT_COMPARABLE['Vaswani et al.']}.",
        f"Press et al. 2022: {press} — {press_detail}. {rules.NOT_COMPARABLE['Press et al.']}.",
        f"Kazemnejad et al. 2023: {kazemnejad} — {kazemnejad_detail}.",
        "Each part is a tested comparison of this report's family (Holm at 5 % over the family, at the end of "
        "training); a part that cannot tell makes the paper's verdict 'cannot tell'. Agreeing with a paper that "
        "found no difference needs the equivalence test; disagreeing needs the difference shown beyond the margin.",
    ]
    if nano_rows:
        section.tables.append(
            (["trial", "seed", "steps", "validation loss", "ms per iteration", "seconds", "verdict"], nano_rows)
        )
    tested = vaswani_tested + press_tested + kazemnejad_tested
    if tested:
        section.tables.append((list(DECISION_HEADER), [decision_row(d, decisions.look(d)) for d in tested]))
    if press_rows:
        section.tables.append(
            (["charlm scheme", "perplexity at L", "perplexity at the longest", "longest"], press_rows)
        )
    return section
