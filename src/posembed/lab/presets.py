"""Named experiments, looked up by exact name: ``smoke``, ``quick``, ``full``, ``survey``,
``calibration``, ``lengthgen`` (:mod:`posembed.lab.lengthgen.presets`: copy beyond the training length).

Each preset names its primary comparisons before the run (:data:`PRIMARY`); the report tests
them (and the paper checks) as one family and shows everything else as exploratory numbers.
``quick`` previews the char-LM questions on a small model and the 7 seeds that explored them
(minutes on a CPU); ``full`` is the study that decides them: models that reach about 1.8 nats, on
fresh seeds (:data:`STUDY_SEEDS`), each trial evaluated at 10 %, 30 % and 100 % of its training;
``survey`` trains every task with every 1-D scheme on 3 seeds (exploratory numbers). Each sweep
answers the lab's questions with one experiment:

- learned vs sinusoidal at the training length: the ``base`` variant of both schemes, every task
  (order accuracy, exact match at length L, validation loss at 1x context);
- add vs concat at equal width: the ``concat`` variant (``dim`` total channels, half of them
  position) against ``base`` (``add``) of the absolute schemes;
- once vs every layer: the ``every_layer`` variant against ``base``;
- extrapolation ranking: the ``base`` variant of every scheme on the algorithmic tasks (exact
  match beyond L) and ``charlm`` (perplexity at 2x, 4x, 8x the context); ``survey`` adds the
  later 1-D schemes (:data:`LATER_SCHEMES`: Kerple, Sandwich, FIRE, dynamic position bias,
  FoX forgetting gates, CoPE, DeBERTa) beside the classic ones;
- frozen vs trained position table, and its drift: ``frozen`` against ``base`` for schemes with
  parameters (``drift_rel_frobenius`` / ``drift_cosine`` in the store).

Variants that only make sense for absolute schemes (``concat``, ``every_layer``, ``untied``) or
for schemes with parameters (``frozen``) are skipped for the others by the runner, and so are
the causal-only schemes (FIRE, forgetting gates, CoPE) on the bidirectional ``order`` encoder:
each scheme's own ``check_attention`` says which. The N-D rotary schemes (``rope_axial``,
``rope_pixtral``, ``mrope``) are for image/video positions and stay out of these 1-D sweeps.

>>> sorted(PRESETS)
['calibration', 'full', 'lengthgen', 'quick', 'smoke', 'survey']
>>> get_preset("smok")
Traceback (most recent call last):
...
ValueError: unknown preset 'smok' (did you mean 'smoke'?); known presets: calibration, full, lengthgen, quick, smoke, survey
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from posembed._checks import did_you_mean
from posembed.lab.calibration import NANOGPT_CPU
from posembed.lab.config import ExperimentConfig, TrialConfig
from posembed.lab.lengthgen.presets import lengthgen

__all__ = ["PRESETS", "get_preset", "CLASSIC_SCHEMES", "LATER_SCHEMES", "Primary", "PRIMARY", "primary_comparisons",
           "RATIO_MARGIN"]

#: algorithmic tasks: train on operand lengths <= L, test to 3 L (Kazemnejad et al.: 2x)
_ALGO_SCALES = (0.5, 1.0, 1.5, 2.0, 3.0)
#: char LM: 1x, 2x, 4x, 8x the training context (Press et al. 2022)
_LM_SCALES = (1.0, 2.0, 4.0, 8.0)

#: the schemes of the lab's seed questions (absolute, rotary, ALiBi, T5, NoPE)
CLASSIC_SCHEMES = ("learned", "sinusoidal", "scaled_sinusoidal", "rope", "alibi", "t5_bias", "nope")
#: later 1-D schemes the ``full`` sweep trains beside them (FIRE, forgetting, CoPE: decoder tasks only)
LATER_SCHEMES = ("kerple", "sandwich", "fire", "dynamic_bias", "forgetting", "cope", "deberta")
#: CoPE's count of integer positions (``npos_max``; it has no default): the char LM's training
#: context, so every count reached in training has its own embedding (longer ones clamp)
_COPE_NPOS = 64


def _bases(*, dim: int, depth: int, heads: int, steps: int, lm_steps: int, algo_len: int, lm_context: int,
           batch: int, eval_batches: int, lr: float,
           scheme_kwargs: tuple[tuple[str, object], ...] = ()) -> tuple[TrialConfig, ...]:
    common = dict(dim=dim, depth=depth, heads=heads, batch=batch, eval_batches=eval_batches, lr=lr, min_lr=lr / 10,
                  warmup=min(100, steps // 10), log_every=max(1, steps // 50), scheme_kwargs=scheme_kwargs)
    algo = dict(common, steps=steps, context=algo_len, eval_scales=_ALGO_SCALES, vocab=10)
    return (
        TrialConfig(task="order", **dict(common, steps=steps, context=2 * algo_len, eval_scales=(1.0, 2.0), vocab=16)),
        TrialConfig(task="copy", **algo),
        TrialConfig(task="reverse", **algo),
        TrialConfig(task="sort", **algo),
        TrialConfig(task="addition", **dict(algo, context=max(2, algo_len // 2))),
        TrialConfig(task="charlm", **dict(common, steps=lm_steps, context=lm_context, eval_scales=_LM_SCALES,
                                          log_every=max(1, lm_steps // 50))),
    )


def _smoke() -> ExperimentConfig:
    return ExperimentConfig(
        name="smoke",
        tasks=("order", "copy", "charlm"),
        schemes=("learned", "sinusoidal", "rope", "alibi", "nope"),
        variants=("base",),
        seeds=(0,),
        bases=_bases(dim=32, depth=1, heads=2, steps=50, lm_steps=50, algo_len=6, lm_context=16, batch=16,
                     eval_batches=2, lr=3e-3),
    )


#: the schemes of the char-LM questions: the absolute ones in every variant (``scaled_sinusoidal``, a
#: sinusoid times a learned scalar that starts at ``C ** -0.5``, is the amplitude control of "every
#: layer"), and RoPE, ALiBi and NoPE for the extrapolation contest
LM_SCHEMES = ("learned", "sinusoidal", "scaled_sinusoidal", "rope", "alibi", "nope")
#: the variants the questions compare: add once (``base``), concatenate, add at every layer
LM_VARIANTS = ("base", "concat", "every_layer")
#: where during training every trial of ``quick`` and ``full`` is evaluated (fractions of its steps)
EVAL_AT = (0.1, 0.3, 1.0)
#: the seeds of the study that decides (``full``): fresh, never trained before its questions were
#: named; ``quick``'s seeds 0-6 are the ones that explored
STUDY_SEEDS = tuple(range(1000, 1008))


def _quick() -> ExperimentConfig:
    """A preview of the questions on a small model, on the 7 seeds that explored them: the char LM
    alone (2 layers, width 64, 300 steps: about 0.3 epoch, validation loss about 2.3 nats), which
    the CPU trains in minutes. Its verdicts are about that model; ``full`` is the study that decides."""
    bases = _bases(dim=64, depth=2, heads=4, steps=300, lm_steps=300, algo_len=8, lm_context=32, batch=32,
                   eval_batches=2, lr=3e-3)
    return ExperimentConfig(
        name="quick", tasks=("charlm",), schemes=LM_SCHEMES, variants=LM_VARIANTS, seeds=tuple(range(7)),
        bases=tuple(dataclasses.replace(base, eval_at=EVAL_AT) for base in bases),
    )


def _full() -> ExperimentConfig:
    """The study that decides: nanoGPT's CPU-sized char LM (4 layers, width 128, context 64, batch 12,
    no biases, AdamW with decay 0.1 and beta2 0.99, clipping at 1) at twice nanoGPT's learning rate for
    1500 steps, which reaches about 1.8 nats on tinyshakespeare, every arm on the fresh
    :data:`STUDY_SEEDS`, evaluated at :data:`EVAL_AT` of its training."""
    lm = TrialConfig(task="charlm", dim=128, depth=4, heads=4, mlp_ratio=4, dropout=0.0, bias=False, context=64,
                     batch=12, steps=1500, lr=2e-3, min_lr=2e-4, warmup=100, weight_decay=0.1, beta2=0.99,
                     grad_clip=1.0, eval_scales=_LM_SCALES, eval_at=EVAL_AT, eval_batches=8, log_every=30)
    return ExperimentConfig(
        name="full", tasks=("charlm",), schemes=LM_SCHEMES, variants=LM_VARIANTS, seeds=STUDY_SEEDS, bases=(lm,),
    )


def _survey() -> ExperimentConfig:
    """Every task with every 1-D scheme and variant on 3 seeds: exploratory numbers across the lab's
    whole range (the later schemes beside the classic ones), not a study that decides."""
    return ExperimentConfig(
        name="survey",
        tasks=("order", "copy", "reverse", "sort", "addition", "charlm"),
        schemes=(*CLASSIC_SCHEMES, *LATER_SCHEMES),
        variants=("base", "concat", "every_layer", "frozen", "untied", "randomized"),
        seeds=(0, 1, 2),
        bases=_bases(dim=128, depth=4, heads=4, steps=2000, lm_steps=2000, algo_len=20, lm_context=64, batch=64,
                     eval_batches=8, lr=1e-3, scheme_kwargs=(("cope.npos_max", _COPE_NPOS),)),
    )


def _calibration() -> ExperimentConfig:
    return ExperimentConfig(
        name="calibration", tasks=("charlm",), schemes=("learned",), variants=("base",), seeds=(NANOGPT_CPU.seed,),
        bases=(NANOGPT_CPU,),
    )


#: equivalence margin of a log perplexity ratio ("alike" needs the whole difference within +/- log 1.05:
#: ratios within 5 %); a metric's own is its ``Metric.margin`` (:data:`posembed.lab.task_registry.METRICS`)
RATIO_MARGIN = 0.0488


@dataclass(frozen=True)
class Primary:
    """A primary comparison, named before the run: group ``b`` against group ``a`` of ``task``.

    ``measure`` is ``"at L"`` (the task's judged metric at the training length: accuracy, exact
    match, or validation loss for charlm) or ``"ratio"`` (charlm perplexity at the longest context
    over perplexity at L, tested on the log scale). Groups are ``(scheme, variant)``.
    """

    question: str
    task: str
    a: tuple[str, str]
    b: tuple[str, str]
    measure: str = "at L"

    def __post_init__(self) -> None:
        if self.measure not in ("at L", "ratio"):
            raise ValueError(f"measure must be 'at L' or 'ratio', got {self.measure!r}")


_LEARNED, _SINUSOIDAL = ("learned", "base"), ("sinusoidal", "base")
#: each preset's primary comparisons (the family Holm controls; everything else is exploratory).
#: Q4's contest was named from the quick run of 2026-11-26: ALiBi had the flattest 8x/1x
#: perplexity ratio (0.925), NoPE the next (1.04). The paper checks of Q6 (Press et al.: ALiBi
#: against each scheme that paper compared, learned and sinusoidal against the 1.5 threshold)
#: join the family in the report, as every verdict word does.
PRIMARY: dict[str, tuple[Primary, ...]] = {
    "quick": (
        Primary("Q1", "charlm", _LEARNED, _SINUSOIDAL),
        Primary("Q2", "charlm", _LEARNED, ("learned", "concat")),
        Primary("Q3", "charlm", _SINUSOIDAL, ("sinusoidal", "every_layer")),
        Primary("Q4", "charlm", ("alibi", "base"), ("nope", "base"), "ratio"),
    ),
    "full": (
        Primary("Q1", "charlm", _LEARNED, _SINUSOIDAL),
        Primary("Q1", "copy", _LEARNED, _SINUSOIDAL),
        Primary("Q2", "charlm", _LEARNED, ("learned", "concat")),
        Primary("Q3", "charlm", _SINUSOIDAL, ("sinusoidal", "every_layer")),
        Primary("Q4", "charlm", ("alibi", "base"), ("nope", "base"), "ratio"),
    ),
}


def primary_comparisons(name: str) -> tuple[Primary, ...]:
    """The primary comparisons of the experiment called ``name``; quick's for one the lab does not
    name (a store made with ``--set`` on another preset is judged by quick's questions)."""
    return PRIMARY.get(name, PRIMARY["quick"])


#: preset name -> builder (exact names only; no prefixes or fuzzy matching)
PRESETS: dict[str, Callable[[], ExperimentConfig]] = {
    "smoke": _smoke,
    "quick": _quick,
    "full": _full,
    "survey": _survey,
    "calibration": _calibration,
    "lengthgen": lengthgen,
}


def get_preset(name: str) -> ExperimentConfig:
    """The experiment called exactly ``name``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; known presets: {', '.join(sorted(PRESETS))}")
    return PRESETS[name]()
