"""Stored lab results -> docs/results.md's generated blocks (issue 33: no number typed by hand).

``results/lab/<run>/trials.json`` holds a run's per-seed results (each trial's config, its
final evaluations, its evaluations during training (``during``, each with its step) and final
loss: what the report reads, no checkpoints); ``meta.json`` beside it the exact command, commit,
threads, device, load and date that made them, and the questions and seeds the runner recorded
before the run. ``results/lab/simulation.json`` holds the simulated family-wise false-claim rate
of the whole procedure. This tool

- ``store OUT_DIR RUN --command ... --commit ...``: copies a ``posembed lab run`` store into
  ``results/lab/RUN/`` (the meta fields not given are measured here: load, date, cores);
- ``simulate [--reports N] [--preset P]``: simulates N null reports of preset P (``quick`` by
  default) through the report's family (:mod:`posembed.lab.report.simulate`) and stores the rate in
  ``results/lab/simulation.json`` (``simulation-P.json`` for another preset);
- ``write``: rewrites every ``lab-*`` block of docs/results.md from the stored runs;
- (imported) :func:`blocks`: ``{block name: text}``, which ``tests/test_readme_verdicts.py``
  regenerates and compares with the page.

Usage (from the repository root)::

    python tools/lab_page.py store lab-full full --command "posembed lab run --preset full --out lab-full" \
        --commit abc1234 --device "CPU, 2 cores" --wall "9 h 10 min" --cpu "17 h"
    python tools/lab_page.py simulate --reports 4000
    python tools/lab_page.py write

The verdicts are the report's own (:func:`posembed.lab.report.decisions.lab_decisions` on the
stored trials), so the page and ``posembed lab report`` cannot disagree.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "lab"
PAGE = ROOT / "docs" / "results.md"

SIMULATION = RESULTS / "simulation.json"

__all__ = ["load_run", "blocks", "store", "simulate", "simulation_path", "RESULTS", "PAGE", "SIMULATION"]


def _record_to_json(record) -> dict:
    return {
        "trial_id": record.trial_id,
        "config": record.config.to_dict(),
        "final_loss": record.final_loss,
        "num_params": record.num_params,
        "seconds": round(record.seconds, 3),
        "evals": [[p.metric, p.length, p.value, p.note] for p in record.evals],
        "during": [[p.metric, p.length, p.value, p.note, p.step] for p in record.during],
    }


def load_run(name: str, root: Path = RESULTS):
    """The stored run ``name`` as the report's :class:`~posembed.lab.report.tables.LabData` and its meta."""
    from posembed.lab.config import TrialConfig
    from posembed.lab.report.tables import LabData
    from posembed.lab.sweep.store import TrialRecord
    from posembed.lab.tasks import EvalPoint

    folder = root / name
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    rows = json.loads((folder / "trials.json").read_text(encoding="utf-8"))
    trials = [
        TrialRecord(
            config=TrialConfig.from_dict(r["config"]),
            evals=[EvalPoint(*e) for e in r["evals"]],
            during=[EvalPoint(*e) for e in r.get("during", [])],
            curve=[],
            drift=None,
            num_params=r["num_params"],
            final_loss=r["final_loss"],
            seconds=r["seconds"],
            seconds_per_step=0.0,
            world_size=1,
            checkpoint=None,
            finished_at=meta["date"],
        )
        for r in rows
    ]
    return LabData(folder, {"name": meta["experiment"]}, trials, registration=meta.get("registration")), meta


def store(out_dir: Path, name: str, meta: dict, root: Path = RESULTS) -> Path:
    """Copy the store of ``out_dir`` into ``root/name`` (trials.json, meta.json)."""
    from posembed.lab.registration import META_KEY
    from posembed.lab.sweep.store import ResultsStore, load_results

    results = load_results(out_dir)
    with ResultsStore(out_dir) as opened:
        recorded = opened.meta().get(META_KEY)
    if recorded is not None:
        meta = {**meta, "registration": json.loads(recorded)}
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    rows = sorted(
        (_record_to_json(r) for r in results.trials),
        key=lambda r: (r["config"]["task"], r["config"]["scheme"], r["config"]["variant"], r["config"]["seed"]),
    )
    (folder / "trials.json").write_text(json.dumps(rows, indent=0) + "\n", encoding="utf-8")
    meta = {"experiment": results.experiment.get("name"), "trials": len(rows), **meta}
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return folder


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |"


