"""Typed, frozen experiment configs and ``key=value`` overrides.

- :class:`TrainingConfig`: what every lab training run has, checked once, and what the lab's one
  loop :func:`posembed.lab.training.train.train_model` reads; the base of :class:`TrialConfig` and of the
  context study's :class:`~posembed.lab.context.presets.ContextConfig`.
- :class:`TrialConfig`: one training run (task, scheme, variant flags, model size,
  optimiser, seed, evaluation lengths). Its hash is the trial's id in the results store.
- :class:`ExperimentConfig`: a sweep, the axes ``tasks x schemes x variants x seeds`` over
  one base :class:`TrialConfig` per task. Its hash identifies the experiment in its store.

Overrides are strings ``key=value`` parsed by the field's declared type (no ``eval``): an
unknown key or a value of the wrong type is a ``ValueError`` naming the key and the type.
Experiment keys (``tasks``, ``schemes``, ``variants``, ``seeds``) change the axes; trial keys
(``steps=50``) change every task's base; ``task.key`` (``charlm.context=32``) one task's base.

>>> exp = ExperimentConfig(name="demo", tasks=("copy",), schemes=("learned",), seeds=(0,),
...                        bases=(TrialConfig(task="copy"),))
>>> exp = apply_overrides(exp, ["steps=50", "schemes=learned,alibi", "copy.context=6"])
>>> exp.schemes, exp.base("copy").steps, exp.base("copy").context
(('learned', 'alibi'), 50, 6)
>>> apply_overrides(exp, ["stepz=5"])  # doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
ValueError: unknown key 'stepz' (did you mean 'steps'?); experiment keys: name, tasks, schemes, variants, seeds;
trial keys: ...
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import typing
from dataclasses import dataclass, field
from typing import Any

from posembed._utils.checks import closest, did_you_mean
from posembed.lab.ids import content_id, without_later_defaults
from posembed.lab.task_registry import TASKS

#: ``TASKS`` (task name -> the model it trains) is the task registry's (:mod:`posembed.lab.task_registry`)
__all__ = [
    "TASKS",
    "VARIANTS",
    "BASE_BESIDE",
    "TrainingConfig",
    "TrialConfig",
    "ExperimentConfig",
    "apply_overrides",
    "check_fields",
    "config_hash",
    "parse_value",
]

#: variant name -> the TrialConfig fields it sets (applied on top of a task's base)
VARIANTS: dict[str, dict[str, Any]] = {
    "base": {},
    "concat": {"combine": "concat"},
    "every_layer": {"inject": "every_layer"},
    "frozen": {"freeze_positions": True},
    "untied": {"untied": True},
    "randomized": {"randomized_positions": True},
}

#: variant name -> what the base variant is called beside it ("sinusoidal once" against
#: "sinusoidal every_layer"), so a verdict between two variants of one scheme names the winner
BASE_BESIDE: dict[str, str] = {
    "concat": "add",
    "every_layer": "once",
    "frozen": "trained",
    "untied": "tied",
    "randomized": "in order",
}

#: optimizer name -> the AdamW implementation (see :func:`posembed.lab.training.train.make_optimizer`)
OPTIMIZERS = ("adamw", "adamw_fused")
#: the CPU's fp32 matrix products: ``"fp32"`` as they are, ``"bf16"`` in oneDNN's bf16 math mode
#: (:func:`posembed.kernels.cpu_matmul.bf16_matmuls`: inputs rounded to bf16, fp32 accumulation, attention fp32)
MATMULS = ("fp32", "bf16")

_CHOICES = {
    "combine": ("add", "concat"),
    "inject": ("once", "every_layer"),
    "task": tuple(TASKS),
    "variant": tuple(VARIANTS),
}
#: fields added after stores existed, left out of :meth:`TrialConfig.to_dict` (and so of the
#: trial id) at these defaults: earlier stores and checkpoint folder names keep their ids
_LATER_DEFAULTS = {"bias": True, "optimizer": "adamw", "eval_at": [1.0], "matmuls": "fp32"}


def check_fields(
    cfg: Any, *, positive: tuple[str, ...] = (), non_negative: tuple[str, ...] = (), finite: tuple[str, ...] = ()
) -> None:
    """``ValueError`` naming the first field of ``cfg`` that is not a finite number (``finite``), a
    positive integer (``positive``) or ``>= 0`` (``non_negative``), checked in that order."""
    values = {name: getattr(cfg, name) for name in (*finite, *positive, *non_negative)}
    bad = [f"{n} must be a finite number, got {values[n]}" for n in finite if not math.isfinite(values[n])]
    bad += [
        f"{n} must be a positive integer, got {values[n]!r}"
        for n in positive
        if not isinstance(values[n], int) or values[n] <= 0
    ]
    bad += [f"{n} must be >= 0, got {values[n]}" for n in non_negative if values[n] < 0]
    if bad:
        raise ValueError(bad[0])


@dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    """What every lab training run has: the model's sizes (``dim`` wide, ``depth`` blocks, ``heads``
    heads), ``steps`` batches of ``batch`` rows of ``context`` tokens from ``text``, AdamW at ``lr``
    (betas ``(0.9, beta2)``, ``weight_decay`` on matrices) after ``warmup`` steps of linear warmup,
    gradients clipped to ``grad_clip`` (0: not clipped), and the ``seed``. ``optimizer``
    ``"adamw_fused"`` steps with torch's fused AdamW kernel on CPU too (faster; its rounding differs
    from the for-loop's by about 1e-7 a step); ``"adamw"`` is the for-loop on CPU, fused on CUDA as
    nanoGPT does. ``matmuls`` ``"bf16"`` runs the CPU's forward and backward matrix products in
    bf16 math mode (:data:`MATMULS`; about 1.2x a step at nanoGPT's CPU size, BENCHMARKS.md; it
    changes the numbers, not only their rounding order); ``"fp32"`` leaves them as they are. A
    run's own config derives from it and may change a default.
    """

    dim: int = 64
    depth: int = 2
    heads: int = 4
    text: str = "tinyshakespeare"
    context: int = 16
    batch: int = 32
    steps: int = 200
    lr: float = 1e-3
    warmup: int = 0
    optimizer: str = "adamw"
    matmuls: str = "fp32"
    weight_decay: float = 0.1
    beta2: float = 0.99
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
        if self.matmuls not in MATMULS:
            raise ValueError(f"matmuls={self.matmuls!r} is not one of {', '.join(MATMULS)}")
        check_fields(
            self,
            finite=("lr", "weight_decay", "beta2", "grad_clip"),
            positive=("dim", "depth", "heads", "context", "batch", "steps"),
            non_negative=("warmup", "seed", "weight_decay", "grad_clip"),
        )
        if self.dim % self.heads:
            raise ValueError(f"dim={self.dim} must be divisible by heads={self.heads}")
        if not 0.0 <= self.beta2 < 1.0:
            raise ValueError(f"beta2 must be in [0, 1), got {self.beta2}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@dataclass(frozen=True, kw_only=True)
class TrialConfig(TrainingConfig):
    """One training run. ``context`` is the training length L: the block size of ``charlm``,
    the sequence length of ``order``, the longest operand of ``copy/reverse/sort/addition``.

    ``table_size`` 0 sizes position tables (and the randomized-position range L_max) to the
    longest sequence any evaluation feeds the model, so a learned table is never too short; its
    rows beyond the training length are then simply untrained. ``concat_dim`` 0 means
    ``dim // 2`` position channels when ``combine="concat"`` (total width stays ``dim``).
    ``eval_scales`` multiply ``context`` to give the evaluated lengths; ``eval_at`` are the fractions
    of ``steps`` after which the task is evaluated (each rounded to a whole step; ``1.0``, the end of
    training, is always among them: ``(0.1, 0.3, 1.0)`` shows whether an answer holds as the model
    learns). ``bias`` False drops the
    biases of the blocks' linear layers and LayerNorms (nanoGPT's ``bias=False``; the embedding
    block keeps its LayerNorm). The training fields are :class:`TrainingConfig`'s.
    """

    task: str = "charlm"
    scheme: str = "learned"
    scheme_kwargs: tuple[tuple[str, Any], ...] = ()
    variant: str = "base"
    combine: str = "add"
    inject: str = "once"
    untied: bool = False
    freeze_positions: bool = False
    randomized_positions: bool = False
    concat_dim: int = 0
    mlp_ratio: int = 4
    dropout: float = 0.0
    table_size: int = 0
    vocab: int = 10
    min_lr: float = 1e-4
    eval_scales: tuple[float, ...] = (1.0, 2.0, 4.0)
    eval_at: tuple[float, ...] = (1.0,)
    eval_batches: int = 4
    log_every: int = 10
    backend: str = "auto"
    bias: bool = True

    def __post_init__(self) -> None:
        from posembed.nn.attention.backends import BACKENDS

        for name, choices in (*_CHOICES.items(), ("backend", BACKENDS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {', '.join(choices)}")
        super().__post_init__()
        check_fields(
            self,
            finite=("dropout", "min_lr"),
            positive=("mlp_ratio", "eval_batches", "log_every", "vocab"),
            non_negative=("concat_dim", "table_size", "min_lr"),
        )
        if not self.eval_scales or not all(math.isfinite(x) and x > 0 for x in self.eval_scales):
            raise ValueError(
                f"eval_scales must be finite positive numbers, got {', '.join(map(str, self.eval_scales)) or 'none'}"
            )
        at = self.eval_at
        if (
            not at
            or any(isinstance(x, bool) or not isinstance(x, (int, float)) or not 0.0 < x <= 1.0 for x in at)
            or at[-1] != 1.0
            or list(at) != sorted(set(at))
        ):
            raise ValueError(f"eval_at must be increasing fractions in (0, 1] ending at 1.0, got {at!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def eval_steps(self) -> tuple[int, ...]:
        """The steps after which the task is evaluated: ``eval_at`` times ``steps``, rounded, at least 1
        (fractions that round to one step evaluate once there, so a run shortened with ``--set steps=2`` works).

        >>> TrialConfig(steps=300, eval_at=(0.1, 0.3, 1.0)).eval_steps
        (30, 90, 300)
        >>> TrialConfig(steps=2, eval_at=(0.1, 0.3, 1.0)).eval_steps
        (1, 2)
        """
        return tuple(sorted({max(1, round(x * self.steps)) for x in self.eval_at}))

    @property
    def kwargs(self) -> dict[str, Any]:
        """``scheme_kwargs`` as a dict."""
        return dict(self.scheme_kwargs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (tuples become lists, ``scheme_kwargs`` a dict)."""
        out = dataclasses.asdict(self)
        out["scheme_kwargs"] = self.kwargs
        out["eval_scales"] = list(self.eval_scales)
        out["eval_at"] = list(self.eval_at)
        return without_later_defaults(out, _LATER_DEFAULTS)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialConfig:
        """Inverse of :meth:`to_dict`; unknown keys or wrong types raise ``ValueError``."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TrialConfig keys: {', '.join(unknown)}")
        hints = typing.get_type_hints(cls)
        values = {
            k: _check_type(k, v, hints[k])
            for k, v in data.items()
            if k not in ("scheme_kwargs", "eval_scales", "eval_at")
        }
        if "scheme_kwargs" in data:
            values["scheme_kwargs"] = _kwargs_tuple(data["scheme_kwargs"])
        if "eval_scales" in data:
            values["eval_scales"] = tuple(float(x) for x in data["eval_scales"])
        if "eval_at" in data:
            values["eval_at"] = tuple(float(x) for x in data["eval_at"])
        return cls(**values)

    @property
    def trial_id(self) -> str:
        """16 hex digits of the config's SHA-256: the trial's key in the results store."""
        return content_id(self.to_dict(), digits=16)


@dataclass(frozen=True)
class ExperimentConfig:
    """A sweep: ``tasks x schemes x variants x seeds`` over one base trial per task.

    ``bases`` holds a :class:`TrialConfig` per task the preset knows (``tasks`` picks which run).
    """

    name: str
    tasks: tuple[str, ...]
    schemes: tuple[str, ...]
    variants: tuple[str, ...] = ("base",)
    seeds: tuple[int, ...] = (0,)
    bases: tuple[TrialConfig, ...] = field(default=())

    def __post_init__(self) -> None:
        _check_name(self.name)
        for name in ("tasks", "schemes", "variants", "seeds"):
            values = getattr(self, name)
            if not values:
                raise ValueError(f"{name} must not be empty")
            repeated = sorted({str(v) for v in values if values.count(v) > 1})
            if repeated:
                raise ValueError(f"{name} lists {', '.join(repeated)} more than once")
        for variant in self.variants:
            if variant not in VARIANTS:
                raise ValueError(
                    f"unknown variant {variant!r}{did_you_mean(variant, VARIANTS)}; known: {', '.join(VARIANTS)}"
                )
        known = {base.task for base in self.bases}
        for task in self.tasks:
            if task not in TASKS:
                raise ValueError(f"unknown task {task!r}{did_you_mean(task, TASKS)}; known: {', '.join(TASKS)}")
            if task not in known:
                raise ValueError(f"experiment {self.name!r} has no base config for task {task!r}")

    def base(self, task: str) -> TrialConfig:
        """The base trial config of ``task``."""
        for base in self.bases:
            if base.task == task:
                return base
        raise ValueError(f"experiment {self.name!r} has no base config for task {task!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tasks": list(self.tasks),
            "schemes": list(self.schemes),
            "variants": list(self.variants),
            "seeds": list(self.seeds),
            "bases": [base.to_dict() for base in self.bases],
        }

    @property
    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON: identifies the experiment in its results store."""
        return content_id(self.to_dict())


