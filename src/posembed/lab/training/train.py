"""One trial: build the model a :class:`~posembed.lab.config.TrialConfig` describes, train it
deterministically, score it, measure how far the position parameters drifted.

Training is :func:`train_model`, the lab's one loop (the context study's too): nanoGPT's AdamW (betas
``(0.9, beta2)``, decay on matrices), warmup then cosine decay to ``min_lr``, clipping. On CPU the same
config gives the same numbers: torch and the data generator are seeded from ``seed`` and
deterministic algorithms are requested. Under ``torchrun`` (an initialised process group) the
model is wrapped in ``DistributedDataParallel`` and each rank trains on ``batch / world`` rows.

``device`` (:func:`posembed._utils.devices.resolve_device`: ``auto``, ``cpu``, ``cuda``, ``cuda:N``)
says where the model trains. On CUDA the forward passes run under bf16 autocast (the weights
and the optimizer stay fp32), AdamW is the fused kernel, bias schemes attend through compiled
FlexAttention (``backend="auto"``, see :func:`posembed.nn.attention.backends.choose_backend`) and
no determinism is promised; the data are still drawn on the CPU, so batches are the same.
A trial long enough to repay a cold compile trains under ``torch.compile`` there
(:func:`compile_training`); the CPU never compiles the training, so its runs stay bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from posembed._utils.checks import did_you_mean
from posembed._utils.devices import autocast, on_device, resolve_device
from posembed.kernels.cpu_matmul import bf16_matmuls
from posembed.lab.config import TASKS, TrainingConfig, TrialConfig
from posembed.lab.task_registry import Model
from posembed.lab.tasks import EvalPoint, Task, loss_fn, make_task
from posembed.lab.training.ddp import mean_across_ranks, rank_and_world
from posembed.lab.training.schedule import warmup_cosine
from posembed.lab.training.trial_cost import trial_seconds
from posembed.schemes.base import PositionScheme
from posembed.schemes.factory import FACTORY, ModelSizes, build_from_sizes

__all__ = [
    "TrialResult",
    "train_trial",
    "build_trial_model",
    "build_trial_scheme",
    "trial_sizes",
    "check_scheme_name",
    "model_position_limit",
    "lr_at",
    "random_positions",
    "drift",
    "adamw",
    "compile_training",
    "train_model",
    "Batches",
]

logger = logging.getLogger(__name__)

#: names that mean "no positional information" (NoPE, ``scheme=None``) unless a scheme of
#: that name is registered (a registered ``nope`` scheme is used as is: it adds nothing either)
NO_SCHEME = ("none", "nope")


@dataclass
class TrialResult:
    """Everything a finished trial reports (what the results store keeps)."""

    config: TrialConfig
    evals: list[EvalPoint]
    curve: list[tuple[int, float]]
    drift: dict[str, float] | None
    seconds: float
    seconds_per_step: float
    num_params: int
    final_loss: float
    world_size: int = 1
    #: the evaluations made before the end of training (each with its ``step``; ``cfg.eval_at``)
    during: list[EvalPoint] = field(default_factory=list)

    @property
    def trial_id(self) -> str:
        return self.config.trial_id

    def value(self, metric: str, length: int) -> float | None:
        """The evaluated ``metric`` at ``length`` (``None`` if n/a or absent)."""
        for point in self.evals:
            if point.metric == metric and point.length == length:
                return point.value
        return None


def check_scheme_name(name: str) -> None:
    """``ValueError`` naming the known schemes when ``name`` is unknown."""
    if name not in FACTORY and name not in NO_SCHEME:
        known = sorted({*FACTORY, *NO_SCHEME})
        raise ValueError(f"unknown scheme {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}")


def trial_sizes(cfg: TrialConfig, table_size: int) -> ModelSizes:
    """The sizes the trial's scheme is built for.

    ``dim`` is the width of the position vectors (half the model width, or ``concat_dim``, when
    they are concatenated), ``head_dim`` the model width over the heads, ``max_len`` the table
    size, and the model is causal for the decoder tasks (ALiBi's symmetric bias and T5's
    two-sided buckets are for the encoder).
    """
    width = (cfg.concat_dim or cfg.dim // 2) if cfg.combine == "concat" else cfg.dim
    return ModelSizes(
        dim=width,
        num_heads=cfg.heads,
        head_dim=cfg.dim // cfg.heads,
        max_len=table_size,
        causal=TASKS[cfg.task] is Model.DECODER,
    )


def build_trial_scheme(cfg: TrialConfig, table_size: int) -> PositionScheme | None:
    """The scheme ``cfg.scheme`` built by the factory for the trial's :func:`trial_sizes`.

    ``scheme_kwargs`` keys ``arg`` go to the trial's scheme, ``<scheme>.arg`` only to that scheme
    (``{"rope.base": 500}`` in a sweep over several schemes); they win over the sizes. ``None``
    for ``"none"`` (no positional information).
    """
    check_scheme_name(cfg.scheme)
    if cfg.scheme not in FACTORY:
        return None
    return build_from_sizes(cfg.scheme, trial_sizes(cfg, table_size), _own_kwargs(cfg))


def _own_kwargs(cfg: TrialConfig) -> dict:
    """The ``scheme_kwargs`` meant for ``cfg.scheme``: plain keys, and ``<scheme>.<arg>`` keys of it."""
    own = {}
    for key, value in cfg.scheme_kwargs:
        scheme, dot, name = key.rpartition(".")
        if not dot or scheme == cfg.scheme:
            own[name] = value
    return own


def build_trial_model(cfg: TrialConfig, task: Task) -> nn.Module:
    """The encoder (order task) or decoder of a trial, with position parameters frozen if asked."""
    from posembed.nn.model.transformer import Decoder, Encoder

    table = cfg.table_size or task.max_length()
    scheme = build_trial_scheme(cfg, table)
    common = dict(
        dim=cfg.dim,
        depth=cfg.depth,
        num_heads=cfg.heads,
        scheme=scheme,
        combine=cfg.combine,
        inject=cfg.inject,
        untied=cfg.untied,
        dropout=cfg.dropout,
        mlp_ratio=cfg.mlp_ratio,
        backend=cfg.backend,
        bias=cfg.bias,
    )
    if TASKS[cfg.task] is Model.ENCODER:
        model = Encoder(task.vocab_size, num_classes=task.num_classes, **common)
    else:
        model = Decoder(task.vocab_size, **common)
    if cfg.freeze_positions and scheme is not None:
        for param in scheme.parameters():
            param.requires_grad_(False)
    return model


def model_position_limit(model: nn.Module) -> int | None:
    """The most positions the model accepts (``None``: unlimited): the smallest of its embedding
    table's size, its scheme's limit and its ``max_len``."""
    embeddings, scheme = getattr(model, "embeddings", None), getattr(model, "scheme", None)
    limits = (
        None if embeddings is None else embeddings.max_positions,
        None if scheme is None else scheme.max_positions,
        getattr(model, "max_len", None),
    )
    found = [int(value) for value in limits if value]
    return min(found) if found else None


def lr_at(step: int, cfg: TrialConfig) -> float:
    """Linear warmup to ``lr`` over ``warmup`` steps, then cosine decay to ``min_lr`` at ``steps``.

    >>> cfg = TrialConfig(steps=100, warmup=10, lr=1e-3, min_lr=1e-4)
    >>> round(lr_at(0, cfg), 7), lr_at(10, cfg), round(lr_at(55, cfg), 6), lr_at(100, cfg)
    (9.09e-05, 0.001, 0.00055, 0.0001)
    """
    return warmup_cosine(step, lr=cfg.lr, min_lr=cfg.min_lr, warmup=cfg.warmup, steps=cfg.steps)


def random_positions(generator: torch.Generator, batch: int, length: int, limit: int) -> Tensor:
    """Sorted random positions, ``length`` distinct ones from ``[0, limit)`` per row (Ruoss et al. 2023).

    >>> p = random_positions(torch.Generator().manual_seed(0), 2, 4, 10)
    >>> p.shape, bool((p.diff(dim=1) > 0).all()), bool((p < 10).all())
    (torch.Size([2, 4]), True, True)
    """
    if length > limit:
        raise ValueError(f"cannot sample {length} distinct positions from [0, {limit}): raise table_size")
    scores = torch.rand(batch, limit, generator=generator)
    return scores.argsort(dim=1)[:, :length].sort(dim=1).values  # (B, T)


def position_parameters(model: nn.Module) -> Tensor | None:
    """All parameters of the model's scheme, flattened into one vector (``None`` if it has none)."""
    scheme = getattr(model, "scheme", None)
    params = [] if scheme is None else [p.detach().reshape(-1) for p in scheme.parameters()]
    return torch.cat(params).to("cpu", torch.float64, copy=True) if params else None


