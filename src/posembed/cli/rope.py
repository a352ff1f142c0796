"""``posembed rope check``: a config's RoPE, pair by pair.

``posembed rope check CONFIG_OR_DIR [--part text|vision] [--length N] [--json] [--plot PNG]``

Thin over :func:`posembed.interop.rope_check.check.check_rope_config`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posembed.cli import UserError

__all__ = ["register", "run"]

HELP = "check a transformers config's RoPE: wavelengths, scaling, switch points, traps"
EPILOG = """\
example:
  posembed rope check path/to/llama-3.1-8b --length 131072 --plot rope.png
  posembed rope check config.json --json | jq '.traps[] | select(.severity != "note")'
  posembed rope check path/to/qwen2-vl-7b --part vision

Reads rope_parameters (transformers 5.x) or rope_scaling + rope_theta (4.x). Compares posembed's
inv_freq and attention factor with transformers' rope init functions when transformers is installed.
A multimodal config (one with text_config) is read for its language model, or with --part vision its vision tower.
Each layer type opens with its lengths side by side: configured (max_position_embeddings), trained,
what the scaling does; an effective context only where the config's numbers agree on one.
Exit status: 0 clean, 1 a warning, an error or a difference from transformers, 2 bad input.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("rope", help=HELP, description=HELP + ".")
    actions = parser.add_subparsers(dest="rope_command", metavar="ACTION")
    check = actions.add_parser(
        "check", help=HELP, description=HELP + ".", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    check.add_argument("config", type=Path, metavar="CONFIG_OR_DIR", help="a checkpoint folder or its config.json")
    check.add_argument(
        "--part",
        choices=("text", "vision"),
        default="text",
        help="the part of a multimodal config: its language model (default) or its vision tower",
    )
    check.add_argument("--length", type=int, default=None, metavar="N",
                       help="target context (default: the effective context where the config states one, else the "
                            "length its scaling reaches, else max_position_embeddings)")  # fmt: skip
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument(
        "--plot", type=Path, default=None, metavar="PNG", help="write a wavelength plot (needs matplotlib)"
    )
    check.add_argument("--no-compare", action="store_true", help="do not compare with transformers")
    parser.set_defaults(func=run, rope_parser=parser)


def run(args: argparse.Namespace) -> int:
    if args.rope_command != "check":
        args.rope_parser.print_help()
        return 2
    from posembed.interop.rope_check.check import check_rope_config, format_report, report_json

    if args.length is not None and args.length < 2:
        raise UserError(f"--length must be at least 2, got {args.length}")
    from posembed._utils.progress import quiet_transformers

    with quiet_transformers(enabled=not args.verbose):  # its own config warnings would drown the report
        report = check_rope_config(args.config, args.length, compare=not args.no_compare, part=args.part)
    if args.plot is not None:
        from posembed.interop.rope_check.check_plot import plot_wavelengths

        plot_wavelengths(report, args.plot)
    if args.json:
        print(json.dumps(report_json(report), indent=2))
    else:
        print(format_report(report))
        if args.plot is not None:
            print(f"plot: {args.plot}")
    return 0 if report.ok else 1
