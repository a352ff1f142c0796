"""docs/results.md's context-study blocks, written from the stored results under ``results/context/``.

``results/context/study.json`` holds the per-seed rows of the study the page reports (one object per
stored value: seed, model, method, length, metric, depth, value) and the study's config;
``results/context/passkey-rate.json`` the RoPE model's passkey accuracy at L per seed (the rate), in
named sets of runs (torch's AVX-512 or AVX2 kernels, on a given day), each with its command, commit,
machine, date and capability;
``meta.json`` the command, commit, threads, device, load and date of each run behind them.

Usage (from the repository root)::

    python tools/context_page.py export STORE:CONFIG_ID...   # runs of context.sqlite stores -> study.json
    python tools/context_page.py rate STORE:CONFIG_ID... --name NAME --about kernels=AVX2 --about capability=AVX2 \\
        --about command=... --about commit=... --about machine=... --about date=...
        # RoPE's passkey accuracy at L per seed -> passkey-rate.json
    python tools/context_page.py write                        # rewrite the page's blocks
    python tools/context_page.py check                        # exit 1 when a block differs

The blocks (``<!-- generated:NAME -->``): ``context-run``, ``context-passkey-rate``,
``context-core-share``, ``context-verdicts``, ``context-perplexity``, ``context-passkey``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "context"
PAGE = ROOT / "docs" / "results.md"

__all__ = [
    "ABOUT",
    "blocks",
    "clopper_pearson",
    "load_study",
    "rate_text",
    "retrieves",
    "export",
    "export_rate",
    "main",
]


def _read(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def load_study(results: Path = RESULTS):
    """The stored study as the report reads it (:class:`posembed.lab.report.context.Results`)."""
    from posembed.lab.report.context import Results

    stored = json.loads((results / "study.json").read_text(encoding="utf-8"))
    return Results(stored["rows"], stored["config"])


#: what each set of runs in ``passkey-rate.json`` names: its kernels (``AVX-512`` or ``AVX2``), the
#: capability torch reported (``torch.backends.cpu.get_cpu_capability()``), the command behind its
#: values, the commit it ran at, the machine and the date
ABOUT = ("kernels", "capability", "command", "commit", "machine", "date")


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95 % interval of a rate of ``k`` of ``n``."""
    from scipy.stats import beta

    if not 0 <= k <= n or n < 1:
        raise ValueError(f"a rate needs 0 <= k <= n and n >= 1, got k={k}, n={n}")
    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def _sets(rate: dict) -> dict[str, dict]:
    """Set name -> the set, each checked to name what made it (:data:`ABOUT`) and to hold values."""
    if not rate.get("sets"):
        raise ValueError("passkey rate: no sets of runs")
    for name, values in rate["sets"].items():
        missing = [key for key in ABOUT if not values.get(key)]
        if missing:
            raise ValueError(f"passkey rate ({name}): missing {', '.join(missing)}; each set names {', '.join(ABOUT)}")
        if not values.get("accuracy_at_L"):
            raise ValueError(f"passkey rate ({name}): no per-seed accuracy_at_L")
    return rate["sets"]


def retrieves(rate: dict) -> dict[str, dict[str, bool]]:
    """Set name -> seed -> whether RoPE retrieves the passkey at L there (accuracy >= the criterion)."""
    return {
        name: {seed: value >= rate["criterion"] for seed, value in values["accuracy_at_L"].items()}
        for name, values in _sets(rate).items()
    }


def _seeds(values) -> list[str]:
    return sorted(values, key=int)


def _differs(a: dict, b: dict) -> str:
    """What differs between two sets of runs: their kernels, the day (the machine under it), the commit."""
    what = [
        label
        for label, key, width in (("kernels", "kernels", None), ("day", "date", 10), ("commit", "commit", None))
        if a[key][:width] != b[key][:width]
    ]
    return " and ".join(what) or "nothing stated"


def _cell(text: str) -> str:
    """``text`` safe in a markdown table cell."""
    return text.replace("|", "\\|")


