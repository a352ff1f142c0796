"""Trials as Ray tasks: a sweep spread over a cluster, this process (the driver) the only writer.

``posembed lab run --preset full --ray HEAD:6379`` joins a running Ray cluster;
``--ray auto`` joins the local one ``ray start --head`` started, or else starts a fresh local
instance (no dashboard, ``num_cpus`` bounded by ``--workers`` x ``--threads``, by default the
cores this process may use).

Design, the same as the local worker pool's (:mod:`posembed.lab.sweep.workers`):

- Each trial is one Ray task (``max_retries=2``: a task whose worker process or node dies is
  run again, up to three attempts in all). A task asks for ``threads`` CPUs, sets that many
  torch threads and trains the trial with :func:`~posembed.lab.training.train.train_trial`, seeded from
  the trial's config alone: the numbers and the weights are those of the sequential run, bit
  for bit (same torch, same CPU kind).
- Tasks write nothing. A task returns the :class:`~posembed.lab.training.train.TrialResult` and, when
  checkpoints are kept, the model's config and ``torch.save`` bytes of its state dict; the
  driver rebuilds the model and stores the trial and its checkpoint. So the out folder's lock,
  the one-transaction-per-trial store and resume hold unchanged: interrupt the driver and run
  the same command again.
- On an error or Ctrl-C in the driver the trials still queued or running are cancelled
  (``force``: their workers are killed); a Ray instance this process started is shut down, a
  cluster it joined is left running. If the driver itself dies, Ray ends the job's tasks.

Every node needs ``posembed`` installed (the same version and torch as the driver). Ray is
optional: ``pip install 'posembed[ray]'``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator

from torch import nn

from posembed._utils.hints import install_hint
from posembed.errors import WorkerError
from posembed.lab.config import TrialConfig
from posembed.lab.sweep.workers import available_cores, train_packed, unpack_model
from posembed.lab.training.train import TrialResult

__all__ = ["RayTrialPool", "require_ray", "check_address", "MAX_RETRIES"]

logger = logging.getLogger(__name__)

#: times a task is run again after its worker or node died
MAX_RETRIES = 2


def require_ray():
    """The ``ray`` module, or an ``ImportError`` whose message is the one line to install it
    (:func:`posembed._utils.hints.install_hint`: the ``[ray]`` extra, the installed torch kept)."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"--ray needs Ray: {install_hint('ray')}") from None
    return ray


def _run_trial(train: Callable, cfg: TrialConfig, keep_model: bool, threads: int):
    """The task body, in a Ray worker: ``threads`` torch threads, then one trial."""
    import torch

    torch.set_num_threads(threads)
    return train(cfg, keep_model)


def check_address(address: str, timeout: float = 5.0) -> None:
    """A clear error at once for a ``HOST:PORT`` nothing listens on (``ray.init`` would retry
    for minutes). Loopback hosts are left to Ray: it swaps them for this node's address."""
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit() or host in ("localhost", "127.0.0.1", "::1", "[::1]"):
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        raise ValueError(
            f"cannot reach the Ray cluster at {address!r} ({error.strerror or error}); start it with "
            f"`ray start --head --port={port}` on that machine, or pass --ray auto"
        ) from None


