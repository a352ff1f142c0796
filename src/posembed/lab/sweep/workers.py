"""Trials side by side: a pool of worker processes on one machine, the parent the only writer.

Design:

- Workers are started with the ``spawn`` context (torch and ``fork`` do not mix: a forked
  child inherits the parent's thread pools and locks in whatever state they were in). Each
  runs ``torch.set_num_threads(threads)`` once and then trains whole trials with
  :func:`~posembed.lab.training.train.train_trial`, which seeds everything from the trial's config: a
  trial gives the same numbers and the same weights in any worker, in any order, as in the
  sequential run.
- Workers write nothing. A worker sends back the :class:`~posembed.lab.training.train.TrialResult` and,
  when checkpoints are kept, the model's config and its state dict (``torch.save`` bytes); the
  parent rebuilds the model and stores the trial and its checkpoint as the sequential run does.
  So the out folder's lock, the one-transaction-per-trial store and resume hold unchanged.
- A worker dies with the parent: on Linux the kernel sends it ``SIGKILL`` when the parent dies
  (``prctl(PR_SET_PDEATHSIG)``), and a watcher thread also ends it once its parent pid changes
  (the fallback elsewhere). Workers ignore ``SIGINT``: on Ctrl-C or any error the parent kills
  them itself, and what was stored stays.
- Kernels are compiled once per shape and kind, not once per trial or per worker: every worker
  compiles into the parent's Inductor cache directory (:func:`compile_cache_dir`, passed to it
  explicitly), whose FX-graph and autotune caches torch keeps on by default, so a graph one
  worker compiled is loaded from disk by the others; and nothing in the lab resets Dynamo
  between trials, so a process reuses its compiled frames for every later trial of that kind.
- On a GPU the workers share the device (:mod:`posembed.lab.sweep.worker_plan` says why processes
  rather than streams, and how many).

The same exchange (:func:`train_packed` in the worker, :func:`unpack_model` in the parent)
runs trials as tasks on a Ray cluster: :mod:`posembed.lab.sweep.ray_runner`.

>>> default_workers(threads=10**6)
1
"""

from __future__ import annotations

import ctypes
import io
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

import torch
from torch import nn

from posembed._utils.torch_private import inductor_cache_dir, inductor_caches_off
from posembed.errors import WorkerError
from posembed.lab.config import TrialConfig
from posembed.lab.sweep.worker_plan import available_cores
from posembed.lab.training.train import TrialResult, train_trial

__all__ = [
    "TrialPool",
    "WorkerError",
    "default_workers",
    "available_cores",
    "compile_cache_dir",
    "train_packed",
    "unpack_model",
]

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def default_workers(threads: int = 1) -> int:
    """As many workers as the cores hold at ``threads`` intra-op threads each (at least 1)."""
    return max(1, available_cores() // max(1, threads))


def compile_cache_dir() -> str | None:
    """The Inductor cache directory this process compiles into (``TORCHINDUCTOR_CACHE_DIR``, else
    torch's per-user default; ``None`` where this torch has no Inductor): one for the whole sweep."""
    return inductor_cache_dir()


def _warn_if_caches_are_off() -> None:
    """Say once when torch is told to keep no compile cache: every trial then compiles again."""
    if inductor_caches_off():
        logger.warning(
            "torch's compile caches are off (TORCHINDUCTOR_FORCE_DISABLE_CACHES or fx_graph_cache): "
            "each worker compiles every kernel again"
        )


class TrialPool:
    """``workers`` processes of ``threads`` torch threads each; a context manager.

    :meth:`run` yields ``(config, result, model)`` for each trial as it finishes (completion
    order); ``model`` is ``None`` unless ``keep_models``. Leaving the ``with`` block on an
    error kills the workers at once (the running trials are lost, nothing else).
    """

    def __init__(self, workers: int, threads: int = 1, *, keep_models: bool = True, device: str = "auto") -> None:
        if workers < 1 or threads < 1:
            raise ValueError(f"workers and threads must be at least 1, got workers={workers}, threads={threads}")
        self.workers, self.threads, self.keep_models, self.device = workers, threads, keep_models, device
        self._executor: ProcessPoolExecutor | None = None

    def __enter__(self) -> TrialPool:
        _warn_if_caches_are_off()
        self._executor = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(self.threads, os.getpid(), compile_cache_dir()),
        )
        return self

    def run(self, todo: list[TrialConfig]) -> Iterator[tuple[TrialConfig, TrialResult, nn.Module | None]]:
        """Submit every trial of ``todo`` now (in order); the iterator yields each as it finishes."""
        submit = self._executor.submit
        pending: dict[Future, TrialConfig] = {
            submit(train_packed, cfg, self.keep_models, self.device): cfg for cfg in todo
        }
        return self._collect(pending, todo)

    def _collect(self, pending: dict[Future, TrialConfig], todo: list[TrialConfig]):
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: todo.index(pending[f])):
                cfg = pending.pop(future)
                try:
                    result, config, weights = future.result()
                except BrokenProcessPool:
                    raise WorkerError(
                        f"a trial worker died while training {cfg.task}/{cfg.scheme}/{cfg.variant}/seed{cfg.seed} "
                        f"(killed, or out of memory); the trials stored before stay: run again to resume, "
                        f"with fewer --workers if memory is short"
                    ) from None
                yield cfg, result, None if weights is None else unpack_model(config, weights)

    def close(self, *, kill: bool = False) -> None:
        """Stop the pool: wait for the workers to exit, or kill them (``kill``)."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        if not kill:
            executor.shutdown(wait=True)
            return
        # the executor has no public way to end running tasks: kill its processes ourselves
        processes = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.kill()
        for process in processes:
            process.join(timeout=10)

    def __exit__(self, exc_type, *exc) -> None:
        self.close(kill=exc_type is not None)


def _init_worker(threads: int, parent: int, compile_cache: str | None = None) -> None:
    """In each worker, once: die with the parent, leave Ctrl-C to it, set the torch threads, and
    compile into the parent's cache directory ``compile_cache``."""
    if compile_cache is not None:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = compile_cache  # read when Inductor first compiles
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the watcher alone
            pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="posembed-watch-parent", daemon=True).start()
    torch.set_num_threads(threads)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def train_packed(
    cfg: TrialConfig, keep_model: bool, device: str = "auto"
) -> tuple[TrialResult, dict | None, bytes | None]:
    """Train one trial in a worker (a process of the pool, a Ray task) on ``device``; the model travels
    back as its config and state-dict bytes, on the CPU (``None, None`` unless ``keep_model``)."""
    result, model = train_trial(cfg, device=device)
    if not keep_model:
        return result, None, None
    buffer = io.BytesIO()
    torch.save({key: value.cpu() for key, value in model.state_dict().items()}, buffer)
    return result, model.config_dict(), buffer.getvalue()


def unpack_model(config: dict, weights: bytes) -> nn.Module:
    """The worker's trained model (:func:`train_packed`), rebuilt in the parent (the same tensors, bit for bit)."""
    from posembed.nn.model.transformer import build_model

    model = build_model(config)
    model.load_state_dict(torch.load(io.BytesIO(weights), weights_only=True), strict=True)
    return model.eval()
