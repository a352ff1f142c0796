"""``posembed check-positions [MODEL] [--text T ...] [--tolerance X] [--json]``: padding, batching, packing.

Thin over :func:`posembed.interop.extend.position_check.check_positions`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posembed.cli import DEFAULT_MODEL_HELP, UserError, model_folder

__all__ = ["register", "run"]

HELP = "run a transformers model unpadded, padded, batched and packed; compare the hidden states"
EPILOG = """\
example:
  posembed check-positions                      (the bundled all-MiniLM-L6-v2)
  posembed check-positions path/to/tiny-llama --json

Each setting's largest difference of the real tokens' hidden states from the unpadded run, pass /
fail within --tolerance, and the position-id recipe the model needs under left padding (RoBERTa
numbers from padding_idx + 1; others need position_ids = cumsum(mask) - 1). Causal models also run
packed documents, with and without per-document positions and a block-diagonal mask. A folder
without a tokenizer is run on generated token ids (the report says so).
Exit status: 0 every recommended setting passes, 1 one fails, 2 bad input.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check-positions", help=HELP, description=HELP + ".", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument(
        "model",
        type=Path,
        nargs="?",
        default=None,
        metavar="MODEL",
        help=f"a transformers checkpoint folder ({DEFAULT_MODEL_HELP})",
    )
    parser.add_argument("--text", dest="texts", action="append", default=None, metavar="T",
                        help="a text to run (repeat; needs a tokenizer in the folder)")  # fmt: skip
    parser.add_argument(
        "--tolerance", type=float, default=1e-4, help="largest difference that passes (default 1e-4, fp32)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from posembed.interop.extend.position_check import check_positions, format_position_report, report_json

    if not args.tolerance > 0:
        raise UserError(f"--tolerance must be positive, got {args.tolerance}")
    from posembed._utils.progress import quiet_transformers

    with quiet_transformers(enabled=not args.verbose):  # transformers' own warnings would drown the report
        report = check_positions(model_folder(args.model, "MODEL"), args.texts, tolerance=args.tolerance)
    print(json.dumps(report_json(report), indent=2) if args.json else format_position_report(report))
    return 0 if report.ok else 1
