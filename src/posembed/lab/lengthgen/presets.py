"""``lengthgen``: a length-generalisation sweep small enough for a CPU that still measures something.

The ``quick`` preset's copy and reverse (operands of 1..8 symbols, 300 steps, 2 layers) give 0
exact match past the training length for every scheme, so the questions of Kazemnejad et al.
2023 (NoPE > T5 > ALiBi > RoPE > absolute on decoder-only copy, reverse, ...) and Ruoss et al.
2023 (randomized positions help) stay open there.

Probes (copy, L = 16, 2 layers, width 64, 1500 steps, one seed; exact match at 20, 24 and 32
was 0 in every one): lr 1e-3 leaves every scheme short of copying at L (RoPE 0.38, NoPE and
ALiBi 0); lr 3e-3 gets RoPE to 0.96 at L; a 64-symbol alphabet did not help and with 256
symbols (4 heads of dim 16) RoPE did not learn at all; randomized RoPE over a 128-position range
reached only 0.01 at L. This preset therefore keeps a 32-symbol
alphabet and lr 3e-3 and tests one and two symbols past L (17, 18) as well as 20, 24 and 32,
where a partial generalisation still shows; it runs every scheme Kazemnejad et al. rank, with
and without randomized positions (Ruoss et al.; the lab samples them from ``[0, table)``, the
table sized to the longest evaluated input, 65).

Measured (one seed, 256 sequences per length, 2 CPU cores under load: 755 s for the 11
trials), exact match at 16 / 17 / 18 / 20 / 24 / 32:

=================== ===== ===== ===== ===== ===== =====
scheme / variant       16    17    18    20    24    32
=================== ===== ===== ===== ===== ===== =====
rope                 .953  .535     0     0     0     0
rope randomized      .199  .164  .102  .059  .031  .027
alibi                .109  .105  .055  .012     0     0
t5_bias              .070  .047  .039     0     0     0
learned randomized   .086  .082  .031  .004     0     0
sinusoidal           .996  .004     0     0     0     0
learned              .910     0     0     0     0     0
nope                    0     0     0     0     0     0
=================== ===== ===== ===== ===== ===== =====

(sinusoidal randomized .027 / .012 / 0 / .004 / .004 / 0; t5_bias and alibi randomized 0
everywhere, not learned at L.) Absolute schemes generalise least, as published; NoPE, first in
Kazemnejad et al., does not learn copying at all in this budget; randomized positions are the
only way any scheme reaches 24 and 32 (RoPE), as Ruoss et al. report, but they cost accuracy
at L and the bias schemes did not learn with them. :mod:`posembed.lab.lengthgen.ranking` ranks a run's
schemes by mean reciprocal rank. Registered as ``lengthgen`` in :data:`posembed.lab.presets.PRESETS`.

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
        task=task,
        context=16,
        vocab=32,
        dim=64,
        depth=2,
        heads=4,
        batch=32,
        steps=1500,
        lr=3e-3,
        min_lr=3e-4,
        warmup=100,
        eval_scales=_SCALES,
        eval_batches=8,
        log_every=30,
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
