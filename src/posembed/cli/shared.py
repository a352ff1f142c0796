"""What the subcommand modules share: :class:`UserError` (one line on stderr, exit 2), the bundled default
model (:data:`DEFAULT_MODEL`, :func:`model_folder`) and the ``--device`` / ``--quiet`` options of a command that
runs on a device (:func:`add_run_options`). No torch at import (``posembed --version`` stays light)."""

from __future__ import annotations

import argparse

from posembed.errors import UserError

__all__ = ["UserError", "model_folder", "add_run_options", "DEFAULT_MODEL", "DEFAULT_MODEL_HELP"]

#: the bundled model every model-taking command falls back to (``posembed models`` says where it is)
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: how a model-taking command's help names its default
DEFAULT_MODEL_HELP = f"default: {DEFAULT_MODEL}, the bundled model; `posembed models` prints its folder"


def add_run_options(parser: argparse.ArgumentParser, device_help: str, finished: str) -> None:
    """``--device`` (default ``auto``) and ``-q/--quiet`` for a command that runs on a device and
    reports progress (a bar on a terminal, else one line per ``finished`` unit on stderr)."""
    parser.add_argument("--device", default="auto", help=device_help)
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help=f"no progress (default: a bar on a terminal, else one line per finished {finished} on stderr)",
    )


def model_folder(model, argument: str):
    """``model`` as a ``Path``, or the bundled model's folder (:data:`DEFAULT_MODEL`) when it is ``None``."""
    from pathlib import Path

    from posembed._utils.hints import package_hint
    from posembed.encode.report import MODEL_PACKAGE, default_model_path

    if model is not None:
        return Path(model)
    try:
        return default_model_path()
    except ModuleNotFoundError as error:
        raise UserError(
            f"no {argument} given and the default model's package is not installed: {package_hint(MODEL_PACKAGE)}"
        ) from error
