"""Write BENCHMARKS.md's "Latest full run" from the run stored under ``results/bench/``.

The block between ``<!-- generated:bench-full -->`` markers is the stored run's ``results.json`` laid out by the
package's own report (:func:`posembed.bench.harness.markdown`: the machine line, the targets, one table per suite),
with the run's command, commit, load and times from its ``meta.json`` above it;
``tests/test_bench_page.py`` fails when the page differs.

Usage (from the repository root)::

    python tools/bench_page.py write     # rewrite the block
    python tools/bench_page.py check     # exit 1 when the page differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.pages import check_block, write_block  # noqa: E402

PAGE = ROOT / "BENCHMARKS.md"
RUN = ROOT / "results" / "bench" / "cpu-full"
NAME = "bench-full"


def run_line(meta: dict) -> str:
    """How the stored run was made, in one paragraph."""
    load = meta["load"]
    return (f"Run `{meta['command']}` at commit {meta['commit']} on {meta['date']} ({meta['device']}; load "
            f"{load['start']:g} at start, median {load['median']:g}, {load['min']:g}-{load['max']:g} during; "
            f"{meta['wall']} wall, {meta['cpu_seconds']:.0f} CPU s). Stored in `results/bench/{RUN.name}/`.")


def body(run: Path = RUN) -> str:
    """The block's text, from ``run``'s ``results.json`` and ``meta.json``."""
    from posembed.bench.harness import Row, markdown

    payload = json.loads((run / "results.json").read_text(encoding="utf-8"))
    meta = json.loads((run / "meta.json").read_text(encoding="utf-8"))
    rows = [Row(**row) for row in payload["rows"]]
    report = markdown(rows, payload["targets"], payload["machine"], payload["quick"])
    return "\n" + run_line(meta) + "\n\n" + report.rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("write", "check"))
    args = parser.parse_args(argv)
    if args.action == "write":
        write_block(PAGE, NAME, body())
        return 0
    problems = check_block(PAGE.read_text(encoding="utf-8"), NAME, body())
    print("\n".join(problems) or "BENCHMARKS.md holds the stored run")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
