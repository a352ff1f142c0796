"""The context-extension study as one typed, frozen config, and its named presets.

A study trains a RoPE decoder and the ``references`` at context ``L`` (char LM on tinyshakespeare
with passkey documents mixed in), evaluates the RoPE model with every extension method of
:data:`~posembed.lab.context.methods.METHODS` at ``L * scales`` (perplexity and passkey accuracy per
depth), the references as they are, then fine-tunes the RoPE model at ``finetune_scale * L``
with each of ``finetune_methods`` (Chen et al. 2023 used ~1000 steps; this scales it down) and
evaluates those too.

The references (:data:`REFERENCES`) are the schemes published as length-robust, trained at L and
never extended: ALiBi, NoPE, FIRE, KERPLE (its logarithmic kernel, the paper's best), Sandwich
and CoPE; how each is built is its factory entry's
:class:`~posembed.schemes.factory.StudyReference` (:func:`posembed.lab.context.models.study_scheme`). The full
study (``context``) trains all of them; ``context-smoke`` trains ALiBi, NoPE and FIRE.

>>> sorted(CONTEXT_PRESETS)
['context', 'context-smoke']
>>> get_context_preset("context-smoke").context
96
>>> with_overrides(get_context_preset("context"), ["steps=10", "finetune_methods=linear"]).finetune_methods
('linear',)
>>> with_overrides(get_context_preset("context"), ["step=10"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown context key 'step'; keys: dim, depth, heads, text, context, ...
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass

from posembed._utils.checks import did_you_mean
from posembed.lab.config import TrainingConfig, check_fields
from posembed.lab.context.methods import METHODS
from posembed.lab.context.store import config_id_of, train_id_of
from posembed.schemes.factory import REFERENCE_SCHEMES

__all__ = ["ContextConfig", "CONTEXT_PRESETS", "REFERENCES", "SMOKE_REFERENCES", "get_context_preset", "with_overrides"]

#: schemes trained at L and evaluated as they are (no extension): the no-extension references,
#: in the order tables list them (the factory entries with a ``reference``, by its rank)
REFERENCES: tuple[str, ...] = REFERENCE_SCHEMES
#: the references of ``context-smoke`` (FIRE: the one whose evaluation past L differs from training,
#: its normaliser following the query position)
SMOKE_REFERENCES = ("alibi", "nope", "fire")


@dataclass(frozen=True, kw_only=True)
class ContextConfig(TrainingConfig):
    """Everything one context-extension study does (its hash keys the stored rows).

    The training fields are :class:`~posembed.lab.config.TrainingConfig`'s, read by
    :func:`~posembed.lab.context.train.train_steps` (with its passkey curriculum); a fine-tune
    trains by :func:`~posembed.lab.context.train.finetune_config` of it. The curriculum:
    ``passkey_only_steps`` of passkey rows alone, in the first ``passkey_adjacent_steps`` of which
    half the rows put the key sentence right before the question; then ``passkey_fraction`` of each
    batch.

    ``lm_windows`` counts held-out windows at the longest length; shorter lengths score more
    windows over the same characters, so every length is scored on the same text. ``seeds``: the
    study trains and evaluates everything once per seed (:meth:`per_seed`, each run keyed by its
    own :attr:`config_id`), and the report states each number's mean and 95 % interval over them.
    """

    name: str
    context: int = 96
    steps: int = 2000
    batch: int = 16
    lr: float = 3e-3
    warmup: int = 50
    passkey_fraction: float = 0.5
    passkey_only_steps: int = 800
    passkey_adjacent_steps: int = 300
    digits: int = 5
    scales: tuple[int, ...] = (1, 2, 4, 8)
    depths: int = 5
    passkey_samples: int = 16
    lm_windows: int = 8
    methods: tuple[str, ...] = METHODS
    references: tuple[str, ...] = REFERENCES
    finetune_methods: tuple[str, ...] = ("linear", "yarn")
    finetune_scale: int = 4
    finetune_steps: int = 100
    finetune_lr: float = 1e-3
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        from posembed.lab.tasks.passkey import min_length

        super().__post_init__()
        check_fields(self, positive=("digits", "depths", "passkey_samples", "lm_windows", "finetune_scale"))
        if (self.dim // self.heads) % 2:
            raise ValueError(f"dim={self.dim} over heads={self.heads} must give an even head dim (RoPE)")
        if (self.passkey_fraction or self.passkey_only_steps) and self.context + 1 < min_length(self.digits):
            raise ValueError(f"context={self.context} is below the passkey minimum {min_length(self.digits) - 1}")
        if not isinstance(self.passkey_only_steps, int) or self.passkey_only_steps < 0:
            raise ValueError(f"passkey_only_steps must be an integer >= 0, got {self.passkey_only_steps!r}")
        if (
            not isinstance(self.passkey_adjacent_steps, int)
            or not 0 <= self.passkey_adjacent_steps <= self.passkey_only_steps
        ):
            raise ValueError(
                f"passkey_adjacent_steps must be an integer in [0, passkey_only_steps={self.passkey_only_steps}], "
                f"got {self.passkey_adjacent_steps!r}"
            )
        if not 0.0 <= self.passkey_fraction <= 1.0:
            raise ValueError(f"passkey_fraction must be in [0, 1], got {self.passkey_fraction}")
        if not self.scales or any(not isinstance(s, int) or s < 1 for s in self.scales):
            raise ValueError(f"scales must be integers >= 1, got {self.scales}")
        for name, known in (("methods", METHODS), ("finetune_methods", METHODS), ("references", REFERENCES)):
            unknown = [m for m in getattr(self, name) if m not in known]
            if unknown:
                raise ValueError(f"{name}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
        if self.depths < 2:
            raise ValueError(f"depths must be >= 2 (0 and 1 at least), got {self.depths}")
        if (
            not self.seeds
            or any(not isinstance(s, int) or s < 0 for s in self.seeds)
            or len(set(self.seeds)) < len(self.seeds)
        ):
            raise ValueError(f"seeds must be distinct integers >= 0, at least one, got {self.seeds}")

    def per_seed(self) -> list[ContextConfig]:
        """One config per seed of :attr:`seeds` (``seed`` set to it): the runs the study is made of.

        >>> [c.seed for c in ContextConfig(name="x", seeds=(0, 2)).per_seed()]
        [0, 2]
        """
        return [dataclasses.replace(self, seed=seed) for seed in self.seeds]

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    @property
    def config_id(self) -> str:
        """16 hex digits of the config's SHA-256: one seed's run (the name and the study's list of
        ``seeds`` excluded: equal runs share rows, and a run keeps its id when the study adds seeds;
        ``passkey_adjacent_steps`` 0, what every study stored before the field existed, excluded too)."""
        return config_id_of(self.to_dict())

    @property
    def train_id(self) -> str:
        """16 hex digits over the fields that shape the trained models (not the evaluation, nor
        which references or methods a study lists, :data:`~posembed.lab.context.store.TRAIN_FIELDS`):
        trained and fine-tuned models are reused across studies that share it."""
        return train_id_of(self.to_dict())

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(sorted({self.context * s for s in self.scales}))


def _context() -> ContextConfig:
    return ContextConfig(name="context", seeds=(0, 1, 2))


def _context_smoke() -> ContextConfig:
    return ContextConfig(
        name="context-smoke",
        context=96,
        dim=32,
        depth=2,
        heads=2,
        steps=150,
        batch=8,
        lr=3e-3,
        warmup=10,
        passkey_only_steps=50,
        passkey_adjacent_steps=20,
        scales=(1, 2, 4),
        depths=3,
        passkey_samples=4,
        lm_windows=4,
        finetune_scale=2,
        finetune_steps=20,
        references=SMOKE_REFERENCES,
    )


#: preset name -> builder (exact names only)
CONTEXT_PRESETS: dict[str, Callable[[], ContextConfig]] = {"context": _context, "context-smoke": _context_smoke}


def get_context_preset(name: str) -> ContextConfig:
    """The study called exactly ``name``."""
    if name not in CONTEXT_PRESETS:
        raise ValueError(
            f"unknown context preset {name!r}{did_you_mean(name, CONTEXT_PRESETS)}; "
            f"known: {', '.join(sorted(CONTEXT_PRESETS))}"
        )
    return CONTEXT_PRESETS[name]()


def with_overrides(cfg: ContextConfig, overrides: list[str]) -> ContextConfig:
    """``cfg`` with ``key=value`` overrides (tuples comma-separated), typed by the field; unknown keys
    and bad values are ``ValueError`` s naming the key."""
    hints = typing.get_type_hints(ContextConfig)
    values = {}
    for item in overrides:
        key, eq, raw = item.partition("=")
        if not eq:
            raise ValueError(f"override {item!r} is not key=value")
        if key not in hints:
            raise ValueError(f"unknown context key {key!r}; keys: {', '.join(hints)}")
        values[key] = _parse(key, raw, hints[key])
    return dataclasses.replace(cfg, **values)


def _parse(key: str, raw: str, hint) -> object:
    origin = typing.get_origin(hint)
    kind = typing.get_args(hint)[0] if origin is tuple else hint
    parts = [p for p in raw.split(",") if p] if origin is tuple else [raw]
    try:
        parsed = [kind(p) if kind is not bool else p.lower() in ("1", "true", "yes") for p in parts]
    except ValueError:
        raise ValueError(f"{key}={raw!r}: expected {getattr(kind, '__name__', kind)}") from None
    return tuple(parsed) if origin is tuple else parsed[0]
