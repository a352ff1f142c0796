"""``python -m benchmarks [-v] [--quick] [--only NAME] [--out DIR] [--threads N] [--device D]``.

The suites live in the package (:mod:`posembed.bench`, also ``posembed bench``); this script runs
them from the checkout with the results written to ``benchmarks/results`` (the folder
BENCHMARKS.md is written from), on the CPU unless ``--device`` says otherwise (BENCHMARKS.md's
tables are CPU tables). A full run on a GPU (``--device cuda``, not ``--quick``) also writes
BENCHMARKS.md's GPU section, naming the card (:mod:`posembed.bench.gpu_section`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from posembed.cli import main

BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def _option(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return None


def write_gpu_section(out: Path, benchmarks_md: Path = BENCHMARKS_MD) -> bool:
    """BENCHMARKS.md's GPU section from the run in ``out``, when it ran on a GPU and in full."""
    from posembed.bench.gpu_section import update_gpu_section

    payload = json.loads((out / "results.json").read_text())
    if payload["machine"].get("device", "cpu") == "cpu" or payload.get("quick"):
        return False
    update_gpu_section(benchmarks_md, (out / "results.md").read_text(), payload["machine"])
    return True


if __name__ == "__main__":
    args = sys.argv[1:]
    verbose = [a for a in args if a in ("-v", "-vv", "--verbose")]
    rest = [a for a in args if a not in verbose]
    if _option(rest, "--out") is None:
        rest += ["--out", "benchmarks/results"]
    if _option(rest, "--device") is None:
        rest += ["--device", "cpu"]
    code = main([*verbose, "bench", *rest])
    if code == 0 and write_gpu_section(Path(_option(rest, "--out"))):
        print(f"wrote the GPU section of {BENCHMARKS_MD}")
    sys.exit(code)
