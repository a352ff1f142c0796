"""docs/results.md's context-study blocks, written from the stored results under ``results/context/``.

``results/context/study.json`` holds the per-seed rows of the study the page reports (one object per
stored value: seed, model, method, length, metric, depth, value) and the study's config;
``results/context/passkey-rate.json`` the RoPE model's passkey accuracy at L per seed (the rate) on
torch's AVX-512 kernels and, under ``avx2``, on its AVX2 kernels, each with its command, commit,
machine and capability;
``meta.json`` the command, commit, threads, device, load and date of each run behind them.

Usage (from the repository root)::

    python tools/context_page.py export STORE:CONFIG_ID...   # runs of context.sqlite stores -> study.json
    python tools/context_page.py rate STORE:CONFIG_ID... --about command=... --about commit=... \\
        --about machine=... --about capability=AVX512 [--avx2 STORE:CONFIG_ID... --avx2-about ...]
                                                              # RoPE's passkey accuracy at L per seed -> passkey-rate.json
    python tools/context_page.py write                        # rewrite the page's blocks
    python tools/context_page.py check                        # exit 1 when a block differs

The blocks (``<!-- generated:NAME -->``): ``context-run``, ``context-passkey-rate``,
``context-verdicts``, ``context-perplexity``, ``context-passkey``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "context"
PAGE = ROOT / "docs" / "results.md"

__all__ = ["ABOUT", "blocks", "clopper_pearson", "load_study", "rate_text", "retrieves", "export", "export_rate", "main"]


def _read(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def load_study(results: Path = RESULTS):
    """The stored study as the report reads it (:class:`posembed.lab.report.context.Results`)."""
    from posembed.lab.report.context import Results

    stored = json.loads((results / "study.json").read_text(encoding="utf-8"))
    return Results(stored["rows"], stored["config"])


#: what each kernel set of ``passkey-rate.json`` must name: the command behind its values, the commit
#: it ran at, the machine, and the capability torch reported (``torch.backends.cpu.get_cpu_capability()``)
ABOUT = ("command", "commit", "machine", "capability")
#: kernel sets in the order the page states them: the stored rate's own (top level), then ``avx2``
KERNELS = ("avx512", "avx2")


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95 % interval of a rate of ``k`` of ``n``."""
    from scipy.stats import beta

    if not 0 <= k <= n or n < 1:
        raise ValueError(f"a rate needs 0 <= k <= n and n >= 1, got k={k}, n={n}")
    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def _kernel_sets(rate: dict) -> dict[str, dict]:
    """``{"avx512": top level, "avx2": rate["avx2"]}`` (the second when stored), each checked to name
    what made it (:data:`ABOUT`) and to hold one value per seed."""
    sets = {"avx512": rate, **({"avx2": rate["avx2"]} if "avx2" in rate else {})}
    for name, values in sets.items():
        missing = [key for key in ABOUT if not values.get(key)]
        if missing:
            raise ValueError(f"passkey rate ({name}): missing {', '.join(missing)}; each kernel set names "
                             f"{', '.join(ABOUT)}")
        if not values.get("accuracy_at_L"):
            raise ValueError(f"passkey rate ({name}): no per-seed accuracy_at_L")
    return sets


def retrieves(rate: dict) -> dict[str, dict[str, bool]]:
    """Kernel set -> seed -> whether RoPE retrieves the passkey at L there (accuracy >= the criterion)."""
    return {name: {seed: value >= rate["criterion"] for seed, value in values["accuracy_at_L"].items()}
            for name, values in _kernel_sets(rate).items()}


def _seeds(values) -> list[str]:
    return sorted(values, key=int)


def rate_text(rate: dict) -> str:
    """``k of n seeds`` reaching the criterion on each kernel set, counted here from the per-seed values,
    each with its command and an exact (Clopper-Pearson) 95 % interval; then whether the verdict per seed
    is the same on both."""
    criterion, sets, verdicts = rate["criterion"], _kernel_sets(rate), retrieves(rate)
    label = {"avx512": "AVX-512", "avx2": "AVX2"}
    parts = []
    for name, values in sets.items():
        k, n = sum(verdicts[name].values()), len(verdicts[name])
        low, high = clopper_pearson(k, n)
        parts.append(f"on {k} of {n} seeds with torch's {label[name]} kernels (capability "
                     f"{values['capability']}; exact 95 % Clopper-Pearson interval of the rate: {low:.2f} to "
                     f"{high:.2f}; `{values['command']}` at commit {values['commit'][:7]}, {values['machine']})")
    text = (f"**RoPE learns passkey retrieval at L** {'; '.join(parts)}. A seed counts when its accuracy at L, "
            f"the mean over {rate['depths']} depths x {rate['samples']} documents, is >= {criterion:g}.")
    if "avx2" not in sets:
        per_seed = ", ".join(f"seed {s}: {rate['accuracy_at_L'][s]:.4g}" for s in _seeds(rate["accuracy_at_L"]))
        return text + f" Per seed: {per_seed}."
    wide, narrow = sets["avx512"], sets["avx2"]
    both = [s for s in _seeds(wide["accuracy_at_L"]) if s in narrow["accuracy_at_L"]]
    if len(both) < len(wide["accuracy_at_L"]):
        text += (f" On the {len(both)} seeds run on both kernel sets the AVX-512 rate is "
                 f"{sum(verdicts['avx512'][s] for s in both)} of {len(both)}.")
    per_seed = ", ".join(f"seed {s}: {wide['accuracy_at_L'][s]:.4g} / {narrow['accuracy_at_L'][s]:.4g}" for s in both)
    flipped = [s for s in both if verdicts["avx512"][s] != verdicts["avx2"][s]]
    if flipped:
        which = "; ".join(f"seed {s} {'retrieves' if verdicts['avx512'][s] else 'does not'} on AVX-512 "
                          f"(accuracy {wide['accuracy_at_L'][s]:.4g}, final loss {wide['final_loss'][s]:.5f}) and "
                          f"{'does' if verdicts['avx2'][s] else 'does not'} on AVX2 (accuracy "
                          f"{narrow['accuracy_at_L'][s]:.4g}, final loss {narrow['final_loss'][s]:.5f})"
                          for s in flipped)
        verdict = (f"**The verdict is not the same on both kernel sets**: on {len(flipped)} of the {len(both)} "
                   f"seeds run on both it differs ({which}); the same code, seed and thread count train a different "
                   f"model on each.")
    else:
        verdict = f"The verdict is the same on both kernel sets on each of the {len(both)} seeds run on both."
    text = f"{text} {verdict} Per seed (accuracy at L, AVX-512 / AVX2): {per_seed}."
    for run in narrow.get("earlier", []):
        seed, same = str(run["seed"]), (run["accuracy_at_L"] >= criterion) == verdicts["avx2"].get(str(run["seed"]))
        text += (f" An earlier AVX2 run of seed {seed} ({run['date']}, same command and commit) gave accuracy "
                 f"{run['accuracy_at_L']:.4g} and final loss {run['final_loss']:.5f}: "
                 f"{'the same verdict' if same else 'another verdict'}, not the same numbers.")
    return text


