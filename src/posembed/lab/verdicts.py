"""Every verdict rule of the lab report, as a pure function of the numbers it judges.

The report (:mod:`posembed.lab.report_questions`, :mod:`posembed.lab.report_calibration`) and
the README's "What the lab measured here" section (checked by ``tests/test_readme_verdicts.py``)
both call these functions, so a verdict word is computed in one place only.

- :func:`pair_verdict`: two groups are ``alike`` when their means differ by no more than the
  noise, ``max(NOISE_FLOOR, 2 * sqrt(std_a^2 + std_b^2))`` (:func:`noise`; the floor alone with
  one seed), else the better one wins.
- :func:`vaswani`: Vaswani et al. 2017, Table 3 (E), learned ~ sinusoidal at the training
  length: ``agree`` per task where the two are alike, ``disagree`` where not.
- :func:`press`: Press et al. 2022 (ALiBi): learned and sinusoidal *fail* beyond L (perplexity
  at the longest context >= ``FAIL_RATIO`` x at L, or not measurable), and ALiBi degrades least
  among the schemes that paper compared (:data:`PRESS_SCHEMES`; smallest ratio within
  ``FLAT_TOLERANCE``). Schemes published later (Kerple, FIRE, ...) are not part of that claim.
- :func:`kazemnejad`: Kazemnejad et al. 2023: NoPE or T5 bias generalise best on copy and
  reverse (best exact match beyond L within the noise floor of every other scheme's best),
  ``cannot tell`` for a task where every scheme ties.
- :func:`nanogpt`: the calibration loss within ``tolerance`` of the published one.

Partial verdicts combine with :func:`combine`: all ``agree`` -> ``agree``, all ``disagree`` ->
``disagree``, a mix -> ``partly``, none -> ``cannot tell``.

>>> press({"learned": 15.9 / 10.6, "sinusoidal": 15.2 / 10.7, "alibi": 9.5 / 10.3})
'partly'
>>> vaswani([True, True, True, False]), combine([])
('partly', 'cannot tell')
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

__all__ = [
    "AGREE", "DISAGREE", "PARTLY", "CANNOT_TELL", "NOISE_FLOOR", "FAIL_RATIO", "FLAT_TOLERANCE", "PRESS_SCHEMES",
    "KAZEMNEJAD_FAVOURED", "combine", "noise", "pair_verdict", "vaswani", "perplexity_ratio", "press_fails",
    "press_flattest", "press", "kazemnejad_task", "kazemnejad", "nanogpt",
]

AGREE, DISAGREE, PARTLY, CANNOT_TELL = "agree", "disagree", "partly", "cannot tell"

#: smallest difference of means called a difference (accuracy/exact match: 2 points; loss: 0.02 nats)
NOISE_FLOOR = 0.02
#: perplexity at the longest context / at L from which a scheme "fails" beyond L
FAIL_RATIO = 1.5
#: relative slack allowed when calling a scheme the flattest
FLAT_TOLERANCE = 0.02
#: the schemes whose perplexity ratios Press et al. 2022 compared (learned: the lab's addition)
PRESS_SCHEMES = ("learned", "sinusoidal", "rope", "t5_bias", "alibi")
#: the schemes Kazemnejad et al. 2023 found to generalise best
KAZEMNEJAD_FAVOURED = ("nope", "t5_bias")


def combine(verdicts: Iterable[str]) -> str:
    """One verdict from several partial ones (``cannot tell`` and others are ignored).

    >>> combine(["agree", "agree"]), combine(["agree", "disagree"]), combine(["cannot tell"])
    ('agree', 'partly', 'cannot tell')
    """
    known = [v for v in verdicts if v in (AGREE, DISAGREE)]
    if not known:
        return CANNOT_TELL
    return known[0] if all(v == known[0] for v in known) else PARTLY


def noise(std_a: float, std_b: float, n_a: int, n_b: int) -> float:
    """``max(NOISE_FLOOR, 2 * sqrt(std_a^2 + std_b^2))``; the floor alone when a group has one seed.

    >>> round(noise(0.01, 0.0141, 2, 2), 4), noise(math.nan, 0.5, 1, 3)
    (0.0346, 0.02)
    """
    if n_a >= 2 and n_b >= 2:
        return max(NOISE_FLOOR, 2.0 * math.hypot(std_a, std_b))
    return NOISE_FLOOR


def pair_verdict(delta: float, noise_level: float, b_wins_when_higher: bool, name_a: str, name_b: str) -> str:
    """``alike``, ``<name> better`` or ``n/a`` for ``delta = mean(b) - mean(a)``.

    >>> pair_verdict(0.1, 0.04, True, "add", "concat"), pair_verdict(0.1, 0.04, False, "add", "concat")
    ('concat better', 'add better')
    >>> pair_verdict(0.03, 0.04, True, "a", "b"), pair_verdict(math.nan, 0.02, True, "a", "b")
    ('alike', 'n/a')
    """
    if math.isnan(delta):
        return "n/a"
    if abs(delta) <= noise_level:
        return "alike"
    return f"{name_b if (delta > 0) == b_wins_when_higher else name_a} better"


def vaswani(alike_per_task: Iterable[bool]) -> str:
    """Learned ~ sinusoidal: ``agree`` for each task where they are alike, combined."""
    return combine(AGREE if alike else DISAGREE for alike in alike_per_task)


def perplexity_ratio(at_train: float | None, at_longest: float | None) -> float:
    """Perplexity at the longest context over perplexity at L (``inf`` when not measurable)."""
    if at_longest is None or not at_train:
        return math.inf
    return at_longest / at_train


def press_fails(ratio: float) -> bool:
    """Whether a scheme with this perplexity ratio fails beyond L.

    >>> press_fails(1.42), press_fails(1.5), press_fails(math.inf)
    (False, True, True)
    """
    return ratio >= FAIL_RATIO


def press_flattest(ratios: Mapping[str, float]) -> bool:
    """Whether ALiBi's ratio is the smallest (within ``FLAT_TOLERANCE``) among :data:`PRESS_SCHEMES`."""
    compared = [r for scheme, r in ratios.items() if scheme in PRESS_SCHEMES]
    return ratios["alibi"] <= min(compared) * (1 + FLAT_TOLERANCE)


