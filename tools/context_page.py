"""docs/results.md's context-study blocks, written from the stored results under ``results/context/``.

``results/context/study.json`` holds the per-seed rows of the study the page reports (one object per
stored value: seed, model, method, length, metric, depth, value) and the study's config;
``results/context/passkey-rate.json`` the RoPE model's passkey accuracy at L per seed (the rate);
``meta.json`` the command, commit, threads, device, load and date of each run behind them.

Usage (from the repository root)::

    python tools/context_page.py export STORE:CONFIG_ID...   # runs of context.sqlite stores -> study.json
    python tools/context_page.py rate STORE:CONFIG_ID...     # RoPE's passkey accuracy at L per seed -> passkey-rate.json
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

__all__ = ["blocks", "load_study", "rate_text", "export", "export_rate", "main"]


def _read(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def load_study(results: Path = RESULTS):
    """The stored study as the report reads it (:class:`posembed.lab.report.context.Results`)."""
    from posembed.lab.report.context import Results

    stored = json.loads((results / "study.json").read_text(encoding="utf-8"))
    return Results(stored["rows"], stored["config"])


def rate_text(rate: dict) -> str:
    """``k of n seeds`` reaching the criterion, counted here from the per-seed values, with an exact
    (Clopper-Pearson) 95 % interval of the rate."""
    from scipy.stats import beta

    criterion, values = rate["criterion"], rate["accuracy_at_L"]
    k, n = sum(v >= criterion for v in values.values()), len(values)
    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    per_seed = ", ".join(f"seed {seed}: {value:.4g}" for seed, value in sorted(values.items(), key=lambda s: int(s[0])))
    text = (f"**RoPE learns passkey retrieval at L on {k} of {n} seeds** (a seed counts when its accuracy at L, "
            f"the mean over {rate['depths']} depths x {rate['samples']} documents, is >= {criterion:g}; the rate's "
            f"exact 95 % Clopper-Pearson interval: {low:.2f} to {high:.2f}). Per seed: {per_seed}.")
    other = rate.get("avx2")
    if other:
        seed = str(other["seed"])
        text += (f" The same command for seed {seed} on torch's AVX2 kernels instead of AVX-512 (same code, "
                 f"seed and thread) trains a different model: final loss {other['final_loss']:.5f} against "
                 f"{rate['final_loss'][seed]:.5f}, passkey accuracy at L {other['accuracy_at_L']:.4g} against "
                 f"{values[seed]:.4g}.")
    return text


def _run_text(meta: dict) -> str:
    lines = []
    for run in meta["runs"]:
        lines.append(f"- `{run['command']}` at commit {run['commit'][:7]}, {run['threads']} thread, {run['device']}, "
                     f"{run['date']}: {run['wall']} wall, {run['cpu']} CPU, load {run['load']}. {run['what']}")
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
    return (f"the shared cores left the runs above {100 * shares[0]:.2g} % to {100 * shares[-1]:.2g} % of a core "
            f"(CPU time over wall time, per run).")


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
    from posembed._io import atomic_write_text
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


def export_rate(runs: list[str], out: Path = RESULTS, avx2: str = "") -> Path:
    """RoPE's passkey accuracy at L (mean over depths) of each run ``STORE:CONFIG_ID`` (one per seed) as
    ``passkey-rate.json``, with the criterion the report counts by, the documents behind each value and
    each model's final training loss; ``avx2``: the same command run with torch's AVX2 kernels."""
    from posembed._io import atomic_write_text
    from posembed.lab.context.store import NO_DEPTH, ContextStore, train_id_of
    from posembed.lab.report.context_verdicts import RETRIEVES

    def read(run: str) -> tuple[int, float, float, tuple[int, int]]:
        store, _, config_id = run.rpartition(":")
        context = ContextStore(store)
        _, body = context.configs()[config_id]
        found = [r["value"] for r in context.rows(config_id) if (r["model"], r["method"], r["length"], r["metric"],
                 r["depth"]) == ("rope", "extrapolate", body["context"], "passkey_mean", NO_DEPTH)]
        if len(found) != 1:
            raise ValueError(f"{run}: no passkey accuracy of rope at L = {body['context']}")
        loss = context.models(train_id_of(body)).get("rope", {}).get("final_loss")
        return body["seed"], found[0], loss, (body["depths"], body["passkey_samples"])

    measured = [read(run) for run in runs]
    sizes = {size for *_, size in measured}
    if len(sizes) != 1:
        raise ValueError(f"the runs measured passkey accuracy on different grids: {sorted(sizes)}")
    (depths, samples), = sizes
    body = {"criterion": RETRIEVES, "depths": depths, "samples": samples, "runs": runs,
            "accuracy_at_L": {str(seed): value for seed, value, _, _ in measured},
            "final_loss": {str(seed): loss for seed, _, loss, _ in measured}}
    if avx2:
        seed, value, loss, _ = read(avx2)
        body["avx2"] = {"run": avx2, "seed": seed, "accuracy_at_L": value, "final_loss": loss}
    out.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out / "passkey-rate.json", json.dumps(body, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from tools.pages import check_blocks, write_blocks

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    exported = sub.add_parser("export")
    exported.add_argument("runs", nargs="+", metavar="STORE:CONFIG_ID")
    rate = sub.add_parser("rate")
    rate.add_argument("runs", nargs="+", metavar="STORE:CONFIG_ID")
    rate.add_argument("--avx2", default="", metavar="STORE:CONFIG_ID", help="the same run on torch's AVX2 kernels")
    sub.add_parser("write")
    sub.add_parser("check")
    args = parser.parse_args(argv)
    if args.command == "export":
        print(export(args.runs))
        return 0
    if args.command == "rate":
        print(export_rate(args.runs, avx2=args.avx2))
        return 0
    if args.command == "write":
        write_blocks(PAGE, blocks())
        return 0
    problems = check_blocks(PAGE.read_text(encoding="utf-8"), blocks())
    print("\n".join(problems) or "every block holds what its generator writes")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