def _run_block(name: str, root: Path = RESULTS) -> str:
    from posembed.lab.report import build_sections
    from posembed.lab.report.decisions import lab_decisions
    from posembed.lab.report.questions import DECISION_HEADER, TRAINING_HEADER, decision_row, training_table
    from posembed.lab.report.tables import FINAL
    from posembed.lab.report.write import confirmation

    data, meta = load_run(name, root)
    sections = build_sections(data)
    decisions = lab_decisions(data)
    seeds = sorted({len(t) for t in data.groups().values()})
    lines = [
        f"Run `{meta['command']}` at commit {meta['commit'][:7]} on {meta['date'][:10]} ({meta['device']}, "
        f"{meta['threads']} thread per worker, {meta['workers']} workers, load {meta['load']}; {meta['wall']}): "
        f"{meta['trials']} trials, {'-'.join(map(str, (seeds[0], seeds[-1]))) if len(seeds) > 1 else seeds[0]} "
        f"seeds per group. Stored in `results/lab/{name}/`.",
        "",
    ]
    lines += [" ".join(confirmation(data)), ""]
    lines += ["| question | verdict |", "|---|---|"]
    lines += [_row([s.title, s.verdict or "no verdict (the store lacks its trials)"]) for s in sections]
    if len(decisions.points) > 1:
        lines += [
            "",
            "Each primary comparison at every training point (one family with the rest):",
            "",
            _row(TRAINING_HEADER),
            "|" + "---|" * len(TRAINING_HEADER),
        ]
        for question in dict.fromkeys(a.question for a in decisions.asked):
            lines += [_row(row) for row in training_table(decisions, question)[1]]
    lines += [
        "",
        f"Tested comparisons at the end of training (the family holds {decisions.tests} tests in all; Holm "
        "at 5 % over all of them):",
        "",
        _row(DECISION_HEADER),
        "|" + "---|" * len(DECISION_HEADER),
    ]
    lines += [_row(decision_row(d, decisions.look(d))) for d in decisions.family if decisions.look(d).point == FINAL]
    return "\n" + "\n".join(lines) + "\n"


def simulation_path(preset: str, root: Path = RESULTS) -> Path:
    """Where the simulation of ``preset``'s procedure is stored: ``simulation.json`` for ``quick`` (the
    page's first), ``simulation-<preset>.json`` for any other."""
    return root / (SIMULATION.name if preset == "quick" else f"simulation-{preset}.json")


