"""Question 6 of the lab report: calibration against published numbers.

- nanoGPT's CPU recipe on tinyshakespeare (:data:`posembed.lab.calibration.NANOGPT_CPU`):
  validation loss against ``TARGET_VAL_LOSS +/- TOLERANCE`` and the time per iteration, from any
  stored trial that trains that recipe (``posembed lab run --preset calibration``).
- Vaswani et al. 2017, Table 3 row (E): learned ~ sinusoidal at the training length.
- Press et al. 2022 (ALiBi): sinusoidal and learned fail beyond the training length
  (perplexity at the longest context >= ``FAIL_RATIO`` x the perplexity at L, or not measurable),
  while ALiBi degrades least (smallest ratio, within ``FLAT_TOLERANCE``).
- Kazemnejad et al. 2023: NoPE and T5 bias generalise best on copy and reverse (their best
  exact match beyond L is within the noise floor of every other scheme's best, and the
  schemes are not all tied).

Each verdict (agree / disagree / partly / cannot tell) is computed from the stored numbers by
the rules of :mod:`posembed.lab.verdicts` (the README's quoted verdicts are checked against them).
"""

from __future__ import annotations

import math
from typing import Any

from posembed.lab.calibration import NANOGPT_CPU, TARGET_VAL_LOSS, TOLERANCE
from posembed.lab import verdicts as rules
from posembed.lab.report_questions import Section, compare, ranking_scores
from posembed.lab.report_tables import LabData
from posembed.lab.store import TrialRecord
from posembed.lab.verdicts import FAIL_RATIO, FLAT_TOLERANCE, PRESS_SCHEMES
from posembed.lab.verdicts import combine as combine_verdicts

__all__ = ["calibration_section", "calibration_trials", "FAIL_RATIO", "FLAT_TOLERANCE", "combine_verdicts"]

_RECIPE = ("task", "scheme", "combine", "inject", "untied", "freeze_positions", "randomized_positions", "dim",
           "depth", "heads", "mlp_ratio", "dropout", "context", "batch", "lr", "min_lr", "warmup", "weight_decay",
           "beta2", "grad_clip")


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
        rows.append([trial.trial_id, trial.config.seed, trial.config.steps, loss, 1000 * trial.seconds_per_step,
                     trial.seconds, verdict])
    if not rows:
        return ("no stored trial trains nanoGPT's CPU recipe (run `posembed lab run --preset calibration --out DIR` "
                "and report that folder)"), rows
    first = rows[0]
    return (f"val loss {first[3]:.4f} vs {TARGET_VAL_LOSS} ± {TOLERANCE}: {first[6]}, "
            f"{first[4]:.1f} ms/iteration" if first[3] is not None else f"{first[6]}"), rows


def _vaswani(data: LabData) -> tuple[str, str]:
    comparisons = [c for task in data.tasks() if (c := compare(data, task, ("learned", "base"), ("sinusoidal", "base")))]
    if not comparisons:
        return "cannot tell", "no task has both learned and sinusoidal base trials"
    detail = "; ".join(f"{c.task}: {c.verdict('learned', 'sinusoidal')} (Δ {c.delta:+.3g}, noise {c.noise:.2g})"
                       for c in comparisons)
    return rules.vaswani(c.verdict("learned", "sinusoidal") == "alike" for c in comparisons), detail


def _press(data: LabData) -> tuple[str, str, list[list[Any]]]:
    scores = ranking_scores(data, "charlm", "perplexity") if "charlm" in data.tasks() else []
    ratios = {r.scheme: rules.perplexity_ratio(r.at_train, r.at_longest) for r in scores}
    rows = [[r.scheme, r.at_train, r.at_longest, r.longest, ratios[r.scheme]] for r in scores]
    verdict = rules.press(ratios)
    if verdict == rules.CANNOT_TELL:
        return verdict, "needs charlm base trials of alibi and of learned or sinusoidal", rows
    claims = [f"{s} ppl ratio {ratios[s]:.3g} ({'fails' if rules.press_fails(ratios[s]) else 'does not fail'}, "
              f"threshold {FAIL_RATIO})" for s in ("learned", "sinusoidal") if s in ratios]
    compared = {s: r for s, r in ratios.items() if s in PRESS_SCHEMES}
    best = min(compared, key=compared.get)
    standing = "flattest" if rules.press_flattest(ratios) else f"not flattest: {best} {ratios[best]:.3g}"
    claims.append(f"alibi ratio {ratios['alibi']:.3g} ({standing} among {', '.join(compared)}, "
                  f"within {FLAT_TOLERANCE:.0%})")
    return verdict, "; ".join(claims), rows


def _kazemnejad(data: LabData) -> tuple[str, str]:
    per_task, details = {}, []
    for task in ("copy", "reverse"):
        scores = {r.scheme: r.beyond for r in ranking_scores(data, task)} if task in data.tasks() else {}
        per_task[task] = scores
        favoured = [s for s in rules.KAZEMNEJAD_FAVOURED if s in scores]
        others = [s for s in scores if s not in favoured]
        if not favoured or not others:
            details.append(f"{task}: cannot tell (needs nope or t5_bias and another scheme, base variant)")
            continue
        values = {s: (-math.inf if v is None else v) for s, v in scores.items()}
        best_favoured, best_other = max(values[s] for s in favoured), max(values[s] for s in others)
        verdict = rules.kazemnejad_task(scores)
        if verdict == rules.CANNOT_TELL:
            details.append(f"{task}: cannot tell (all schemes tied at exact match ≈ {best_other:.3g} beyond L)")
        else:
            details.append(f"{task}: {verdict} (best of nope/t5_bias {best_favoured:.3g} vs best other {best_other:.3g})")
    return rules.kazemnejad(per_task), "; ".join(details)


def calibration_section(data: LabData) -> Section:
    """Question 6: the nanoGPT calibration and agreement with three papers."""
    nanogpt, nano_rows = _nanogpt(data)
    vaswani, vaswani_detail = _vaswani(data)
    press, press_detail, press_rows = _press(data)
    kazemnejad, kazemnejad_detail = _kazemnejad(data)
    answer = (f"nanoGPT CPU calibration: {nanogpt}. Vaswani et al. (learned ≈ sinusoidal): {vaswani}. "
              f"Press et al. (learned/sinusoidal fail beyond L, ALiBi flattest): {press}. "
              f"Kazemnejad et al. (NoPE and T5 bias best on copy/reverse): {kazemnejad}.")
    section = Section("Q6. Calibration against published numbers", answer)
    section.paragraphs += [
        f"nanoGPT (README, CPU run of train_shakespeare_char: 4 layers, 4 heads, width 128, block 64, batch 12, "
        f"2000 iterations, dropout 0): validation loss ≈ {TARGET_VAL_LOSS}; the lab must land within ± {TOLERANCE}.",
        f"Vaswani et al. 2017, Table 3 (E): {vaswani} — {vaswani_detail}.",
        f"Press et al. 2022: {press} — {press_detail}.",
        f"Kazemnejad et al. 2023: {kazemnejad} — {kazemnejad_detail}.",
    ]
    if nano_rows:
        section.tables.append((["trial", "seed", "steps", "val loss", "ms/iteration", "seconds", "verdict"], nano_rows))
    if press_rows:
        section.tables.append((["charlm scheme", "ppl @ L", "ppl @ longest", "longest", "ratio"], press_rows))
    return section
