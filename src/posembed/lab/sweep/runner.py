"""The sweep runner: ``tasks x schemes x variants x seeds``, resumable, one stored trial at a time.

:func:`expand` lists the experiment's trials (skipping variants that do not apply to a scheme);
:func:`run_experiment` trains every trial not yet in ``<out>/results.sqlite``, stores each one
atomically as soon as it finishes and saves its checkpoint under ``<out>/checkpoints/<name>``
(``copy-learned-concat-s0-1a2b3c4d``: :func:`~posembed.lab.training.checkpoint.trial_folder_name`; the
store records each folder, so stores with the older hash-only names read as before).
Interrupt it at any point and run it again: finished trials are skipped.

Trials train one at a time in this process, ``workers`` at a time in worker processes
(:mod:`posembed.lab.sweep.workers`; on a GPU they share it; by default as many as the work gains
from, :mod:`posembed.lab.sweep.worker_plan`), or as tasks on a Ray cluster (:mod:`posembed.lab.sweep.ray_runner`);
either way only this process writes the store and the checkpoints, and each trial's numbers
are the same. Progress: a bar on a terminal, one line per finished trial otherwise
(:mod:`posembed.lab.sweep.progress`).

Everything that can be checked is checked before the out folder is claimed: every trial's
task and model are built (on the meta device) and the training length must fit the scheme's
position table. Then the run takes the folder's lock (:mod:`posembed.lab.sweep.lock`: a second run
on the same folder is refused, naming the first one's pid) and opens the store. A file that
cannot be written (a full disk, a read-only folder) ends the run with a one-line
``ValueError`` naming it; the trials stored before stay.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from posembed.lab.config import TASKS, VARIANTS, ExperimentConfig, TrialConfig
from posembed.lab.sweep.lock import OutDirLock, out_dir_error
from posembed.lab.sweep.progress import Progress, progress_mode
from posembed.lab.sweep.store import ResultsStore
from posembed.lab.task_registry import Model
from posembed.lab.training.checkpoint import save_checkpoint, trial_folder_name
from posembed.lab.training.ddp import barrier, broadcast, rank_and_world
from posembed.lab.training.train import (
    NO_SCHEME,
    TrialResult,
    build_trial_model,
    build_trial_scheme,
    check_scheme_name,
    train_trial,
)
from posembed.schemes.base import Kind

__all__ = ["expand", "run_experiment", "RunSummary", "applies", "refusal", "trial_label"]

logger = logging.getLogger(__name__)

#: variants that change how absolute position vectors enter the model
_ABSOLUTE_ONLY = ("concat", "every_layer", "untied")


@dataclass
class RunSummary:
    """What a run did: trials planned, skipped (already stored), trained now."""

    out_dir: Path
    planned: int
    skipped: int
    trained: int


def applies(variant: str, cfg: TrialConfig) -> bool:
    """Whether ``variant`` means something for ``cfg``'s scheme (built to ask it).

    >>> applies("concat", TrialConfig(task="copy", scheme="nope"))
    False
    >>> applies("frozen", TrialConfig(task="copy", scheme="learned"))
    True
    >>> applies("randomized", TrialConfig(task="copy", scheme="nope"))
    False
    """
    if variant == "base":
        return True
    scheme = build_trial_scheme(cfg, table_size=max(2, cfg.table_size or 2 * cfg.context))
    if variant == "randomized":  # positions are ignored without a scheme
        return scheme is not None and scheme.name not in NO_SCHEME
    if variant in _ABSOLUTE_ONLY:
        return scheme is not None and scheme.kind == Kind.ABSOLUTE
    if variant == "frozen":
        return scheme is not None and any(True for _ in scheme.parameters())
    return True


def refusal(cfg: TrialConfig) -> str:
    """Why ``cfg``'s scheme cannot serve its task ('' when it can): a causal-only scheme (FIRE,
    forgetting gates, CoPE) refuses the bidirectional encoder of the ``order`` task.

    >>> refusal(TrialConfig(task="order", scheme="fire"))[:40]
    'FIRE normalises i - j by psi(max(L, i)),'
    >>> refusal(TrialConfig(task="copy", scheme="fire")), refusal(TrialConfig(task="order", scheme="kerple"))
    ('', '')
    """
    if TASKS[cfg.task] is Model.DECODER:
        return ""
    scheme = build_trial_scheme(cfg, table_size=max(2, cfg.table_size or 2 * cfg.context))
    if scheme is None:
        return ""
    return scheme.why_causal_only() or ""  # any other problem is the model's to report


def expand(experiment: ExperimentConfig) -> list[TrialConfig]:
    """Every trial of the sweep, seed by seed (each seed's trials in order task, scheme, variant), so an
    interrupted run leaves whole seeds behind: every stored seed is a complete paired unit.

    A scheme that cannot serve a task (:func:`refusal`: a causal-only scheme on the encoder) is
    skipped for that task with a logged note, and refused when it serves none of the tasks.
    Raises ``ValueError`` for an unknown or refused scheme before anything trains.
    """
    for scheme in experiment.schemes:
        check_scheme_name(scheme)
    trials, refused = [], {}
    for task in experiment.tasks:
        base = experiment.base(task)
        for scheme in experiment.schemes:
            reason = refusal(dataclasses.replace(base, scheme=scheme))
            if reason:
                refused.setdefault(scheme, []).append(task)
                logger.info("not training %s on %s: %s", scheme, task, reason)
                continue
            for variant in experiment.variants:
                cfg = dataclasses.replace(base, scheme=scheme, variant=variant, **VARIANTS[variant])
                if not applies(variant, cfg):
                    logger.debug("skipping variant %s for scheme %s (does not apply)", variant, scheme)
                    continue
                trials += [dataclasses.replace(cfg, seed=seed) for seed in experiment.seeds]
    for scheme, tasks in refused.items():
        if len(tasks) == len(experiment.tasks):
            reason = refusal(dataclasses.replace(experiment.base(tasks[0]), scheme=scheme))
            raise ValueError(f"scheme {scheme!r} serves none of the tasks {', '.join(tasks)}: {reason}")
    return sorted(trials, key=lambda cfg: experiment.seeds.index(cfg.seed))  # stable: task, scheme, variant kept


def _train_with_bar(cfg: TrialConfig, enabled: bool | None, device: str = "auto") -> tuple[TrialResult, object]:
    """Train one trial in this process, under a step bar (position 1, removed when done) if ``enabled``."""
    from tqdm.auto import tqdm

    with tqdm(
        total=cfg.steps,
        desc=f"{cfg.task}/{cfg.scheme}",
        unit="step",
        position=1,
        leave=False,
        dynamic_ncols=True,
        disable=not enabled,
    ) as bar:

        def on_step(step: int, loss: float) -> None:
            bar.update(step - bar.n)
            bar.set_postfix(loss=f"{loss:.3f}")

        return train_trial(cfg, on_step=on_step, device=device)


def trial_label(cfg: TrialConfig) -> str:
    """``task/scheme/variant/s<seed>`` (progress lines, errors)."""
    return f"{cfg.task}/{cfg.scheme}/{cfg.variant}/s{cfg.seed}"


def run_experiment(
    experiment: ExperimentConfig,
    out_dir: str | Path,
    *,
    checkpoints: bool = True,
    progress: bool | str | None = None,
    workers: int | None = 1,
    threads: int | None = None,
    ray: str | None = None,
    device: str = "auto",
    on_trial: Callable[[TrialResult], None] | None = None,
) -> RunSummary:
    """Train every trial of ``experiment`` not yet stored in ``out_dir``.

    Every trial config is checked before the out dir is touched; then the out dir is locked
    for the run. With ``workers`` > 1 the trials train side by side in worker processes
    (:mod:`posembed.lab.sweep.workers`); each trial's numbers and weights are the same as in the
    sequential run, and only this process writes the store and the checkpoints. Under
    ``torchrun`` (an initialised process group, :func:`posembed.lab.training.ddp.init_distributed`)
    every rank trains each trial data-parallel, one trial at a time (``workers`` is ignored),
    and only rank 0 takes the lock, opens the store and writes results and checkpoints; the
    others wait at a barrier after each trial.

    Args:
        checkpoints: save each trained model under ``<out>/checkpoints/<name>``
            (:func:`~posembed.lab.training.checkpoint.trial_folder_name`).
        progress: ``None``/``True``: a bar on a terminal, else one INFO record per finished trial
            on the ``posembed.lab.sweep.progress`` logger; ``False``: none (never off rank 0); or a
            mode of :func:`~posembed.lab.sweep.progress.progress_mode`.
        workers: trials trained at once, each in its own process (1: in this process); ``None``:
            as many as the work gains from on the device (:func:`posembed.lab.sweep.worker_plan.plan_workers`:
            one for a small sweep). With ``ray``, the most trials in flight (``None``: all, as many as
            the cluster's CPUs run).
        threads: torch threads of each worker (default: this process's ``torch.get_num_threads()``).
        ray: train the trials as Ray tasks (:mod:`posembed.lab.sweep.ray_runner`): ``"auto"`` (the local
            cluster, else a fresh local instance) or a cluster's ``HOST:PORT``; this process still
            writes the store and the checkpoints. Not under ``torchrun``.
        device: ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``
            (:func:`posembed._utils.devices.resolve_device`). On a GPU the ``workers`` processes share the
            device, each training its own trials (bf16 autocast: each trial's numbers equal those of
            the same trial trained alone within bf16 tolerance); Ray tasks pick their own device
            (``"auto"`` on each node).
        on_trial: called on rank 0 after each trial is stored (an exception there stops the
            run; what was stored stays).

    Raises:
        ForeignStoreError: ``out_dir`` holds another experiment's finished trials or another
            program's database.
        OutDirBusyError: another run holds ``out_dir``.
        OutDirError, StoreError: ``out_dir`` or its store cannot be written (read-only, full
            disk) or read (empty, damaged store file).
        ValueError: a trial config that cannot be built or trained (checked before anything
            is written), ``workers`` below 1, or ``ray`` under ``torchrun``.
        ImportError: ``ray`` is set and Ray is not installed.
        WorkerError: a worker process (or a Ray task, three times) died mid-trial (what was stored stays).
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    from posembed._utils.devices import resolve_device

    target = resolve_device(device)
    rank, world = rank_and_world()
    if ray is not None:
        _check_ray(ray, world)
    trials = expand(experiment)
    _check_trials(experiment, trials, world)
    out = Path(out_dir)
    lock, store, done = _claim(experiment, out, rank)
    todo = [cfg for cfg in trials if cfg.trial_id not in done]
    if ray is None:
        workers = 1 if world > 1 else max(1, min(_planned(workers, todo, target, threads), len(todo)))
    logger.info(
        "experiment %s: %d trials, %d stored, %d to train (%s)",
        experiment.name,
        len(trials),
        len(trials) - len(todo),
        len(todo),
        f"Ray at {ray}" if ray else f"{workers} at a time",
    )
    mode = progress_mode(progress) if rank == 0 else "off"
    try:
        with (
            Progress(len(trials), len(trials) - len(todo), mode=mode) as reporter,
            _trainer(todo, workers, threads, checkpoints, reporter, ray, str(target)) as outcomes,
        ):
            for cfg, result, model in outcomes:
                if store is not None:
                    store.add(result, checkpoint=_save(model, cfg, out, store) if checkpoints else None)
                    reporter.advance(trial_label(cfg), result.seconds)
                    if on_trial is not None:
                        on_trial(result)
                barrier()
    finally:
        if store is not None:
            store.close()
        if lock is not None:
            lock.release()
    return RunSummary(out, len(trials), len(trials) - len(todo), len(todo))


def _planned(workers: int | None, todo: list[TrialConfig], device, threads: int | None) -> int:
    """``workers``, or when ``None`` the count :func:`~posembed.lab.sweep.worker_plan.plan_workers` picks for
    ``todo``."""
    if workers is not None:
        return workers
    import torch

    from posembed.lab.sweep.worker_plan import plan_workers

    return plan_workers(todo, device, threads=threads or torch.get_num_threads())


@contextlib.contextmanager
def _trainer(
    todo: list[TrialConfig],
    workers: int | None,
    threads: int | None,
    keep_models: bool,
    reporter: Progress,
    ray: str | None = None,
    device: str = "auto",
):
    """``(cfg, result, model)`` for every trial of ``todo``: in this process, from a pool, or from Ray."""
    import torch

    if ray is not None and todo:
        from posembed.lab.sweep.ray_runner import RayTrialPool

        pool = RayTrialPool(ray, threads or torch.get_num_threads(), max_in_flight=workers, keep_models=keep_models)
        with pool:
            reporter.working_on(pool.describe())
            yield pool.run(todo)
        return
    if workers in (1, None) or not todo:
        yield _in_process(todo, reporter, device)
        return
    from posembed.lab.sweep.workers import TrialPool

    with TrialPool(workers, threads or torch.get_num_threads(), keep_models=keep_models, device=device) as pool:
        reporter.working_on(f"{workers} workers")
        yield pool.run(todo)


def _in_process(todo: list[TrialConfig], reporter: Progress, device: str = "auto"):
    for cfg in todo:
        reporter.working_on(trial_label(cfg))
        result, model = _train_with_bar(cfg, reporter.mode == "bar", device)
        yield cfg, result, model


def _check_ray(address: str, world: int) -> None:
    """Ray installed, its cluster reachable, and no ``torchrun`` (that trains data-parallel instead)."""
    from posembed.lab.sweep.ray_runner import check_address, require_ray

    require_ray()
    if world > 1:
        raise ValueError("ray does not combine with torchrun: run the sweep with either, not both")
    check_address(address)


def _claim(
    experiment: ExperimentConfig, out: Path, rank: int
) -> tuple[OutDirLock | None, ResultsStore | None, set[str]]:
    """Rank 0 locks the out dir and opens the store; every rank gets its finished ids (or
    rank 0's error, raised everywhere)."""
    lock, store, done, error = None, None, set(), None
    if rank == 0:
        try:
            lock = OutDirLock(out).acquire()
            store = ResultsStore(out, experiment)
            done = store.finished_ids()
            _register(store, experiment)
        except ValueError as caught:
            error = caught
            if store is not None:
                store.close()
            if lock is not None:
                lock.release()
    shared_done, message = broadcast((done, None if error is None else str(error)))
    if error is not None:
        raise error
    if message is not None:
        raise ValueError(message)
    return lock, store, shared_done


def _register(store: ResultsStore, experiment: ExperimentConfig) -> None:
    """Write the preset's declared questions and seeds (:func:`posembed.lab.registration.record`)
    into the store's meta, before any trial of this run trains; a resumed run keeps the first record."""
    from posembed.lab.registration import META_KEY, record

    text = record(experiment.name, tuple(experiment.seeds))
    if text is not None:
        store.note_once(META_KEY, text)


def _check_trials(experiment: ExperimentConfig, trials: list[TrialConfig], world: int) -> None:
    """Build every distinct trial's task and model (on the meta device, so no memory or time
    is spent): a bad text file or scheme argument fails now, before the out dir is touched,
    not after an hour of other trials."""
    import torch

    from posembed.lab.tasks import make_task

    checked = set()
    for cfg in trials:
        if cfg.batch % world:
            raise ValueError(f"batch={cfg.batch} ({cfg.task}) must be divisible by the number of processes ({world})")
        shape = dataclasses.replace(cfg, seed=0)  # the seed changes no shape
        if shape in checked:
            continue
        checked.add(shape)
        task = make_task(cfg)  # on the CPU: a task may cache its data (the char LM's corpus)
        with torch.device("meta"):
            model = build_trial_model(cfg, task)
        _check_table(cfg, model)


def _check_table(cfg: TrialConfig, model) -> None:
    """The longest training input must fit the scheme's positions (and the randomized range),
    else the trial could only fail once it trains. Evaluated lengths beyond the table are
    allowed: they are recorded as "n/a (table limit)"."""
    from posembed.lab.tasks import make_task

    length = make_task(dataclasses.replace(cfg, eval_scales=(1.0,))).max_length()  # the training length
    scheme = getattr(model, "scheme", None)
    limit = None if scheme is None else scheme.max_positions
    if cfg.randomized_positions and cfg.table_size:
        limit = cfg.table_size if limit is None else min(limit, cfg.table_size)
    if limit is not None and length > limit:
        raise ValueError(
            f"{cfg.task}/{cfg.scheme}/{cfg.variant} trains on {length}-position inputs (context={cfg.context}) but its "
            f"positions stop at {limit} (table_size={cfg.table_size}): raise table_size to at least {length} "
            f"(0 sizes the table to the longest evaluated input)"
        )


def _save(model, cfg: TrialConfig, out: Path, store: ResultsStore) -> str:
    """Checkpoint one trained trial; returns its folder relative to ``out``."""
    folder = Path("checkpoints") / trial_folder_name(cfg)
    meta = {"task": cfg.task, "trial": cfg.trial_id, "step": cfg.steps, "config": cfg.to_dict()}
    try:
        save_checkpoint(model, out / folder, meta)
    except OSError as error:
        hint = (
            f"trial {cfg.trial_id} is not stored; the trials stored before stay in {str(store.path)!r}: "
            "run again to resume"
        )
        raise out_dir_error(error, "write the checkpoint", error.filename or out / folder, hint) from None
    return folder.as_posix()
