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
the interval rules of :mod:`posembed.lab.verdicts`: each group's number per seed, its mean and
95 % bootstrap interval over the seeds, and ``cannot tell`` wherever the intervals overlap or a
group has one seed (the nanoGPT calibration is one run of a fixed recipe: no interval).
"""

from __future__ import annotations

from typing import Any

from posembed.lab.calibration import NANOGPT_CPU, TARGET_VAL_LOSS, TOLERANCE
from posembed.lab import verdicts as rules
from posembed.lab.report.questions import Section, compare, ranking_scores
from posembed.lab.report.tables import LabData
from posembed.lab.sweep.store import TrialRecord
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
    detail = "; ".join(f"{c.task}: {c.verdict('learned', 'sinusoidal')} (learned {c.a.interval.text(3)}, sinusoidal "
                       f"{c.b.interval.text(3)})" for c in comparisons)
    return rules.vaswani_intervals(c.verdict("learned", "sinusoidal") for c in comparisons), detail


def _seed_ratios(trials: list[TrialRecord], at_l: int, longest: int) -> list[float]:
    """Each seed's perplexity at ``longest`` over its perplexity at L (``inf``: not measurable there)."""
    ratios = []
    for trial in trials:
        ppl = trial.metric("perplexity")
        ratios.append(rules.perplexity_ratio(ppl.get(at_l), ppl.get(longest)))
    return ratios


def _press(data: LabData) -> tuple[str, str, list[list[Any]]]:
    scores = ranking_scores(data, "charlm", "perplexity") if "charlm" in data.tasks() else []
    groups = data.groups("charlm")
    ratios = {r.scheme: rules.Interval.of(_seed_ratios(groups[("charlm", r.scheme, "base")],
                                                        groups[("charlm", r.scheme, "base")][0].config.context,
                                                        r.longest)) for r in scores}
    rows = [[r.scheme, r.at_train, r.at_longest, r.longest, ratios[r.scheme].text(3), ratios[r.scheme].n]
            for r in scores]
    verdict = rules.press_intervals(ratios)
    if "alibi" not in ratios or not {"learned", "sinusoidal"} & set(ratios):
        return verdict, "needs charlm base trials of alibi and of learned or sinusoidal", rows
    parts = rules.press_parts(ratios)
    claims = [f"{s} ratio {ratios[s].text(3)}: fails (>= {FAIL_RATIO}) {parts[f'{s} fails']}"
              for s in ("learned", "sinusoidal") if s in ratios]
    compared = [s for s in ratios if s in PRESS_SCHEMES and s != "alibi"]
    claims.append(f"alibi ratio {ratios['alibi'].text(3)}: flatter than {', '.join(compared)} (within "
                  f"{FLAT_TOLERANCE:.0%}) {parts['alibi flattest']}")
    return verdict, "; ".join(claims), rows


def _kazemnejad(data: LabData) -> tuple[str, str]:
    per_task, details = {}, []
    for task in ("copy", "reverse"):
        scores = {r.scheme: r.interval for r in ranking_scores(data, task)} if task in data.tasks() else {}
        per_task[task] = scores
        favoured = [s for s in rules.KAZEMNEJAD_FAVOURED if s in scores]
        others = [s for s in scores if s not in favoured]
        if not favoured or not others:
            details.append(f"{task}: cannot tell (needs nope or t5_bias and another scheme, base variant)")
            continue
        verdict = rules.kazemnejad_task_intervals(scores)
        listed = ", ".join(f"{s} {r.text(3)}" for s, r in scores.items())
        details.append(f"{task}: {verdict} ({listed})")
    return rules.kazemnejad_intervals(per_task), "; ".join(details)


def calibration_section(data: LabData) -> Section:
    """Question 6: the nanoGPT calibration and agreement with three papers."""
    nanogpt, nano_rows = _nanogpt(data)
    vaswani, vaswani_detail = _vaswani(data)
    press, press_detail, press_rows = _press(data)
    kazemnejad, kazemnejad_detail = _kazemnejad(data)
    answer = (f"nanoGPT CPU calibration: {nanogpt}. Vaswani et al. (learned ≈ sinusoidal): {vaswani}. "
              f"Press et al. (learned/sinusoidal fail beyond L, ALiBi flattest): {press}. "
              f"Kazemnejad et al. (NoPE and T5 bias best on copy/reverse): {kazemnejad}.")
    section = Section("Q6. Calibration against published numbers", answer, anchor="q6",
                      verdict=f"Vaswani et al. {vaswani}; Press et al. {press}; Kazemnejad et al. {kazemnejad}; "
                              f"nanoGPT calibration: {nano_rows[0][6] if nano_rows else 'not run'}",
                      decided=any(v != rules.CANNOT_TELL for v in (vaswani, press, kazemnejad)))
    section.paragraphs += [
        f"nanoGPT (README, CPU run of train_shakespeare_char: 4 layers, 4 heads, width 128, block 64, batch 12, "
        f"2000 iterations, dropout 0): validation loss ≈ {TARGET_VAL_LOSS}; the lab must land within ± {TOLERANCE}.",
        f"Vaswani et al. 2017, Table 3 (E): {vaswani} — {vaswani_detail}.",
        f"Press et al. 2022: {press} — {press_detail}.",
        f"Kazemnejad et al. 2023: {kazemnejad} — {kazemnejad_detail}.",
    ]
    if nano_rows:
        section.tables.append((["trial", "seed", "steps", "validation loss", "ms per iteration", "seconds", "verdict"], nano_rows))
    if press_rows:
        section.tables.append((["charlm scheme", "perplexity at L", "perplexity at the longest", "longest",
                                f"ratio: mean [{rules.CONFIDENCE:.0%} interval]", "seeds"], press_rows))
    return section
