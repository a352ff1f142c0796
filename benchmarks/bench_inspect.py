"""Time the default ``posembed inspect`` (all-MiniLM-L6-v2, default settings) end to end.

Target: under 60 s on a 2-core CPU. Run: ``python benchmarks/bench_inspect.py [--repeat N] [--out DIR]``.
It runs the real command (``python -m posembed.cli inspect``) in a fresh process, so the time includes
imports and model loading, and prints the wall time of each run plus the per-section times from
``metrics.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 60.0


def run_once(out: Path) -> float:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "posembed.cli", "inspect", "--out", str(out)],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="number of runs (default 1)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: a temporary folder)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-inspect-"))
    times = [run_once(out) for _ in range(args.repeat)]
    sections = json.loads((out / "metrics.json").read_text())["timings_seconds"]
    print(f"cpu cores: {os.cpu_count()}  load average: {os.getloadavg()[0]:.1f}")
    print("sections (s): " + ", ".join(f"{name} {seconds:.1f}" for name, seconds in sections.items()))
    for index, seconds in enumerate(times):
        print(f"run {index + 1}: posembed inspect took {seconds:.1f} s (target < {TARGET_SECONDS:.0f} s)")
    best = min(times)
    print(f"best: {best:.1f} s -> {'OK' if best < TARGET_SECONDS else 'SLOWER THAN TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
