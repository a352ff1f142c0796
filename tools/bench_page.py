"""Write BENCHMARKS.md's "Latest full run" from the runs stored under ``results/bench/``.

Each folder there (named ``YYYY-MM-DD-HHMM``) is one full CPU run: ``results.json`` and ``results.md`` as
``python -m benchmarks`` wrote them, and ``meta.json`` (command, commit, load, wall and CPU time). The block between
``<!-- generated:bench-full -->`` markers holds each target's value in every stored run, side by side (on this
shared machine which target misses changes from run to run), then the latest run laid out by the package's own
report (:func:`posembed.bench.harness.markdown`: the machine line, the targets, one table per suite). The block
``bench-rope-ab`` is the stored A/B of RoPE against a revision (``results/bench/ab-rope-4d3ea1e/``: what
``benchmarks/compare_revision.py --json`` wrote, and its ``meta.json``), laid out by that script's own report.
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

from tools.pages import check_blocks, write_blocks  # noqa: E402

PAGE = ROOT / "BENCHMARKS.md"
RESULTS = ROOT / "results" / "bench"
NAME = "bench-full"
AB = RESULTS / "ab-rope-4d3ea1e"
AB_NAME = "bench-rope-ab"


def runs(results: Path = RESULTS) -> list[Path]:
    """The stored runs, oldest first."""
    return sorted(folder for folder in results.iterdir() if (folder / "results.json").is_file())


def _read(run: Path) -> tuple[dict, dict]:
    return (
        json.loads((run / "results.json").read_text(encoding="utf-8")),
        json.loads((run / "meta.json").read_text(encoding="utf-8")),
    )


def run_line(run: Path, meta: dict) -> str:
    """How a stored run was made, in one paragraph."""
    load = meta["load"]
    return (
        f"Run `{meta['command']}` at commit {meta['commit']} on {meta['date']} ({meta['device']}; load "
        f"{load['start']:g} at start, median {load['median']:g}, {load['min']:g}-{load['max']:g} during; "
        f"{meta['wall']} wall, {meta['cpu_seconds']:.0f} CPU s). Stored in `results/bench/{run.name}/`."
    )


def targets_table(folders: list[Path]) -> list[str]:
    """One row per target, one column per stored run: the measured value and whether it was met."""
    stored = [(folder, *_read(folder)) for folder in folders]
    heads = [f"{folder.name} ({meta['commit']}, load {meta['load']['median']:g})" for folder, _, meta in stored]
    names = list(dict.fromkeys(t["target"] for _, payload, _ in stored for t in payload["targets"]))
    lines = ["| target | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    for name in names:
        cells = []
        for _, payload, _ in stored:
            found = [t for t in payload["targets"] if t["target"] == name]
            cells.append(f"{found[0]['measured']} {'yes' if found[0]['met'] else '**NO**'}" if found else "—")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def body(results: Path = RESULTS) -> str:
    """The block's text, from the runs stored under ``results``."""
    from posembed.bench.harness import Row, markdown

    folders = runs(results)
    latest = folders[-1]
    payload, meta = _read(latest)
    report = markdown([Row(**row) for row in payload["rows"]], payload["targets"], payload["machine"], payload["quick"])
    lines = [
        f"Each target in the {len(folders)} stored full runs:",
        "",
        *targets_table(folders),
        "",
        f"The latest, {latest.name}, in full. " + run_line(latest, meta),
        "",
        report.rstrip("\n"),
    ]
    return "\n" + "\n".join(lines) + "\n"


def ab_body(folder: Path = AB) -> str:
    """The ``bench-rope-ab`` block: the stored A/B's tables (:func:`benchmarks.compare_revision.report`) and how it
    ran."""
    from benchmarks.compare_revision import report

    stored = json.loads((folder / "compare.json").read_text(encoding="utf-8"))
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    tables = report(stored["revision"], stored["results"], (stored["revision"], "current"))
    return (
        f"\nRun `{meta['command']}` at commit {meta['commit']} on {meta['date']} (load {meta['load']['start']:g} at "
        f"start, {meta['load']['end']:g} at the end; {meta['threads']} thread, {meta['repeats']} timed repeats per "
        f"process). Stored in `results/bench/{folder.name}/`.\n\n{tables.rstrip()}\n"
    )


def blocks() -> dict[str, str]:
    """Every generated block of BENCHMARKS.md, by name."""
    return {NAME: body(), AB_NAME: ab_body()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("write", "check"))
    args = parser.parse_args(argv)
    if args.action == "write":
        write_blocks(PAGE, blocks())
        return 0
    problems = check_blocks(PAGE.read_text(encoding="utf-8"), blocks())
    print("\n".join(problems) or "BENCHMARKS.md holds the stored runs")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
