"""Named experiments, looked up by exact name: ``smoke``, ``quick``, ``full``, ``survey``,
``calibration``, ``lengthgen`` (:mod:`posembed.lab.lengthgen.presets`: copy beyond the training length).

Each preset names its primary comparisons before the run (:data:`PRIMARY`; the questions, the
commit and the seeds are recorded in the run's store when it starts: :mod:`posembed.lab.registration`);
the report tests them at every training point the trials were evaluated at (``eval_at``), with
the paper checks, as one family, and shows everything else as exploratory numbers. ``quick`` is
the preview (a small model on the 7 seeds the questions were named from, minutes on a CPU);
``full`` is the study that decides them: models that reach about 1.8 nats, on fresh seeds
(:data:`STUDY_SEEDS`); ``survey`` trains every task with every 1-D scheme, the later ones
(:data:`LATER_SCHEMES`) beside the classic ones, on 3 seeds (exploratory numbers). The questions
(typed :class:`Primary` and :class:`Interaction` entries, groups as :class:`Group`, measures as
:class:`Measure`):

- Q1, learned vs sinusoidal at the training length: the ``base`` variant of both (the char LM's
  validation loss at 1x context);
- Q2, add vs concat at equal width: the ``concat`` variant (``dim`` total channels, half of them
  position) against ``base`` (``add``), for learned and for sinusoidal, and their interaction
  (the seed-paired difference of differences: does the answer depend on the scheme?);
- Q3, once vs every layer: the ``every_layer`` variant against ``base``, for learned and for
  sinusoidal, and their interaction; the amplitude control ``scaled_sinusoidal`` (a sinusoid of a
  learned table's size) once vs every layer, and its interaction with the plain sinusoid;
- Q4, extrapolation: ALiBi vs NoPE on the matched 8x/1x ratio (:attr:`Measure.MATCHED_RATIO`); every
  scheme's order beyond L is shown as exploratory numbers;
- Q5, frozen vs trained position table, and its drift (``frozen`` against ``base`` for schemes with
  parameters; ``drift_rel_frobenius`` / ``drift_cosine`` in the store): exploratory where run.

Variants that only make sense for absolute schemes (``concat``, ``every_layer``, ``untied``) or
for schemes with parameters (``frozen``) are skipped for the others by the runner, and so are
the causal-only schemes (FIRE, forgetting gates, CoPE) on the bidirectional ``order`` encoder:
each scheme's own ``check_attention`` says which. The N-D rotary schemes (``rope_axial``,
``rope_pixtral``, ``mrope``) are for image/video positions and stay out of these 1-D sweeps.

>>> sorted(PRESETS)
['calibration', 'full', 'lengthgen', 'quick', 'smoke', 'survey']
>>> get_preset("smok")  # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
ValueError: unknown preset 'smok' (did you mean 'smoke'?);
known presets: calibration, full, lengthgen, quick, smoke, survey
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass

from posembed._utils.checks import did_you_mean
from posembed.lab.calibration import NANOGPT_CPU
from posembed.lab.config import ExperimentConfig, TrialConfig
from posembed.lab.lengthgen.presets import lengthgen

__all__ = [
    "PRESETS",
    "get_preset",
    "CLASSIC_SCHEMES",
    "LATER_SCHEMES",
    "Measure",
    "Group",
    "Primary",
    "Interaction",
    "PRIMARY",
    "primary_comparisons",
    "RATIO_MARGIN",
]

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


def _bases(
    *,
    dim: int,
    depth: int,
    heads: int,
    steps: int,
    lm_steps: int,
    algo_len: int,
    lm_context: int,
    batch: int,
    eval_batches: int,
    lr: float,
    scheme_kwargs: tuple[tuple[str, object], ...] = (),
) -> tuple[TrialConfig, ...]:
    common = dict(
        dim=dim,
        depth=depth,
        heads=heads,
        batch=batch,
        eval_batches=eval_batches,
        lr=lr,
        min_lr=lr / 10,
        warmup=min(100, steps // 10),
        log_every=max(1, steps // 50),
        scheme_kwargs=scheme_kwargs,
    )
    algo = dict(common, steps=steps, context=algo_len, eval_scales=_ALGO_SCALES, vocab=10)
    return (
        TrialConfig(task="order", **dict(common, steps=steps, context=2 * algo_len, eval_scales=(1.0, 2.0), vocab=16)),
        TrialConfig(task="copy", **algo),
        TrialConfig(task="reverse", **algo),
        TrialConfig(task="sort", **algo),
        TrialConfig(task="addition", **dict(algo, context=max(2, algo_len // 2))),
        TrialConfig(
            task="charlm",
            **dict(
                common, steps=lm_steps, context=lm_context, eval_scales=_LM_SCALES, log_every=max(1, lm_steps // 50)
            ),
        ),
    )


def _smoke() -> ExperimentConfig:
    return ExperimentConfig(
        name="smoke",
        tasks=("order", "copy", "charlm"),
        schemes=("learned", "sinusoidal", "rope", "alibi", "nope"),
        variants=("base",),
        seeds=(0,),
        bases=_bases(
            dim=32,
            depth=1,
            heads=2,
            steps=50,
            lm_steps=50,
            algo_len=6,
            lm_context=16,
            batch=16,
            eval_batches=2,
            lr=3e-3,
        ),
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
    the CPU trains in minutes. Its verdicts are about that model; ``full`` is the study that decides.
    Its blocks have no biases and it steps with torch's fused AdamW kernel (nanoGPT's recipe, as the
    calibration preset): 1.37x the step of biases and the for-loop AdamW at this size, side by side."""
    bases = _bases(
        dim=64, depth=2, heads=4, steps=300, lm_steps=300, algo_len=8, lm_context=32, batch=32, eval_batches=2, lr=3e-3
    )
    return ExperimentConfig(
        name="quick",
        tasks=("charlm",),
        schemes=LM_SCHEMES,
        variants=LM_VARIANTS,
        seeds=tuple(range(7)),
        bases=tuple(dataclasses.replace(base, eval_at=EVAL_AT, bias=False, optimizer="adamw_fused") for base in bases),
    )