def rate_text(rate: dict) -> str:
    """The rate as tables: for each set of runs, ``k of n`` seeds reaching the criterion (counted here
    from the per-seed values) with an exact (Clopper-Pearson) 95 % interval, its kernels, commit, date
    and per-seed accuracies, then each set's command; then, for each two sets sharing seeds and
    differing in one thing only, the seeds whose verdict is not the same in both."""
    criterion, sets, verdicts = rate["criterion"], _sets(rate), retrieves(rate)
    lines = [
        f"**RoPE learns passkey retrieval at L**, counted over seeds: a seed counts when its accuracy at L, "
        f"the mean over {rate['depths']} depths x {rate['samples']} documents, is >= {criterion:g}.",
        "",
        "| set of runs | torch's kernels (capability) | commit | date | seeds that retrieve | "
        "exact 95 % interval of the rate | accuracy at L, by seed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, values in sets.items():
        k, n = sum(verdicts[name].values()), len(verdicts[name])
        low, high = clopper_pearson(k, n)
        accuracies = values["accuracy_at_L"]
        per_seed = ", ".join(f"{s}: {accuracies[s]:.4g}" for s in _seeds(accuracies))
        lines.append(
            f"| {name} | {values['kernels']} ({values['capability']}) | {values['commit'][:7]} | "
            f"{values['date']} | {k} of {n} | {low:.2f} to {high:.2f} | {per_seed} |"
        )
    lines += ["", "Each set's command and machine:", ""]
    lines += [f"- {name}: `{values['command']}` ({values['machine']})" for name, values in sets.items()]
    compared = []
    names = list(sets)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            a, b = sets[first]["accuracy_at_L"], sets[second]["accuracy_at_L"]
            both = [s for s in _seeds(a) if s in b]
            differs = _differs(sets[first], sets[second])
            if not both or " and " in differs:  # nothing shared, or two things differ: not comparable
                continue
            flipped = [s for s in both if verdicts[first][s] != verdicts[second][s]]
            if flipped:
                verdict = (
                    f"**not the same** on {len(flipped)} of {len(both)} (seed "
                    + ", ".join(f"{s}: {a[s]:.4g} / {b[s]:.4g}" for s in flipped)
                    + ")"
                )
            else:
                verdict = f"the same on each of {len(both)}"
            compared.append(f"| {_cell(first)} against {_cell(second)} | {differs} | {', '.join(both)} | {verdict} |")
    if compared:
        lines += [
            "",
            "Sets of runs that differ in one thing only, on the seeds run in both:",
            "",
            "| compared | they differ in | seeds in both | the verdict is |",
            "|---|---|---|---|",
            *compared,
        ]
    return "\n".join(lines)


def _run_text(meta: dict) -> str:
    lines = []
    for run in meta["runs"]:
        lines.append(
            f"- `{run['command']}` at commit {run['commit'][:7]}, {run['threads']} thread, {run['device']}, "
            f"{run['date']}: {run['wall']} wall, {run['cpu']} CPU, load {run['load']}. {run['what']}"
        )
    return "\n".join(lines)


def _seconds(clock: str) -> float:
    """``"1:16:28"``, ``"55:52.54"`` or ``"190 s"`` in seconds."""
    if clock.endswith(" s"):
        return float(clock[:-2])
    seconds = 0.0
    for part in clock.split(":"):
        seconds = 60 * seconds + float(part)
    return seconds


def core_share_text(meta: dict) -> str:
    """The share of one core each stored run had: its CPU time over its wall time, lowest to highest.

    >>> core_share_text({"runs": [{"cpu": "190 s", "wall": "55:52.54"}, {"cpu": "67 s", "wall": "3:44.14"}]})
    'the shared cores left the runs above 5.7 % to 30 % of a core (CPU time over wall time, per run).'
    """
    shares = sorted(_seconds(run["cpu"]) / _seconds(run["wall"]) for run in meta["runs"])
    return (
        f"the shared cores left the runs above {100 * shares[0]:.2g} % to {100 * shares[-1]:.2g} % of a core "
        f"(CPU time over wall time, per run)."
    )


def blocks() -> dict[str, str]:
    """Block name -> its body (each starting and ending with a newline)."""
    from posembed.lab.report.context import metric_table, verdict_table

    study = load_study()
    bodies = {
        "context-run": _run_text(_read("meta.json")),
        "context-passkey-rate": rate_text(_read("passkey-rate.json")),
        "context-core-share": core_share_text(_read("meta.json")),
        "context-verdicts": verdict_table(study),
        "context-perplexity": metric_table(study, "perplexity"),
        "context-passkey": metric_table(study, "passkey_mean"),
    }
    return {name: f"\n{body}\n" for name, body in bodies.items()}


def export(runs: list[str], out: Path = RESULTS) -> Path:
    """The runs ``STORE:CONFIG_ID`` (one per seed, from one or more context.sqlite stores) as
    ``study.json``: the config of the first (its seed and seed list dropped) and every row with its seed."""
    from posembed._utils.io import atomic_write_text
    from posembed.lab.context.store import ContextStore

    rows, ids, config = [], [], None
    for run in runs:
        store, _, config_id = run.rpartition(":")
        context = ContextStore(store)
        name, body = context.configs()[config_id]
        rows += [dict(row, seed=body["seed"]) for row in context.rows(config_id)]
        ids.append(config_id)
        config = config or {**{k: v for k, v in body.items() if k not in ("seed", "seeds")}, "name": name}
    out.mkdir(parents=True, exist_ok=True)
    body = {"config": config, "config_ids": ids, "rows": rows}
    return atomic_write_text(out / "study.json", json.dumps(body, sort_keys=True) + "\n")


def export_rate(runs: list[str], name: str, about: dict[str, str], out: Path = RESULTS) -> Path:
    """RoPE's passkey accuracy at L (mean over depths) of each run ``STORE:CONFIG_ID`` (one per seed)
    into ``passkey-rate.json`` as the set of runs ``name`` (replacing one of that name), with each model's
    final training loss and ``about`` (:data:`ABOUT`); the file keeps the criterion the report counts by
    and the documents behind each value, the same for every set."""
    from posembed._utils.io import atomic_write_text
    from posembed.lab.context.store import NO_DEPTH, ContextStore, train_id_of
    from posembed.lab.report.context_verdicts import RETRIEVES

    def read(run: str) -> tuple[int, float, float, tuple[int, int]]:
        store, _, config_id = run.rpartition(":")
        context = ContextStore(store)
        _, body = context.configs()[config_id]
        found = [
            r["value"]
            for r in context.rows(config_id)
            if (r["model"], r["method"], r["length"], r["metric"], r["depth"])
            == ("rope", "extrapolate", body["context"], "passkey_mean", NO_DEPTH)
        ]
        if len(found) != 1:
            raise ValueError(f"{run}: no passkey accuracy of rope at L = {body['context']}")
        loss = context.models(train_id_of(body)).get("rope", {}).get("final_loss")
        return body["seed"], found[0], loss, (body["depths"], body["passkey_samples"])

    missing = [key for key in ABOUT if not about.get(key)]
    if missing:
        raise ValueError(f"the runs of {name!r} need {', '.join(missing)} (each set names {', '.join(ABOUT)})")
    measured = [read(run) for run in runs]
    seeds = [seed for seed, *_ in measured]
    if len(set(seeds)) < len(seeds):
        raise ValueError(f"the runs of {name!r} repeat a seed: {sorted(seeds)}")
    sizes = {size for *_, size in measured}
    path = out / "passkey-rate.json"
    body = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"sets": {}}
    if "depths" in body:
        sizes.add((body["depths"], body["samples"]))
    if len(sizes) != 1:
        raise ValueError(f"the runs measured passkey accuracy on different grids: {sorted(sizes)}")
    ((depths, samples),) = sizes
    body.update(criterion=RETRIEVES, depths=depths, samples=samples)
    body["sets"][name] = {
        **about,
        "runs": list(runs),
        "accuracy_at_L": {str(s): v for s, v, _, _ in measured},
        "final_loss": {str(s): loss for s, _, loss, _ in measured},
    }
    out.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, json.dumps(body, indent=1, sort_keys=True) + "\n")


def _about(pairs: list[str]) -> dict[str, str]:
    about = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or key not in ABOUT:
            raise SystemExit(f"--about takes KEY=VALUE with KEY one of {', '.join(ABOUT)}, got {pair!r}")
        about[key] = value
    return about


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from tools.pages import check_blocks, write_blocks

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    exported = sub.add_parser("export")
    exported.add_argument("runs", nargs="+", metavar="STORE:CONFIG_ID")
    rate = sub.add_parser("rate")
    rate.add_argument("runs", nargs="+", metavar="STORE:CONFIG_ID")
    rate.add_argument("--name", required=True, help="the set of runs these are (replaces a stored set of that name)")
    rate.add_argument(
        "--about",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"what made the runs, each of {', '.join(ABOUT)}",
    )
    sub.add_parser("write")
    sub.add_parser("check")
    args = parser.parse_args(argv)
    if args.command == "export":
        print(export(args.runs))
        return 0
    if args.command == "rate":
        print(export_rate(args.runs, args.name, _about(args.about)))
        return 0
    if args.command == "write":
        write_blocks(PAGE, blocks())
        return 0
    problems = check_blocks(PAGE.read_text(encoding="utf-8"), blocks())
    print("\n".join(problems) or "every block holds what its generator writes")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
