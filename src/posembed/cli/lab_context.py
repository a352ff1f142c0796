"""``posembed lab context`` and ``posembed lab extend``: the context-extension study.

Thin over :func:`posembed.lab.context.run.run_study` (train at context L and fine-tune, then
evaluate every RoPE scaling method at 1x-8x L with perplexity and passkey retrieval beside the
length-robust references), then :func:`posembed.lab.report.context.write_pages` of the
:func:`~posembed.lab.report.context.context_page` of the
:class:`~posembed.lab.report.context_results.Results` in the store it ran into, and over
:func:`posembed.lab.context.extend.reevaluate_checkpoint` (re-evaluate one stored RoPE model with
another method, no retraining). Both take ``--device`` (auto: CUDA when present).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from posembed._utils.devices import DEVICE_HELP
from posembed._utils.times import quote
from posembed.cli import UserError

__all__ = ["register_actions", "run_context_command", "run_extend_command"]

#: what the study can decide (issue 33): its report's verdict words are tests with the seed as the unit
DECISIONS = """\
What it can decide (the report: seed-paired t on log perplexity or passkey accuracy, Holm over its six
primary comparisons at a family-wise 5 %, 'alike' only within 2 % of perplexity or 0.05 of accuracy;
everything else is exploratory, no winner):
  context        3 seeds, so each paired t has 2 degrees of freedom: in the stored study (results/context
                 in the repository) it decided YaRN over PI without fine-tuning (a 4x perplexity ratio)
                 and that PI and YaRN do not tie after fine-tuning, but could only have detected ratios of
                 about 2x to 4x elsewhere (ALiBi against RoPE: 27x). Add seeds (--set seeds=0,1,2,3,4)
                 to decide smaller differences. Passkey retrieval is counted as k of n seeds.
  context-smoke  1 seed: decides nothing (a pipeline test)."""


def register_actions(actions: argparse._SubParsersAction) -> None:
    """Add the ``context`` and ``extend`` actions to ``posembed lab``."""
    from posembed.lab.context.methods import METHODS  # the factory's method names

    context = actions.add_parser(
        "context",
        help="run (or resume) the context-extension study and write its report",
        description="Train a RoPE decoder and the length-robust references (ALiBi, NoPE, FIRE, KERPLE, Sandwich, "
        "CoPE) at context L, evaluate every RoPE scaling method and the references as they are at "
        "1x-8x L (perplexity, passkey retrieval), fine-tune, and write context.md / context.html.",
        epilog=DECISIONS + "\n\nexample: posembed lab context --preset context-smoke --out lab-context-smoke",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    context.add_argument(
        "--preset",
        default="context",
        help=f"context (seeds 0, 1 and 2: {quote('context')}) or context-smoke ({quote('context-smoke')})",
    )
    context.add_argument("--out", type=Path, default=None, help="output folder (default: lab-<preset>)")
    context.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a study setting, e.g. --set steps=200",
    )
    context.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    context.add_argument("--device", default="auto", help=DEVICE_HELP + " (on CUDA: bf16 autocast)")
    context.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress (default: a bar on a terminal, one line per finished step otherwise)",
    )
    extend = actions.add_parser(
        "extend",
        help="re-evaluate a RoPE lab checkpoint with a context-extension method (no retraining)",
        epilog="example: posembed lab extend lab-context/models/<id>/rope --method yarn --factor 4 --finetune 100",
    )
    extend.add_argument("checkpoint", type=Path, help="a lab checkpoint folder of a RoPE char-LM model")
    extend.add_argument("--method", required=True, choices=METHODS, help="the context-extension method")
    extend.add_argument("--factor", type=float, required=True, help="target length / training length (>= 1), e.g. 4")
    extend.add_argument("--finetune", type=int, default=0, metavar="STEPS", help="fine-tune steps at the target length")
    extend.add_argument("--save", type=Path, default=None, help="folder for the fine-tuned checkpoint")
    extend.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    extend.add_argument("--device", default="auto", help=DEVICE_HELP + " (on CUDA: bf16 autocast)")
    extend.add_argument("--json", action="store_true", help="print the rows as JSON")
    extend.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress (default: a bar on a terminal, one line per finished step otherwise)",
    )


def _threads(count: int) -> None:
    if count < 1:
        raise UserError(f"--threads must be >= 1, got {count}")
    import torch

    torch.set_num_threads(count)


def _device(spec: str):
    """The ``--device`` asked for, or one line (exit 2) saying why this machine cannot serve it."""
    from posembed._utils.devices import resolve_device
    from posembed.errors import DeviceError

    try:
        return resolve_device(spec)
    except DeviceError as error:
        raise UserError(f"--device: {error}") from None


def run_context_command(args: argparse.Namespace) -> int:
    from posembed._utils.progress import LAB_LOGGER, log_to_stderr
    from posembed.lab.context.run import run_study
    from posembed.lab.report.context import context_page, write_pages
    from posembed.lab.report.context_results import Results

    runs, out, device = _study(args)
    with log_to_stderr(LAB_LOGGER, enabled=not args.quiet):
        store = run_study(runs, out, device, progress=False if args.quiet else None)
    page = context_page(Results.of(store, [run.config_id for run in runs]))
    markdown, html = write_pages(page, out / "report")
    seeds = ", ".join(str(run.seed) for run in runs)
    print(
        f"{runs[0].name} on {device}, seed{'s' if len(runs) > 1 else ''} {seeds}: results in {store.path}; "
        f"report {markdown} and {html}"
    )
    return 0


def _study(args: argparse.Namespace) -> tuple[list, Path, object]:
    """What ``lab context`` was asked for, read from its arguments once: the study's runs (one config
    per seed, :meth:`~posembed.lab.context.presets.ContextConfig.per_seed`), its folder and the device."""
    from posembed.lab.context.presets import get_context_preset, with_overrides

    _threads(args.threads)
    device = _device(args.device)
    cfg = with_overrides(get_context_preset(args.preset), args.overrides)
    return cfg.per_seed(), args.out or Path(f"lab-{cfg.name}"), device


def run_extend_command(args: argparse.Namespace) -> int:
    import json

    from posembed.lab.context.extend import reevaluate_checkpoint

    _threads(args.threads)
    device = _device(args.device)
    if args.finetune < 0:
        raise UserError(f"--finetune must be >= 0, got {args.finetune}")
    from posembed._utils.progress import LAB_LOGGER, log_to_stderr

    with log_to_stderr(LAB_LOGGER, enabled=not args.quiet):
        rows = reevaluate_checkpoint(
            args.checkpoint,
            args.method,
            args.factor,
            finetune_steps=args.finetune,
            save_to=args.save,
            device=device,
            progress=False if args.quiet else None,
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        depth = "" if row.get("depth") is None else f" depth={row['depth']:g}"
        value = "n/a" if row.get("value") is None else f"{row['value']:.4g}"
        print(f"{row['method']} x{row['factor']:g} length={row['length']}{depth} {row['metric']}={value}")
    return 0
