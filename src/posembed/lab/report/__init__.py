"""``posembed lab report DIR``: the markdown and self-contained HTML report of a lab experiment.

:func:`write_report` reads ``DIR/results.sqlite`` and writes, atomically, ``DIR/report.md`` and
``DIR/report.html`` (figures embedded as base64 and saved beside as ``lab-*.png``, which the
markdown links). The report leads with the answer:

- a banner when the run is too small to conclude (:func:`too_small`: the smoke preset, one seed
  per group, or no primary comparison decided): then no verdict is a finding;
- a summary: each question with its verdict, linking to its section; which seeds explored and
  which confirm (the record the runner made before the run), and for a preview the study that decides;
- one section per seed question (:mod:`posembed.lab.report.questions`) and the calibration
  against published numbers (:mod:`posembed.lab.report.calibration`). Verdict words come only
  from the preset's primary comparisons and the paper checks, decided together
  (:mod:`posembed.lab.report.decisions`: seed-paired or Welch t, TOST for "alike", Holm over the
  family at 5 %, over every training point the trials were evaluated at); every other
  comparison is exploratory (numbers, no winner); where the questions it does not test are answered;
- the evidence: per task, a table of the task's metric at every evaluated length (mean ± std over
  seeds), the metric against test length per scheme (accuracy / exact match; perplexity against
  context 1x, 2x, 4x, 8x for the char LM) and the training loss curves;
- the run (experiment, trials, seeds, corrupt rows skipped and why).

A corrupt row in the store is listed and skipped; a folder without a store, or a store without
any readable trial, raises ``ValueError``.

Files:

================= ==============================================================================
file              what
================= ==============================================================================
``write``         :func:`write_report`: the sections laid out as markdown and HTML; which run is too small
``tables``        what the report reads and how it summarises it: trials over seeds, mean +/- std
``decisions``     the family of tested comparisons (primaries at every training point, paper checks), decided once
``simulate``      the whole procedure simulated where nothing differs: its family-wise false-claim rate
``questions``     one :class:`Section` per seed question (Q1-Q5), computed from the stored trials
``rows``          a decision as the report writes it: its row, its verdict in words, the rule, over training
``calibration``   question 6: calibration against published numbers
``plots``         the figures: a metric against test length per scheme, training loss curves
``context``       the context study's section "Which context extension works?"
``context_plots`` the context report's figures
``context_results`` the context study's stored rows per seed, with display names from the factory
``context_verdicts`` the context study's primary comparisons, decided by :mod:`posembed.stats.verdict`
================= ==============================================================================

Example:
    >>> import tempfile
    >>> write_report(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: '...' holds no results.sqlite; run `posembed lab run --preset quick --out ...` first
"""

from posembed._utils.names import submodules
from posembed.lab.report.write import REPORT_HTML, REPORT_MD, SMOKE_PRESETS, build_sections, too_small, write_report

__all__ = ["write_report", "build_sections", "too_small", "SMOKE_PRESETS", "REPORT_MD", "REPORT_HTML"]
__getattr__ = submodules(__name__)  # posembed.lab.report.<file>: imported on first use