def _check_name(name: str) -> None:
    """An experiment name names a folder (``lab-<name>``): one plain path component, never a path.

    >>> _check_name("x/../../y")
    Traceback (most recent call last):
    ...
    ValueError: experiment name 'x/../../y' must be a plain name: no path separators, no '..', not an absolute path
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"experiment name must be a non-empty string, got {name!r}")
    if "/" in name or "\\" in name or ".." in name or "\0" in name or name == "." or os.path.isabs(name):
        raise ValueError(
            f"experiment name {name!r} must be a plain name: no path separators, no '..', not an absolute path"
        )


def config_hash(value: Any) -> str:
    """SHA-256 hex digest of ``value`` as canonical JSON (sorted keys, no spaces): :func:`~posembed.lab.ids.content_id`.

    >>> config_hash({"b": 1, "a": [1, 2]}) == config_hash({"a": [1, 2], "b": 1})
    True
    """
    return content_id(value)


def _kwargs_tuple(value: Any) -> tuple[tuple[str, Any], ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"scheme_kwargs must be a JSON object such as '{{\"base\": 500000}}': {error}") from None
    if isinstance(value, (tuple, list)):
        value = dict(value)
    if not isinstance(value, dict):
        raise ValueError(f"scheme_kwargs must be a JSON object, got {value!r}")
    for key, item in value.items():
        if not isinstance(item, (int, float, str, bool)) and item is not None:
            raise ValueError(f"scheme_kwargs[{key!r}] must be a number, string or bool, got {item!r}")
    return tuple(sorted(value.items()))


_BOOLS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


def parse_value(name: str, text: str, annotation: Any) -> Any:
    """Parse the override string ``text`` for a field declared as ``annotation``.

    >>> parse_value("seeds", "0,1,2", tuple[int, ...])
    (0, 1, 2)
    >>> parse_value("steps", "1.5", int)
    Traceback (most recent call last):
    ...
    ValueError: steps expects an integer, got '1.5'
    """
    origin = typing.get_origin(annotation)
    if origin is tuple:
        item_type = typing.get_args(annotation)[0]
        if name == "scheme_kwargs":
            return _kwargs_tuple(text)
        parts = [part.strip() for part in text.split(",") if part.strip()]
        return tuple(parse_value(name, part, item_type) for part in parts)
    if annotation is bool:
        if text.strip().lower() not in _BOOLS:
            raise ValueError(f"{name} expects true or false, got {text!r}")
        return _BOOLS[text.strip().lower()]
    if annotation is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{name} expects an integer, got {text!r}") from None
    if annotation is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{name} expects a number, got {text!r}") from None
    return text


def _check_type(name: str, value: Any, annotation: Any) -> Any:
    """Validate a value read back from JSON (ints may stand for floats, nothing else converts)."""
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    expected = annotation if isinstance(annotation, type) else object
    if expected is not object and (not isinstance(value, expected) or (expected is int and isinstance(value, bool))):
        raise ValueError(f"{name} must be {expected.__name__}, got {value!r}")
    return value


def apply_overrides(experiment: ExperimentConfig, overrides: list[str]) -> ExperimentConfig:
    """A new experiment with ``key=value`` overrides applied (see the module docstring)."""
    exp_hints = typing.get_type_hints(ExperimentConfig)
    trial_hints = typing.get_type_hints(TrialConfig)
    exp_keys = [name for name in exp_hints if name != "bases"]
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"override {item!r} is not of the form key=value")
        task, dot, field_name = key.rpartition(".")
        if key in exp_keys:
            experiment = dataclasses.replace(experiment, **{key: parse_value(key, text, exp_hints[key])})
        elif field_name in trial_hints and field_name != "task" and (not dot or task in TASKS):
            value = parse_value(field_name, text, trial_hints[field_name])
            bases = tuple(
                dataclasses.replace(base, **{field_name: value}) if not dot or base.task == task else base
                for base in experiment.bases
            )
            experiment = dataclasses.replace(experiment, bases=bases)
        else:
            trial_names = [name for name in trial_hints if name != "task"]
            trial_keys = ", ".join(trial_names)
            guess = closest(field_name, trial_names) if dot else closest(key, [*exp_keys, *trial_names])
            hint = f" (did you mean {task + dot + guess if dot else guess!r}?)" if guess else ""
            raise ValueError(
                f"unknown key {key!r}{hint}; experiment keys: {', '.join(exp_keys)}; trial keys: {trial_keys} "
                f"(optionally prefixed by a task: {', '.join(TASKS)}, e.g. charlm.context=32)"
            )
    return experiment