def drift(initial: Tensor | None, final: Tensor | None) -> dict[str, float] | None:
    """How far the position parameters moved: ``||W - W0|| / ||W0||`` (Frobenius) and ``cos(W, W0)``.

    ``None`` when there is nothing to compare, or when the initial parameters are all zero (CoPE's
    position table starts at zero: a ratio to a zero norm means nothing).

    >>> drift(torch.tensor([3.0, 4.0]), torch.tensor([3.0, 4.0]))
    {'rel_frobenius': 0.0, 'cosine': 1.0}
    >>> drift(torch.zeros(2), torch.tensor([3.0, 4.0])) is None
    True
    """
    if initial is None or final is None or not bool(initial.any()):
        return None
    rel = float((final - initial).norm() / initial.norm().clamp_min(1e-12))
    cos = float(nn.functional.cosine_similarity(final.reshape(1, -1), initial.reshape(1, -1)).squeeze())
    return {"rel_frobenius": rel, "cosine": round(cos, 12)}


def adamw(model: nn.Module, *, lr: float, beta2: float, weight_decay: float, fused: bool) -> torch.optim.AdamW:
    """AdamW over ``model``'s trainable parameters with weight decay on matrices only (nanoGPT's
    ``configure_optimizers``); ``fused``: torch's fused kernel, else its default (the for-loop on
    the CPU)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    kernel = {"fused": True} if fused else {}  # not fused=False: that would also turn off torch's default choice
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2), **kernel)


def make_optimizer(model: nn.Module, cfg: TrainingConfig, device: torch.device | None = None) -> torch.optim.AdamW:
    """The run's :func:`adamw`: the fused kernel on CUDA (as nanoGPT) or where ``cfg.optimizer`` is
    ``"adamw_fused"``, the reference for-loop otherwise (the CPU numbers stay put)."""
    on_cuda = device is not None and device.type == "cuda"
    return adamw(
        model,
        lr=cfg.lr,
        beta2=cfg.beta2,
        weight_decay=cfg.weight_decay,
        fused=on_cuda or cfg.optimizer == "adamw_fused",
    )


@contextlib.contextmanager
def deterministic(enabled: bool = True):
    """Request deterministic algorithms for the duration (restored afterwards); no-op if not ``enabled``."""
    before = torch.are_deterministic_algorithms_enabled()
    if enabled:
        torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


StepCallback = Callable[[int, float], None]
#: step -> ``(inputs, targets)`` or ``(inputs, targets, position_ids)``, on the CPU (the loop moves them)
Batches = Callable[[int], tuple[Tensor, ...]]

#: seconds a cold ``torch.compile`` of a lab model's training step costs on CUDA (forward and
#: backward graphs; later trials of the same shape load them from the cache in a fraction of it)
COMPILE_SECONDS = 40.0
#: the share of an eager step's time compiling saves on a launch-bound model (fused kernels)
COMPILE_SAVING = 0.3


def compile_training(device: torch.device, cfg: TrialConfig) -> bool:
    """Whether ``cfg`` trains under ``torch.compile`` on ``device``: only on CUDA, and only when the
    eager training time it is estimated to save (:data:`COMPILE_SAVING` of
    :func:`~posembed.lab.training.trial_cost.trial_seconds`) repays a cold compile (:data:`COMPILE_SECONDS`).
    The CPU never compiles here (its numbers stay bit for bit; compiling gains at most ~10 % of the
    ``full`` trial's CPU step and a cold compile costs minutes: BENCHMARKS.md), nor do the
    presets' short trials.

    >>> compile_training(torch.device("cpu"), TrialConfig(steps=10**6, dim=1024, depth=24))
    False
    >>> compile_training(torch.device("cuda"), TrialConfig(steps=300, dim=64, depth=2))
    False
    >>> compile_training(torch.device("cuda"), TrialConfig(steps=20000, dim=768, depth=12, context=1024, batch=8))
    True
    """
    if device.type != "cuda":
        return False
    return COMPILE_SAVING * trial_seconds(cfg, device) >= COMPILE_SECONDS


def train_trial(
    cfg: TrialConfig, *, on_step: StepCallback | None = None, device: str | torch.device | None = "auto"
) -> tuple[TrialResult, nn.Module]:
    """Train and score one trial; returns the result and the trained model (unwrapped, on ``device``).

    ``on_step(step, loss)`` is called at every logged step (progress bars). ``device``: see the
    module docstring (``auto``: CUDA when present, else the CPU).
    """
    rank, world = rank_and_world()
    if cfg.batch % world:
        raise ValueError(f"batch={cfg.batch} must be divisible by the number of processes ({world})")
    device = _rank_device(resolve_device(device), rank)
    task = make_task(cfg)
    torch.manual_seed(cfg.seed)
    model = build_trial_model(cfg, task)  # built on the CPU: the same init on every device
    initial = position_parameters(model)
    model.to(device)
    trainable = model
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        trainable = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if compile_training(device, cfg):
        trainable = torch.compile(trainable)
    generator = torch.Generator().manual_seed(cfg.seed * 1000 + rank)
    table = cfg.table_size or task.max_length()
    start = time.perf_counter()
    curve: list[tuple[int, float]] = []

    def log(step: int, mean: float) -> None:
        curve.append((step, mean_across_ranks(mean)))
        if on_step is not None:
            on_step(*curve[-1])

    def batches(step: int) -> tuple[Tensor, Tensor, Tensor | None]:
        batch = task.train_batch(generator, cfg.batch // world)
        rows, length = batch.input_ids.shape[:2]
        positions = random_positions(generator, rows, length, table) if cfg.randomized_positions else None
        return batch.input_ids, batch.targets, positions

    during: list[EvalPoint] = []
    evaluating = 0.0

    def evaluate(step: int) -> list[EvalPoint]:
        nonlocal evaluating
        begin = time.perf_counter()
        generator = torch.Generator().manual_seed(cfg.seed + 12345)  # the same draws at every point
        points = task.evaluate(on_device(model), generator, model_position_limit(model))
        evaluating += time.perf_counter() - begin
        return [dataclasses.replace(point, step=step) for point in points]

    with deterministic(device.type == "cpu"):
        train_model(
            trainable,
            cfg,
            batches,
            device=device,
            min_lr=cfg.min_lr,
            log_every=cfg.log_every,
            on_log=log,
            label=f"trial {cfg.trial_id}",
            evaluate_at=cfg.eval_steps,
            on_evaluate=lambda step: during.extend(evaluate(step)),
        )
        elapsed = time.perf_counter() - start - evaluating
        model.eval()
        evals = evaluate(cfg.steps)
    result = TrialResult(
        config=cfg,
        evals=evals,
        during=during,
        curve=curve,
        drift=drift(initial, position_parameters(model)),
        seconds=time.perf_counter() - start,
        seconds_per_step=elapsed / cfg.steps,
        num_params=sum(p.numel() for p in model.parameters()),
        final_loss=curve[-1][1],
        world_size=world,
    )
    return result, model


def _rank_device(device: torch.device, rank: int) -> torch.device:
    """Under torchrun, ``cuda`` without an index means this rank's GPU (``LOCAL_RANK``)."""
    if device.type != "cuda" or device.index is not None:
        return device
    local = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local % torch.cuda.device_count())


