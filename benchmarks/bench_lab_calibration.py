"""Calibrate the lab against nanoGPT: its CPU recipe on tinyshakespeare, val loss ~1.886.

Trains :data:`posembed.lab.calibration.NANOGPT_CPU` (4 layers, 4 heads, width 128, block 64,
batch 12, 2000 iterations, dropout 0, learned absolute positions, AdamW lr 1e-3 -> 1e-4 cosine,
warmup 100, beta2 0.99) and reports the validation loss, its distance to nanoGPT's published
1.886 (tolerance 0.05) and the time per iteration.

Two entry points:

- a benchmark suite (``SECTION``, ``run(quick, repeats)``, ``targets(rows)``) for
  :func:`posembed.bench.run_suites` style; ``quick`` trains 200 iterations and sets no target;
- a script: ``python benchmarks/bench_lab_calibration.py [--text PATH] [--steps N] [--json OUT]
  [--threads K]``, exit code 1 when a full run lands outside the tolerance.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys

import torch

from posembed.lab.calibration import NANOGPT_CPU, TARGET_VAL_LOSS, TOLERANCE, run_calibration

SECTION = "lab calibration (nanoGPT CPU recipe)"
IMPL = "posembed lab Decoder"


def _label(steps: int) -> str:
    return (
        f"tinyshakespeare, {NANOGPT_CPU.depth} layers, width {NANOGPT_CPU.dim}, block {NANOGPT_CPU.context}, "
        f"{steps} iterations"
    )


def run(quick: bool = False, repeats: int | None = None):
    """One training run (``repeats`` is ignored: the run is its own long measurement)."""
    from posembed.bench.harness import Row

    steps = 200 if quick else NANOGPT_CPU.steps
    result = run_calibration(steps=steps)
    extra = {
        "val_loss": round(result.val_loss, 4),
        "target": TARGET_VAL_LOSS,
        "tolerance": TOLERANCE,
        "iterations": steps,
        "seconds": round(result.seconds, 1),
    }
    return [Row(SECTION, _label(steps), IMPL, round(1000 * result.seconds_per_iteration, 2), None, extra)]


def targets(rows) -> list[dict]:
    found = []
    for row in rows:
        if row.section == SECTION and row.extra.get("iterations") == NANOGPT_CPU.steps:
            loss = row.extra["val_loss"]
            found.append(
                {
                    "target": f"nanoGPT CPU recipe: val loss {TARGET_VAL_LOSS} +/- {TOLERANCE}",
                    "measured": f"{loss:.4f} ({row.median_ms:.0f} ms/iteration)",
                    "met": abs(loss - TARGET_VAL_LOSS) <= TOLERANCE,
                }
            )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--text", default="tinyshakespeare", help="text file (default: the tinyshakespeare text shipped in the package)"
    )
    parser.add_argument("--steps", type=int, default=None, help="fewer iterations for a quick look (default 2000)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    result = run_calibration(
        args.text, steps=args.steps, on_step=lambda s, loss: print(f"iter {s:5d}  train loss {loss:.4f}", flush=True)
    )
    print(result.summary())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({**dataclasses.asdict(result), "within_tolerance": result.within_tolerance}, handle, indent=2)
    return 0 if result.within_tolerance or args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