def _full() -> ExperimentConfig:
    """The study that decides: nanoGPT's CPU-sized char LM (4 layers, width 128, context 64, batch 12,
    no biases, AdamW with decay 0.1 and beta2 0.99, clipping at 1) at twice nanoGPT's learning rate for
    1500 steps, which reaches about 1.8 nats on tinyshakespeare, every arm on the fresh
    :data:`STUDY_SEEDS`, evaluated at :data:`EVAL_AT` of its training."""
    lm = TrialConfig(
        task="charlm",
        dim=128,
        depth=4,
        heads=4,
        mlp_ratio=4,
        dropout=0.0,
        bias=False,
        context=64,
        batch=12,
        steps=1500,
        lr=2e-3,
        min_lr=2e-4,
        warmup=100,
        weight_decay=0.1,
        beta2=0.99,
        grad_clip=1.0,
        eval_scales=_LM_SCALES,
        eval_at=EVAL_AT,
        eval_batches=8,
        log_every=30,
    )
    return ExperimentConfig(
        name="full",
        tasks=("charlm",),
        schemes=LM_SCHEMES,
        variants=LM_VARIANTS,
        seeds=STUDY_SEEDS,
        bases=(lm,),
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
        bases=_bases(
            dim=128,
            depth=4,
            heads=4,
            steps=2000,
            lm_steps=2000,
            algo_len=20,
            lm_context=64,
            batch=64,
            eval_batches=8,
            lr=1e-3,
            scheme_kwargs=(("cope.npos_max", _COPE_NPOS),),
        ),
    )


def _calibration() -> ExperimentConfig:
    return ExperimentConfig(
        name="calibration",
        tasks=("charlm",),
        schemes=("learned",),
        variants=("base",),
        seeds=(NANOGPT_CPU.seed,),
        bases=(NANOGPT_CPU,),
    )


#: equivalence margin of a log perplexity ratio ("alike" needs the whole difference within +/- log 1.05:
#: ratios within 5 %); a metric's own is its ``Metric.margin`` (:data:`posembed.lab.task_registry.METRICS`)
RATIO_MARGIN = 0.0488


class Measure(enum.Enum):
    """What a primary comparison measures on each seed.

    - ``AT_L``: the task's judged metric at the training length L (charlm: validation loss, nats);
    - ``MATCHED_RATIO``: ``matched_loss`` at the longest evaluated context minus at L, on the same
      characters at every length (the log of the matched perplexity ratio: 0 for a model that
      ignores distant context).
    """

    AT_L = "at L"
    MATCHED_RATIO = "matched ratio"


@dataclass(frozen=True)
class Group:
    """One arm of a comparison: a ``(scheme, variant)`` of the sweep.

    >>> Group("sinusoidal", "every_layer").key
    ('sinusoidal', 'every_layer')
    """

    scheme: str
    variant: str = "base"

    @property
    def key(self) -> tuple[str, str]:
        return self.scheme, self.variant