def press(ratios: Mapping[str, float]) -> str:
    """Press et al.'s verdict from the charlm perplexity ratios ``{scheme: ppl@longest / ppl@L}``.

    ``cannot tell`` without ALiBi, or without learned and sinusoidal.
    """
    if "alibi" not in ratios or not {"learned", "sinusoidal"} & set(ratios):
        return CANNOT_TELL
    parts = [AGREE if press_fails(ratios[s]) else DISAGREE for s in ("learned", "sinusoidal") if s in ratios]
    parts.append(AGREE if press_flattest(ratios) else DISAGREE)
    return combine(parts)


def kazemnejad_task(beyond: Mapping[str, float | None]) -> str:
    """One task's verdict from each scheme's mean exact match beyond L (``None``: not measurable).

    >>> kazemnejad_task({"nope": 0.0, "rope": 0.0, "learned": 0.0})
    'cannot tell'
    >>> kazemnejad_task({"nope": 0.31, "rope": 0.32, "learned": 0.0}), kazemnejad_task({"nope": 0.1, "rope": 0.5})
    ('agree', 'disagree')
    """
    values = {s: (-math.inf if v is None else v) for s, v in beyond.items()}
    favoured = [values[s] for s in KAZEMNEJAD_FAVOURED if s in values]
    others = [v for s, v in values.items() if s not in KAZEMNEJAD_FAVOURED]
    if not favoured or not others or max(values.values()) - min(values.values()) <= NOISE_FLOOR:
        return CANNOT_TELL
    return AGREE if max(favoured) >= max(others) - NOISE_FLOOR else DISAGREE


def kazemnejad(per_task: Mapping[str, Mapping[str, float | None]]) -> str:
    """Kazemnejad et al.'s verdict over copy and reverse (``{task: {scheme: exact match beyond L}}``)."""
    return combine(kazemnejad_task(per_task[task]) for task in ("copy", "reverse") if task in per_task)


def nanogpt(loss: float, target: float, tolerance: float) -> str:
    """``within`` or ``OUTSIDE`` the published validation loss ``target +/- tolerance``.

    >>> nanogpt(1.895, 1.886, 0.05), nanogpt(2.0, 1.886, 0.05)
    ('within', 'OUTSIDE')
    """
    return "within" if abs(loss - target) <= tolerance else "OUTSIDE"
