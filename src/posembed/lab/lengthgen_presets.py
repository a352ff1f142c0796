"""``lengthgen``: a length-generalisation sweep small enough for a CPU that still measures something.

The ``quick`` preset's copy and reverse (operands of 1..8 symbols, 300 steps, 2 layers) give 0
exact match past the training length for every scheme, so the questions of Kazemnejad et al.
2023 (NoPE > T5 > ALiBi > RoPE > absolute on decoder-only copy, reverse, ...) and Ruoss et al.
2023 (randomized positions help) stay open there. This preset changes what the probes below
showed matters:

- a larger alphabet (``vocab``): with 10 symbols a 16-symbol operand almost surely repeats a
  symbol, and copying by content (find the current symbol in the prompt, emit the next one) is
  ambiguous at every repeat, so only a position-exact rule works, and such a rule is what fails
  past L. With more symbols repeats are rarer and content copying carries further;
- longer training (``steps``) and evaluation lengths just past L (``1.25 L``, ``1.5 L``, ``2 L``),
  where a partial generalisation still shows as exact match above 0;
- the ``randomized`` variant (Ruoss et al.: training positions sampled sorted from ``[0,
  table)``, the table sized to the longest evaluated input) beside ``base``.

Measured numbers and the ordering they give: the module ``README`` text of the lead's report
(issue 16, item 5). Registered in :data:`posembed.lab.presets.PRESETS` as ``lengthgen``.

>>> exp = lengthgen()
>>> exp.tasks, exp.base("copy").context, exp.base("copy").eval_scales
(('copy',), 16, (1.0, 1.0625, 1.125, 1.25, 1.5, 2.0))
"""

from __future__ import annotations

from posembed.lab.config import ExperimentConfig, TrialConfig

__all__ = ["lengthgen", "LENGTHGEN_SCHEMES"]

#: the schemes Kazemnejad et al. rank (absolute = learned and sinusoidal here)
LENGTHGEN_SCHEMES = ("nope", "t5_bias", "alibi", "rope", "learned", "sinusoidal")
#: operand lengths tested: L = 16, one and two symbols past it (17, 18), then 20, 24, 32
_SCALES = (1.0, 1.0625, 1.125, 1.25, 1.5, 2.0)


def _base(task: str) -> TrialConfig:
    return TrialConfig(
        task=task, context=16, vocab=32, dim=64, depth=2, heads=4, batch=32, steps=1500, lr=3e-3, min_lr=3e-4,
        warmup=100, eval_scales=_SCALES, eval_batches=8, log_every=30,
    )


def lengthgen() -> ExperimentConfig:
    """Copy (and reverse, when asked with ``tasks=copy,reverse``) trained on operands of 1..16
    symbols and tested at 16, 20, 24 and 32, every scheme Kazemnejad et al. rank, base and
    randomized positions, one seed."""
    return ExperimentConfig(
        name="lengthgen",
        tasks=("copy",),
        schemes=LENGTHGEN_SCHEMES,
        variants=("base", "randomized"),
        seeds=(0,),
        bases=(_base("copy"), _base("reverse")),
    )