@dataclass(frozen=True)
class Primary:
    """A primary comparison, named before the run: group ``b`` against group ``a`` of ``task``.

    >>> Primary("Q1", "charlm", Group("learned"), Group("sinusoidal")).measure
    <Measure.AT_L: 'at L'>
    """

    question: str
    task: str
    a: Group
    b: Group
    measure: Measure = Measure.AT_L

    def __post_init__(self) -> None:
        if not isinstance(self.measure, Measure) or not isinstance(self.a, Group) or not isinstance(self.b, Group):
            raise TypeError(
                f"{self.question}: a and b are Groups and measure a Measure, got {self.a!r}, {self.b!r}, "
                f"{self.measure!r}"
            )


@dataclass(frozen=True)
class Interaction:
    """Whether a question's answer depends on the scheme: the seed-paired difference of differences
    ``(second.b - second.a) - (first.b - first.a)``, tested under the same rule as a :class:`Primary`.

    The two contrasts ask the same question of two schemes (``first.a`` and ``first.b`` share one
    scheme, ``second`` another), on the same seeds and data.
    """

    question: str
    first: Primary
    second: Primary

    def __post_init__(self) -> None:
        if (self.first.task, self.first.measure) != (self.second.task, self.second.measure):
            raise ValueError(
                f"{self.question}: an interaction compares one task and measure, got "
                f"{self.first.task}/{self.first.measure.value} and {self.second.task}/{self.second.measure.value}"
            )

    @property
    def task(self) -> str:
        return self.first.task

    @property
    def measure(self) -> Measure:
        return self.first.measure


def _variant_question(question: str, variant: str, schemes: tuple[str, ...]) -> tuple[Primary | Interaction, ...]:
    """``base`` against ``variant`` for each scheme, then the interaction of the first two schemes."""
    each = tuple(Primary(question, "charlm", Group(s), Group(s, variant)) for s in schemes)
    return (*each, Interaction(question, each[0], each[1]))


#: the questions the ``quick`` and ``full`` studies decide (one family each; everything else the
#: report shows is exploratory). Q1 at the same settings as Q2 and Q3; Q2 and Q3 for learned AND
#: sinusoidal, each with its interaction with the scheme (does the answer depend on the scheme?);
#: Q3's amplitude control: a unit-amplitude sinusoid re-added at every layer is a larger position
#: signal than a learned table (std 0.02), so ``scaled_sinusoidal`` (the sinusoid times a learned
#: scalar initialised to ``C**-0.5``, about a learned table's size) asks "every layer" at a
#: table-sized signal (its own once vs every layer), and the interaction sinusoidal vs
#: scaled_sinusoidal asks how much of sinusoidal's every-layer effect is amplitude (it nets out
#: what amplitude does to the once-injected model, which "sinusoidal every_layer vs
#: scaled_sinusoidal every_layer" alone would not). Q4: ALiBi against NoPE on the matched
#: perplexity ratio (the contest the 2026-11-26 exploration named: ALiBi and NoPE flattest).
_STUDY: tuple[Primary | Interaction, ...] = (
    Primary("Q1", "charlm", Group("learned"), Group("sinusoidal")),
    *_variant_question("Q2", "concat", ("learned", "sinusoidal")),
    *_variant_question("Q3", "every_layer", ("learned", "sinusoidal")),
    Primary("Q3", "charlm", Group("scaled_sinusoidal"), Group("scaled_sinusoidal", "every_layer")),
    Interaction(
        "Q3",
        Primary("Q3", "charlm", Group("scaled_sinusoidal"), Group("scaled_sinusoidal", "every_layer")),
        Primary("Q3", "charlm", Group("sinusoidal"), Group("sinusoidal", "every_layer")),
    ),
    Primary("Q4", "charlm", Group("alibi"), Group("nope"), Measure.MATCHED_RATIO),
)

#: each preset's primary comparisons (the family Holm controls, at every training point the
#: trials were evaluated at; the paper checks of Q6 join it at the end of training)
PRIMARY: dict[str, tuple[Primary | Interaction, ...]] = {"quick": _STUDY, "full": _STUDY}


def primary_comparisons(name: str) -> tuple[Primary | Interaction, ...]:
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
        raise ValueError(
            f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; known presets: {', '.join(sorted(PRESETS))}"
        )
    return PRESETS[name]()
