"""``posembed encode "text A" ["text B"] [--model DIR] [--max-length N] [--json]``: the embedding block, token by token.

Thin over :func:`posembed.encode.report.explain_encoding`. Works on BERT-family checkpoints (an
embedding block of token, learned position and segment tables with a LayerNorm); other model
families are named and refused.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posembed.cli import DEFAULT_MODEL_HELP, UserError, model_folder

#: files one of which a Hugging Face tokenizer needs (transformers v5 silently builds an empty
#: tokenizer from config.json alone, so their absence is checked here)
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)

HELP = "show tokens, position and segment ids, and each embedding component's norm"
DESCRIPTION = (
    HELP + ". Works on BERT-family checkpoints (BERT, RoBERTa, DistilBERT, ELECTRA, MiniLM, ...): "
    "their embedding block of token, learned position and segment tables; decoder-only models "
    "(GPT-2, Llama, ...) are refused by name."
)
#: what encode supports, for its errors
SCOPE = "posembed encode works on BERT-family checkpoints (BERT, RoBERTa, DistilBERT, ELECTRA, MiniLM, ...)"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("encode", help=HELP, description=DESCRIPTION)
    parser.add_argument("text_a", help="the text (first segment)")
    parser.add_argument("text_b", nargs="?", default=None, help="optional second text of a sentence pair")
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help=f"Hugging Face BERT-family folder ({DEFAULT_MODEL_HELP})",
    )
    parser.add_argument(
        "--max-length",
        type=int,
        metavar="N",
        default=None,
        help="truncate to N tokens with [CLS]/[SEP] (a pair's longer text first, as tokenizers do); "
        "default: a text longer than the position table is an error",
    )
    parser.add_argument(
        "--device", default="auto", help="auto (CUDA when present, else CPU; the default), cpu, cuda or cuda:N"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from posembed.encode.report import explain_encoding, format_table, report_json

    for name, text in (("TEXT_A", args.text_a), ("TEXT_B", args.text_b)):
        _check_text(name, text)
    if args.max_length is not None and args.max_length < (3 if args.text_b is not None else 2):
        need = "3 ([CLS] A [SEP] B [SEP])" if args.text_b is not None else "2 ([CLS] A [SEP])"
        raise UserError(f"--max-length must be at least {need}, got {args.max_length}")
    folder = model_folder(args.model, "--model")
    emb, tokenizer = _load(folder)
    from posembed._utils.devices import resolve_device

    emb = emb.to(resolve_device(args.device))
    from posembed.errors import TextTooLongError

    try:
        rows = explain_encoding(emb, tokenizer, args.text_a, args.text_b, max_length=args.max_length)
    except TextTooLongError as error:
        what = "TEXT_A and TEXT_B encode" if args.text_b is not None else "TEXT_A encodes"
        raise UserError(
            f"{what} to {error.tokens} tokens ({error.layout}), more than the model's {error.limit} positions: "
            f"give --max-length {error.limit} to truncate, or make a model with more positions with `posembed extend`"
        ) from None
    if args.json:
        print(json.dumps(report_json(rows, model=str(folder), text_a=args.text_a, text_b=args.text_b), indent=2))
    else:
        print(f"model: {folder}")
        print(format_table(rows))
    return 0


def _check_text(name: str, text: str | None) -> None:
    """Arguments Python could not decode arrive with lone surrogates (``\udcff`` for byte 0xff): name them."""
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        char = text[error.start]
        if "\udc80" <= char <= "\udcff":
            raise UserError(
                f"{name} is not UTF-8 text (byte 0x{ord(char) - 0xDC00:02x} at character {error.start}); "
                f"give UTF-8 text"
            ) from None
        raise UserError(
            f"{name} holds a lone surrogate {char!r} at character {error.start}; give valid Unicode text"
        ) from None


def _load(folder: Path):
    from posembed.interop.hf import bert_family_problem, load_embeddings
    from posembed.interop.hf.checks import read_hf_config

    if (folder / "config.json").is_file():
        problem = bert_family_problem(read_hf_config(folder))
        if problem:
            raise UserError(f"{SCOPE}; {folder} {problem}")
    emb = load_embeddings(folder).eval()
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise UserError(f"cannot load a tokenizer from {folder}: none of {', '.join(TOKENIZER_FILES)} is there")
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as error:
        raise UserError(f"cannot load a tokenizer from {folder}: {error}") from error
    return emb, tokenizer