def train_model(
    model: nn.Module,
    cfg: TrainingConfig,
    batches: Batches,
    *,
    device: torch.device,
    min_lr: float,
    log_every: int,
    on_log: StepCallback | None = None,
    label: str = "training",
    evaluate_at: Collection[int] = (),
    on_evaluate: Callable[[int], None] | None = None,
) -> list[float]:
    """The lab's one training loop: ``cfg.steps`` steps of AdamW (:func:`make_optimizer`) over
    ``batches(step)`` (moved to ``device``), the learning rate by
    :func:`~posembed.lab.training.schedule.warmup_cosine` from ``cfg.lr`` to ``min_lr``, the forward under
    :func:`~posembed._utils.devices.autocast`, the loss :func:`~posembed.lab.tasks.loss_fn`, gradients clipped to
    ``cfg.grad_clip`` (0: not clipped). The losses stay on the device until a logged step (every
    ``log_every`` and the last): then the window is read back at once and ``on_log(step, mean)``
    gets its mean. After each step in ``evaluate_at`` but the last, ``on_evaluate(step)`` is called
    with the model in eval mode (training resumes in train mode; the evaluation draws on no
    generator the training uses, so the run's numbers do not change). Returns every step's loss;
    warns (naming ``label``) when one is not finite.
    """
    optimizer = make_optimizer(model, cfg, device)
    params = [p for p in model.parameters() if p.requires_grad]  # once, not a generator per step
    model.train()
    losses: list[float] = []
    window: list[Tensor] = []  # losses kept as tensors: no device sync until a logged step
    for step in range(cfg.steps):
        for group in optimizer.param_groups:
            group["lr"] = warmup_cosine(step, lr=cfg.lr, min_lr=min_lr, warmup=cfg.warmup, steps=cfg.steps)
        inputs, targets, *positions = [t if t is None else t.to(device, non_blocking=True) for t in batches(step)]
        with bf16_matmuls(cfg.matmuls == "bf16"):  # the forward and the backward (a no-op at "fp32")
            with autocast(device):
                logits = model(inputs, position_ids=positions[0] if positions else None)
            loss = loss_fn(logits, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(params, cfg.grad_clip, foreach=True)  # same numbers as the loop, fewer calls
        optimizer.step()
        window.append(loss.detach())
        if (step + 1) % log_every == 0 or step + 1 == cfg.steps:
            values = torch.stack(window).tolist()  # one sync per logged step
            losses += values
            window.clear()
            if on_log is not None:
                on_log(step + 1, sum(values) / len(values))
        if on_evaluate is not None and step + 1 in evaluate_at and step + 1 != cfg.steps:
            model.eval()
            on_evaluate(step + 1)
            model.train()
    if not all(map(math.isfinite, losses)):
        logger.warning("%s: training loss became non-finite", label)
    return losses