def _run_text(meta: dict) -> str:
    lines = []
    for run in meta["runs"]:
        lines.append(f"- `{run['command']}` at commit {run['commit'][:7]}, {run['threads']} thread, {run['device']}, "
                     f"{run['date']}: {run['wall']} wall, {run['cpu']} CPU, load {run['load']}. {run['what']}")
    return "\n".join(lines)


def blocks() -> dict[str, str]:
    """Block name -> its body (each starting and ending with a newline)."""
    from posembed.lab.report.context import metric_table, verdict_table

    study = load_study()
    bodies = {
        "context-run": _run_text(_read("meta.json")),
        "context-passkey-rate": rate_text(_read("passkey-rate.json")),
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


def export_rate(runs: list[str], out: Path = RESULTS, *, about: dict[str, str],
                avx2: list[str] = (), avx2_about: dict[str, str] | None = None) -> Path:
    """RoPE's passkey accuracy at L (mean over depths) of each run ``STORE:CONFIG_ID`` (one per seed) as
    ``passkey-rate.json``, with the criterion the report counts by, the documents behind each value,
    each model's final training loss and ``about`` (:data:`ABOUT`: the command, commit, machine and
    torch's CPU capability behind the runs); ``avx2``: the same command's runs on torch's AVX2 kernels,
    stored under ``"avx2"`` with ``avx2_about``."""
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

    def kernel_set(runs: list[str], facts: dict[str, str] | None, name: str) -> tuple[dict, set]:
        missing = [key for key in ABOUT if not (facts or {}).get(key)]
        if missing:
            raise ValueError(f"the {name} runs need {', '.join(missing)} (each kernel set names {', '.join(ABOUT)})")
        measured = [read(run) for run in runs]
        seeds = [seed for seed, *_ in measured]
        if len(set(seeds)) < len(seeds):
            raise ValueError(f"the {name} runs repeat a seed: {sorted(seeds)}")
        return ({**facts, "runs": list(runs), "accuracy_at_L": {str(seed): value for seed, value, _, _ in measured},
                 "final_loss": {str(seed): loss for seed, _, loss, _ in measured}},
                {size for *_, size in measured})

    body, sizes = kernel_set(runs, about, "AVX-512")
    if avx2:
        body["avx2"], more = kernel_set(avx2, avx2_about, "AVX2")
        sizes |= more
    if len(sizes) != 1:
        raise ValueError(f"the runs measured passkey accuracy on different grids: {sorted(sizes)}")
    (depths, samples), = sizes
    body.update(criterion=RETRIEVES, depths=depths, samples=samples)
    out.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out / "passkey-rate.json", json.dumps(body, indent=1, sort_keys=True) + "\n")


def _about(pairs: list[str]) -> dict[str, str]:
    about = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or key not in ABOUT:
            raise SystemExit(f"--about/--avx2-about takes KEY=VALUE with KEY one of {', '.join(ABOUT)}, got {pair!r}")
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
    rate.add_argument("--about", action="append", default=[], metavar="KEY=VALUE",
                      help=f"what made the runs, each of {', '.join(ABOUT)}")
    rate.add_argument("--avx2", nargs="*", default=[], metavar="STORE:CONFIG_ID",
                      help="the same command's runs on torch's AVX2 kernels")
    rate.add_argument("--avx2-about", action="append", default=[], metavar="KEY=VALUE",
                      help="what made the AVX2 runs, as --about")
    sub.add_parser("write")
    sub.add_parser("check")
    args = parser.parse_args(argv)
    if args.command == "export":
        print(export(args.runs))
        return 0
    if args.command == "rate":
        print(export_rate(args.runs, about=_about(args.about), avx2=args.avx2, avx2_about=_about(args.avx2_about)))
        return 0
    if args.command == "write":
        write_blocks(PAGE, blocks())
        return 0
    problems = check_blocks(PAGE.read_text(encoding="utf-8"), blocks())
    print("\n".join(problems) or "every block holds what its generator writes")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
