"""The lab's verdict words: the papers' thresholds and how partial verdicts combine.

The one rule every report decides by is :mod:`posembed.stats.verdict` (re-exported here: ``Comparison``,
``Decision``, ``decide``, ``describe``, ...): the seed as the unit, Holm over a report's family at
5 %, "alike" only from an equivalence test. The lab report (:mod:`posembed.lab.report.decisions`
and :mod:`posembed.lab.report.calibration`) and docs/results.md's lab section
(``tools/lab_page.py``, checked by ``tests/test_readme_verdicts.py``) use it; this module adds
only what the paper checks of question 6 state on top of those decisions:

- :data:`FAIL_RATIO`: Press et al. 2022 (ALiBi): learned and sinusoidal *fail* beyond L when
  perplexity at the longest context is at least this many times that at L; ALiBi degrades least
  among the schemes that paper compared (:data:`PRESS_SCHEMES`).
- :data:`KAZEMNEJAD_FAVOURED`: Kazemnejad et al. 2023: NoPE or T5 bias generalise best on copy
  and reverse.
- :func:`nanogpt`: the calibration loss within ``tolerance`` of the published one.
- :func:`combine_strict`: a paper's verdict from its parts (``agree`` / ``disagree`` each, from
  the decisions): one part that cannot tell makes it ``cannot tell``, a mix is ``partly``.
- :func:`no_difference`: the check of a paper that found *no* difference (Vaswani et al.: learned
  ~ sinusoidal): ``agree`` only where the equivalence test puts the difference within the margin,
  ``disagree`` only where the difference is shown beyond it, at the family's level; a difference
  shown but not beyond the margin cannot tell.
- :data:`NOT_COMPARABLE`: what a paper measured that the lab does not (BLEU on translation,
  word-level WikiText-103), said beside each check.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from posembed.stats.verdict import (
    Comparison,
    Decision,
    Estimate,
    decide,
    describe,
    distinguishing,
    holm,
    mcnemar,
    min_detectable_difference,
    paired_t,
    tost,
    welch,
)

__all__ = [
    "PaperVerdict", "AGREE", "DISAGREE", "PARTLY", "CANNOT_TELL", "FAIL_RATIO", "PRESS_SCHEMES",
    "KAZEMNEJAD_FAVOURED", "nanogpt", "ONE_SEED", "combine_strict", "no_difference", "NOT_COMPARABLE",
    # the one verdict rule (posembed.stats.verdict), re-exported
    "Comparison", "Decision", "Estimate", "decide", "describe", "distinguishing", "holm", "mcnemar",
    "min_detectable_difference", "paired_t", "tost", "welch",
]  # fmt: skip


class PaperVerdict(str, enum.Enum):
    """How a published finding fares here: data the report branches on, rendered as its value (``f"{v}"`` and
    JSON give ``"agree"``), so it is spelled in one place."""

    AGREE = "agree"
    DISAGREE = "disagree"
    PARTLY = "partly"
    CANNOT_TELL = "cannot tell"

    def __str__(self) -> str:
        return self.value


AGREE, DISAGREE, PARTLY, CANNOT_TELL = PaperVerdict

#: perplexity at the longest context / at L from which a scheme "fails" beyond L
FAIL_RATIO = 1.5
#: the schemes whose perplexity ratios Press et al. 2022 compared (learned: the lab's addition)
PRESS_SCHEMES = ("learned", "sinusoidal", "rope", "t5_bias", "alibi")
#: the schemes Kazemnejad et al. 2023 found to generalise best
KAZEMNEJAD_FAVOURED = ("nope", "t5_bias")
#: the verdict of a comparison that rests on one seed
ONE_SEED = "cannot tell (1 seed)"
#: what the paper checks cannot compare (said beside each verdict)
NOT_COMPARABLE = {
    "Vaswani et al.": "Vaswani et al. measured BLEU on WMT translation; this lab measures nats on a character LM, "
    "so only the finding (no difference) is checked, against this lab's margin, never the numbers",
    "Press et al.": "Press et al. measured word-level language models on WikiText-103; the 1.5 threshold and the "
    "ordering are checked on this lab's character LM",
}


def no_difference(alike: bool, beyond_margin: bool) -> PaperVerdict:
    """A no-difference finding checked: ``agree`` on equivalence, ``disagree`` on a difference shown
    beyond the margin, else ``cannot tell`` (a real difference inside the margin contradicts nothing).

    >>> [str(no_difference(*args)) for args in ((True, False), (False, True), (False, False))]
    ['agree', 'disagree', 'cannot tell']
    """
    if alike and beyond_margin:
        raise ValueError("a difference cannot be both within the margin and beyond it")
    return AGREE if alike else DISAGREE if beyond_margin else CANNOT_TELL


def nanogpt(loss: float, target: float, tolerance: float) -> str:
    """``within`` or ``OUTSIDE`` the published validation loss ``target +/- tolerance``.

    >>> nanogpt(1.895, 1.886, 0.05), nanogpt(2.0, 1.886, 0.05)
    ('within', 'OUTSIDE')
    """
    return "within" if abs(loss - target) <= tolerance else "OUTSIDE"


def combine_strict(verdicts: Iterable[PaperVerdict]) -> PaperVerdict:
    """One verdict from a paper's parts: all ``agree`` -> ``agree``, all ``disagree`` -> ``disagree``,
    a mix -> ``partly``; any part that cannot tell (or none) -> ``cannot tell``.

    >>> [str(combine_strict(parts)) for parts in ([AGREE, DISAGREE], [AGREE, CANNOT_TELL], [])]
    ['partly', 'cannot tell', 'cannot tell']
    >>> [str(combine_strict(parts)) for parts in ([AGREE, AGREE], [DISAGREE])]
    ['agree', 'disagree']
    """
    verdicts = list(verdicts)
    if not verdicts or any(v not in (AGREE, DISAGREE) for v in verdicts):
        return CANNOT_TELL
    return verdicts[0] if all(v == verdicts[0] for v in verdicts) else PARTLY
