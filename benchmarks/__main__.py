"""``python -m benchmarks [-v] [--quick] [--only NAME] [--out DIR] [--threads N] [--device D]``.

The suites live in the package (:mod:`posembed.bench`, also ``posembed bench``); this script runs
them from the checkout with the results written to ``benchmarks/results`` (the folder
BENCHMARKS.md is written from), on the CPU unless ``--device`` says otherwise (BENCHMARKS.md's
tables are CPU tables; a GPU run names its device in its machine line).
"""

from __future__ import annotations

import sys

from posembed.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    verbose = [a for a in args if a in ("-v", "-vv", "--verbose")]
    rest = [a for a in args if a not in verbose]
    if not any(a == "--out" or a.startswith("--out=") for a in rest):
        rest += ["--out", "benchmarks/results"]
    if not any(a == "--device" or a.startswith("--device=") for a in rest):
        rest += ["--device", "cpu"]
    sys.exit(main([*verbose, "bench", *rest]))
