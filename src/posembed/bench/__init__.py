"""Side-by-side benchmarks of posembed against the reference implementations.

The suites ship with the package: run them with ``posembed bench`` (``--quick`` uses small
shapes, about 70 s of CPU time; ``--only NAME`` runs one suite; ``--device`` picks where they time:
``auto``, CUDA when present, else the CPU). In the source checkout,
``python -m benchmarks`` does the same and ``benchmarks/`` keeps the scripts that write
BENCHMARKS.md. Results go to
``<out>/results.json`` and ``<out>/results.md``; BENCHMARKS.md holds the latest full table.
The comparison libraries come with ``pip install 'posembed[bench]'``; without one, its rows
say ``skipped: pip install 'posembed[bench]'``.

Files:

=============== ================================================================================
file            what
=============== ================================================================================
``harness``     timing, memory and report helpers shared by every suite
``embeddings``  the embedding block at BERT-base shape against ``BertEmbeddings``
``rope``        RoPE on q and k against transformers, rotary-embedding-torch, x-transformers
``attention``   causal self-attention with a bias scheme: time and peak memory per length
``training``    training throughput of ``Decoder`` against a nanoGPT-style model
``nanogpt_ref`` the nanoGPT-style reference model and loop timed against
``gpu_section`` BENCHMARKS.md's GPU section, written between two markers
=============== ================================================================================
"""

from __future__ import annotations

import importlib
import logging
import time
from pathlib import Path

import torch

from posembed.bench.harness import Row, machine_info, write_report
from posembed.devices import cpu_tuned, resolve_device

__all__ = ["SUITES", "run_suites", "PROGRESS_LOGGER"]

log = logging.getLogger(__name__)

#: one INFO line per finished suite goes here (``posembed bench`` shows it on stderr)
PROGRESS_LOGGER = "posembed.bench.progress"

#: suite name -> module (each has ``run(quick=..., repeats=..., device=...)``, device defaulting to
#: the CPU, and ``targets(rows)``, the CPU's targets; ``cuda_targets(rows)``, where a suite has
#: targets set for CUDA, is checked off the CPU)
SUITES = {
    "embeddings": "posembed.bench.embeddings",
    "rope": "posembed.bench.rope",
    "attention": "posembed.bench.attention",
    "training": "posembed.bench.training",
}


def run_suites(
    *, quick: bool = False, only: list[str] | None = None, out: Path | str = "bench-results",
    threads: int | None = None, repeats: int | None = None, progress: bool | str | None = None,
    device: str | torch.device | None = "auto",
) -> dict:
    """Run the chosen suites, write JSON + markdown into ``out``; return paths, rows and targets.

    ``device``: where the suites time (:func:`posembed.devices.resolve_device`; ``auto`` is CUDA
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
    with Progress(len(names), mode=progress_mode(progress), desc="bench suites", unit="suite",
                  logger=logging.getLogger(PROGRESS_LOGGER)) as reporter:
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