def simulate(reports: int, seed: int = 40, path: Path | None = None, preset: str = "quick") -> dict:
    """Simulate ``reports`` null reports of ``preset`` (every question at every training point and the
    paper checks, on the preset's seeds) and store the family-wise false-claim rate, with the per-look
    rate beside it."""
    import numpy as np

    from posembed.lab.report.simulate import POINTS, false_claims

    path = simulation_path(preset) if path is None else path
    rate, n, looks = false_claims(np.random.default_rng(seed), reports, preset)
    loose = false_claims(np.random.default_rng(seed), max(1, reports // 10), preset, per_look=True)[0]
    command = f"python tools/lab_page.py simulate --reports {reports}" + (
        "" if preset == "quick" else f" --preset {preset}"
    )
    found = {
        "preset": preset,
        "reports": n,
        "rate": rate,
        "standard_error": (rate * (1 - rate) / n) ** 0.5,
        "looks": looks,
        "points": list(POINTS),
        "rho": 0.8,
        "seed": seed,
        "per_look_rate": loose,
        "per_look_reports": max(1, reports // 10),
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    path.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    return found


def _simulation_block(path: Path = SIMULATION) -> str:
    sim = json.loads(path.read_text(encoding="utf-8"))
    return (
        f"{sim['reports']:,} simulated `{sim.get('preset', 'quick')}` reports in which no group differs "
        f"(every question at {len(sim['points'])} training points, correlated {sim['rho']:g} from one point to the "
        f"next, and the paper checks: {sim['looks']} tested comparisons each) named a false winner in "
        f"{sim['rate']:.2%} ± {sim['standard_error']:.2%} of them; judging each look alone at 5 % instead, in "
        f"{sim['per_look_rate']:.0%} of {sim['per_look_reports']:,}. (`{sim['command']}`, {sim['date'][:10]}; "
        f"stored in `results/lab/{path.name}`.)"
    )


#: the verdicts docs/results.md printed for the 2026-11-26 quick run before issue 33 (interval
#: overlap, 2 seeds), keyed by the family member (or paper check) that now judges the same claim
BEFORE = {
    "Q1 charlm: sinusoidal vs learned, val_loss at L": "learned better (ranges apart)",
    "Q1 reverse: sinusoidal vs learned, exact_match at L": "learned better (ranges apart)",
    "Q1 copy: sinusoidal vs learned, exact_match at L": "cannot tell (ranges overlap)",
    "Q1 order: sinusoidal vs learned, accuracy at L": "alike",
    "Q2 charlm: learned concat vs learned add, val_loss at L": "cannot tell (ranges overlap)",
    "Q3 charlm: sinusoidal every_layer vs sinusoidal once, val_loss at L": "once better (mean rule: alike)",
    "Press: learned fails beyond L (8x/1x ratio >= 1.5)": "cannot tell (mean rule: fails, 1.51)",
    "Press: sinusoidal fails beyond L (8x/1x ratio >= 1.5)": "cannot tell (mean rule: does not fail, 1.42)",
    "Press: alibi flatter than learned (8x/1x ratio)": "ALiBi flattest (ranges apart)",
    "Press: alibi flatter than sinusoidal (8x/1x ratio)": "ALiBi flattest (ranges apart)",
    "Press: alibi flatter than rope (8x/1x ratio)": "ALiBi flattest (ranges apart)",
    "Press: alibi flatter than t5_bias (8x/1x ratio)": "ALiBi flattest (ranges apart)",
    "Vaswani et al.": "cannot tell (mean rule: partly)",
    "Press et al.": "cannot tell (mean rule: partly)",
    "Kazemnejad et al.": "cannot tell",
}


def _before_after(name: str) -> str:
    """The page's verdicts before issue 33 beside what the one rule decides on the same stored run."""
    from posembed.lab.report import build_sections
    from posembed.lab.report.decisions import lab_decisions
    from posembed.lab.report.questions import exploratory

    data, _ = load_run(name)
    now = {
        d.comparison.name: d.word or f"exploratory (unadjusted p = {d.p:.2g}): no claim"
        for d in lab_decisions(data, exploratory(data)).by_name.values()
    }
    q6 = next(s for s in build_sections(data) if s.anchor == "q6").verdict
    for paper in ("Vaswani et al.", "Press et al.", "Kazemnejad et al."):
        now[paper] = q6.split(paper + " ", 1)[1].split(";")[0]
    lines = ["| claim | before (interval overlap / mean rule) | now (tested, Holm at 5 %) |", "|---|---|---|"]
    missing = "not tested on this store (the question, or its measure, changed since: see the run's block)"
    lines += [f"| {claim} | {before} | {now.get(claim, missing)} |" for claim, before in BEFORE.items()]
    return "\n" + "\n".join(lines) + "\n"


def blocks(root: Path = RESULTS) -> dict[str, str]:
    """``{"lab-<run>": block text}`` for every stored run, and the before/after table."""
    found = {
        f"lab-{folder.name}": _run_block(folder.name, root)
        for folder in sorted(root.iterdir())
        if (folder / "meta.json").is_file()
    }
    for path in sorted(root.glob("simulation*.json")):
        found["lab-" + path.stem] = _simulation_block(path)
    from posembed.lab.report.decisions import LabDecisions

    found["lab-margins"] = LabDecisions({}, (), ()).margin_note()
    if (root / "quick-4d3ea1e" / "meta.json").is_file():
        found["lab-before-after"] = _before_after("quick-4d3ea1e")
    return found


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from tools.pages import write_blocks

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    put = sub.add_parser("store")
    put.add_argument("out_dir", type=Path)
    put.add_argument("name")
    for key in ("command", "commit", "device", "wall", "cpu"):
        put.add_argument(f"--{key}", required=True)
    put.add_argument("--threads", type=int, default=1)
    put.add_argument("--workers", type=int, default=2)
    put.add_argument("--load", default=None)
    put.add_argument("--date", default=None)
    sim = sub.add_parser("simulate")
    sim.add_argument("--reports", type=int, default=4000)
    sim.add_argument(
        "--preset", default="quick", help="the preset whose procedure is simulated (its seeds and questions)"
    )
    sub.add_parser("write")
    args = parser.parse_args(argv)
    if args.action == "simulate":
        print(json.dumps(simulate(args.reports, preset=args.preset)))
        return 0
    if args.action == "store":
        meta = {k: getattr(args, k) for k in ("command", "commit", "device", "wall", "cpu", "threads", "workers")}
        meta["load"] = args.load or " ".join(f"{x:.1f}" for x in os.getloadavg())
        meta["date"] = args.date or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        print(store(args.out_dir, args.name, meta))
        return 0
    for name, changed in write_blocks(PAGE, blocks()).items():
        print(name, "changed" if changed else "unchanged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
