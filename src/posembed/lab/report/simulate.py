"""The whole lab procedure simulated where nothing differs: how often does a report claim a winner?

:func:`null_data` draws one store of a preset (its groups and seeds, the groups every primary
comparison of :data:`~posembed.lab.presets.PRIMARY` needs, and the schemes Press et al.
compared) in which every group has the same distribution at every training point; :func:`false_claims`
pushes each through :func:`~posembed.lab.report.decisions.lab_decisions` itself (every question,
every training point, the paper checks: :func:`~posembed.lab.report.decisions.family`) and
counts the reports with any "better" in the family (:func:`claims_winner`: decide's word rule).
Every such word is false here: no group differs, every matched ratio sits on Press's 1.5
threshold, and learned and sinusoidal differ by less than the margin (by nothing).

The looks are correlated as real training points are: a seed shares its data across groups (a
seed effect common to every group) and a trial's noise at one point carries into the next
(``rho``: the correlation between consecutive points). Holm holds under any dependence, so the
rate must stay at or under 5 % whatever ``rho``; ``per_look=True`` drops the family (each look
judged alone at 5 %), the procedure the rule exists to prevent, which the simulation must catch.

>>> import numpy as np
>>> rate, reports, looks = false_claims(np.random.default_rng(0), reports=4)
>>> reports, looks > 30
(4, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from posembed.lab.presets import Interaction, get_preset, primary_comparisons
from posembed.lab.report.decisions import MATCHED, VASWANI_BEYOND, family
from posembed.lab.report.tables import LabData
from posembed.lab.sweep.runner import expand
from posembed.lab.sweep.store import TrialRecord
from posembed.lab.tasks.base import EvalPoint
from posembed.lab.verdicts import FAIL_RATIO, PRESS_SCHEMES
from posembed.stats.verdict import ALPHA, Comparison, Estimate, estimate, holm, tost

__all__ = ["null_data", "false_claims", "claims_winner", "POINTS"]

#: the training points quick and full evaluate at (fractions of the steps)
POINTS = (0.1, 0.3, 1.0)


def _groups(preset: str) -> list[tuple[str, str]]:
    """The charlm groups of the preset's sweep, every group a primary needs, and Press's schemes."""
    found = {(cfg.scheme, cfg.variant) for cfg in expand(get_preset(preset)) if cfg.task == "charlm"}
    for asked in primary_comparisons(preset):
        for p in (asked.first, asked.second) if isinstance(asked, Interaction) else (asked,):
            found |= {p.a.key, p.b.key}
    found |= {(s, "base") for s in PRESS_SCHEMES}
    return sorted(found)


def _ar(rng: np.random.Generator, size: int, rho: float) -> np.ndarray:
    """``size`` standard normals, each correlated ``rho`` with the one before."""
    out = np.empty(size)
    out[0] = rng.standard_normal()
    for k in range(1, size):
        out[k] = rho * out[k - 1] + math.sqrt(1 - rho**2) * rng.standard_normal()
    return out


def null_data(
    rng: np.random.Generator,
    preset: str = "quick",
    points: Sequence[float] = POINTS,
    rho: float = 0.8,
    spread: float = 0.01,
    seed_spread: float = 0.01,
    shift: dict[tuple[str, str], Sequence[float]] | None = None,
) -> LabData:
    """One simulated store of ``preset`` in which no group differs (see the module docstring);
    ``shift`` moves a ``(scheme, variant)`` group's validation loss at each point (a true
    difference, for tests that need one)."""
    base = dataclasses.replace(get_preset(preset).base("charlm"), eval_at=tuple(points))
    seeds = get_preset(preset).seeds
    lengths = (base.context, 8 * base.context)
    trend = [2.3 + 0.5 * (1 - p) for p in points]  # the loss falls as the model trains; the same for every group
    seed_effect = {s: _ar(rng, len(points), rho) * seed_spread for s in seeds}
    trials = []
    for scheme, variant in _groups(preset):
        for seed in seeds:
            moved = np.array((shift or {}).get((scheme, variant), [0.0] * len(points)), dtype=float)
            loss = np.array(trend) + moved + seed_effect[seed] + spread * _ar(rng, len(points), rho)
            far = loss + math.log(FAIL_RATIO) + 2 * spread * _ar(rng, len(points), rho)
            evals = [
                [
                    EvalPoint(metric, n, float(v), step=step)
                    for metric in ("val_loss", MATCHED)
                    for n, v in zip(lengths, (loss[k], far[k]))
                ]
                + [
                    EvalPoint("perplexity", n, float(math.exp(v)), step=step)
                    for n, v in zip(lengths, (loss[k], far[k]))
                ]
                for k, step in enumerate(base.eval_steps)
            ]
            cfg = dataclasses.replace(base, scheme=scheme, variant=variant, seed=seed)
            trials.append(
                TrialRecord(
                    config=cfg,
                    evals=evals[-1],
                    during=[p for e in evals[:-1] for p in e],
                    curve=[],
                    drift=None,
                    num_params=1,
                    final_loss=float(loss[-1]),
                    seconds=1.0,
                    seconds_per_step=0.01,
                    checkpoint=None,
                    finished_at="",
                )
            )
    return LabData(Path("simulated"), {"name": preset}, trials)


def claims_winner(comparisons: Sequence[Comparison], alpha: float = ALPHA, per_look: bool = False) -> bool:
    """Whether :func:`~posembed.stats.verdict.decide` would say "better" anywhere in this family: Holm
    over every testable comparison's difference and equivalence p (at most one null of each
    holds), a "better" where the difference's adjusted p is under ``alpha``. The same rule as
    ``decide``'s words without its power side (the MDD, the seeds a "cannot tell" needs), which
    costs a simulation most of its time; ``tests/lab/test_simulate.py`` checks they agree.
    ``per_look``: each difference judged alone at ``alpha`` (no family)."""
    estimates = [estimate(c) for c in comparisons]
    testable = [i for i, e in enumerate(estimates) if not math.isnan(e.p)]
    if per_look:
        return any(estimates[i].p < alpha for i in testable)
    ps = [estimates[i].p for i in testable] + [tost(estimates[i], comparisons[i].margin) for i in testable]
    adjusted = holm(ps, max_true=max(1, len(testable)))
    return any(p < alpha and _false_side(comparisons[i], estimates[i]) for p, i in zip(adjusted, testable))


def _false_side(c: Comparison, e: Estimate) -> bool:
    """Whether a "better" from this comparison is a false claim where nothing differs: every one
    is, except the Vaswani test's on the inner side (it then says the difference is within the
    margin, which is true; :func:`~posembed.lab.report.decisions.beyond_margin`)."""
    if c.name != VASWANI_BEYOND:
        return True
    return (e.difference > 0) == (-float(c.b.rsplit(" ", 1)[-1]) > 0)


def false_claims(
    rng: np.random.Generator, reports: int, preset: str = "quick", per_look: bool = False, **draw: float
) -> tuple[float, int, int]:
    """``(rate, reports, looks)``: the share of ``reports`` simulated null reports whose family
    (:func:`~posembed.lab.report.decisions.family`: every question at every training point and the
    paper checks) holds any "better", and how many tested comparisons (looks) each held.
    ``per_look`` judges every look alone at 5 % instead (the rate the family prevents)."""
    wrong, looks = 0, 0
    for _ in range(reports):
        comparisons = family(null_data(rng, preset, **draw))[0]
        looks = len(comparisons)
        wrong += claims_winner(comparisons, per_look=per_look)
    return wrong / reports, reports, looks