class RayTrialPool:
    """Trials as Ray tasks of ``threads`` CPUs each; a context manager, like
    :class:`~posembed.lab.sweep.workers.TrialPool`.

    Args:
        address: ``"auto"`` (join the local cluster, else start one) or a cluster's
            ``HOST:PORT``.
        threads: torch threads (and Ray CPUs) of each task.
        max_in_flight: trials submitted at once (``None``: all; Ray runs as many as the
            cluster's CPUs hold). A local instance started here gets ``max_in_flight x
            threads`` CPUs (``None``: the cores this process may use).
        keep_models: send each trained model back (its checkpoint).
    """

    def __init__(
        self, address: str, threads: int = 1, *, max_in_flight: int | None = None, keep_models: bool = True
    ) -> None:
        if threads < 1 or (max_in_flight is not None and max_in_flight < 1):
            raise ValueError(f"threads and max_in_flight must be at least 1, got {threads}, {max_in_flight}")
        self.address, self.threads, self.max_in_flight, self.keep_models = address, threads, max_in_flight, keep_models
        self._ray = None
        self._connected_here = False
        self._pending: dict = {}

    def __enter__(self) -> RayTrialPool:
        ray = require_ray()
        if ray.is_initialized():  # the caller connected already: use that, leave it connected
            logger.info("Ray: using this process's connection (--ray %s not applied)", self.address)
        else:
            self._connect(ray)
            self._connected_here = True
        self._ray = ray
        return self

    def _connect(self, ray) -> None:
        if self.address != "auto":
            check_address(self.address)
            self._init(ray, address=self.address)
            return
        try:
            self._init(ray, address="auto")
        except ConnectionError:  # no cluster on this machine: start one, bounded
            cpus = available_cores() if self.max_in_flight is None else self.max_in_flight * self.threads
            logger.info("Ray: no running cluster found, starting a local instance with %d CPUs", cpus)
            self._init(ray, address="local", num_cpus=max(cpus, self.threads), include_dashboard=False)

    def _init(self, ray, address: str, **options) -> None:
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING, **options)
        except ConnectionError as error:  # an OSError: it must not read as "cannot write"
            if address == "auto":
                raise
            raise ValueError(
                f"cannot join the Ray cluster at {address!r} ({error}); with token authentication (on by default "
                f"since Ray 2.59) export RAY_AUTH_MODE=token and the cluster's token (`ray get-auth-token`) here"
            ) from None
        logger.info("Ray: %d CPUs in the cluster", int(ray.cluster_resources().get("CPU", 0)))

    def describe(self) -> str:
        """What the progress shows while trials run, e.g. ``Ray, 16 CPUs``."""
        cpus = int(self._ray.cluster_resources().get("CPU", 0))
        return f"Ray, {cpus} CPUs"

    def run(self, todo: list[TrialConfig]) -> Iterator[tuple[TrialConfig, TrialResult, nn.Module | None]]:
        """Submit the trials of ``todo`` (in order, at most ``max_in_flight`` at a time); the
        iterator yields ``(config, result, model)`` for each as it finishes."""
        task = self._ray.remote(max_retries=MAX_RETRIES)(_run_trial).options(num_cpus=self.threads)
        queue = list(todo)

        def submit() -> None:
            while queue and (self.max_in_flight is None or len(self._pending) < self.max_in_flight):
                cfg = queue.pop(0)
                self._pending[task.remote(train_packed, cfg, self.keep_models, self.threads)] = cfg

        submit()
        return self._collect(submit)

    def _collect(self, submit: Callable[[], None]):
        ray = self._ray
        while self._pending:
            (ref,), _ = ray.wait(list(self._pending), num_returns=1)
            cfg = self._pending.pop(ref)
            try:
                result, config, weights = ray.get(ref)
            except ray.exceptions.RayTaskError:
                raise  # the trial's own error, re-raised as its own type (as in a local run)
            except ray.exceptions.RayError as error:
                raise WorkerError(
                    f"a Ray task died {MAX_RETRIES + 1} times while training {cfg.task}/{cfg.scheme}/{cfg.variant}/"
                    f"seed{cfg.seed} ({type(error).__name__}: worker or node lost, or out of memory); the trials "
                    f"stored before stay: run again to resume"
                ) from None
            submit()
            yield cfg, result, None if weights is None else unpack_model(config, weights)

    def close(self) -> None:
        """Cancel what is still queued or running; shut down what this pool started."""
        ray, self._ray = self._ray, None
        if ray is None:
            return
        for ref in list(self._pending):
            try:
                ray.cancel(ref, force=True)
            except Exception as error:  # noqa: BLE001 - finished meanwhile, or the cluster is gone
                logger.debug("Ray: could not cancel a task: %s", error)
        self._pending.clear()
        if self._connected_here:
            ray.shutdown()

    def __exit__(self, *exc) -> None:
        self.close()
