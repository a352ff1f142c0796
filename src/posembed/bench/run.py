"""Run the chosen benchmark suites and write their report: :func:`run_suites`."""

from __future__ import annotations

import importlib
import logging
import time
from pathlib import Path

import torch

from posembed._utils.devices import cpu_tuned, resolve_device
from posembed.bench.harness import Row, machine_info, write_report
from posembed.bench.suites import PROGRESS_LOGGER, SUITES

__all__ = ["run_suites"]

log = logging.getLogger("posembed.bench")


def run_suites(
    *,
    quick: bool = False,
    only: list[str] | None = None,
    out: Path | str = "bench-results",
    threads: int | None = None,
    repeats: int | None = None,
    progress: bool | str | None = None,
    device: str | torch.device | None = "auto",
) -> dict:
    """Run the chosen suites, write JSON + markdown into ``out``; return paths, rows and targets.

    ``device``: where the suites time (:func:`posembed._utils.devices.resolve_device`; ``auto`` is CUDA
    when present, else the CPU); the report records it. Each suite's ``targets`` were set for the
    CPU's fast paths and are checked there; off the CPU its ``cuda_targets``, where it has them.

    ``progress``: ``None``/``True`` a bar on a terminal, else one INFO record per finished suite
    on :data:`PROGRESS_LOGGER`; ``False`` none (:func:`posembed.lab.sweep.progress.progress_mode`).
    """
    from posembed.lab.sweep.progress import Progress, progress_mode

    names = list(SUITES) if not only else only
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise ValueError(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(SUITES)}")
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    device = resolve_device(device)
    if not cpu_tuned(device):
        log.info("timing on %s: the CPU's targets are not checked, only those set for CUDA", device)
    machine = machine_info(device)
    rows: list[Row] = []
    targets: list[dict] = []
    with Progress(
        len(names),
        mode=progress_mode(progress),
        desc="bench suites",
        unit="suite",
        logger=logging.getLogger(PROGRESS_LOGGER),
    ) as reporter:
        for name in names:
            module = importlib.import_module(SUITES[name])
            log.info("running %s", name)
            reporter.working_on(name)
            start = time.perf_counter()
            kwargs = {"threads": threads} if name == "attention" else {}
            suite_rows = module.run(quick=quick, repeats=repeats, device=device, **kwargs)
            rows += suite_rows
            if cpu_tuned(device):
                targets += module.targets(suite_rows)
            elif hasattr(module, "cuda_targets"):
                targets += module.cuda_targets(suite_rows)
            reporter.advance(f"{name}, {len(suite_rows)} cases", time.perf_counter() - start)
    json_path, md_path = write_report(rows, targets, machine, Path(out), quick)
    return {"json": json_path, "markdown": md_path, "rows": rows, "targets": targets}
