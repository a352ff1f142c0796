"""The ``posembed`` command itself: :func:`main` (the console script), its parser (:func:`build_parser`, one
subparser per module named in :data:`COMMANDS`) and how it ends: errors a user can fix (bad values, missing files,
missing optional packages) in one clear line on stderr and exit code 2, no traceback."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from posembed.errors import UserError

__all__ = ["main", "build_parser", "COMMANDS", "package_version"]

#: subcommand modules, in the order ``posembed --help`` lists them
COMMANDS = ("encode", "schemes", "inspect", "lab", "bench", "extend", "rope", "check_positions", "models")


def package_version() -> str:
    """The installed distribution's version (from its metadata), or ``"unknown"`` outside one."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("posembed")
    except PackageNotFoundError:
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """argparse, with the closest choice suggested for a mistyped one (``posembed inspct``,
    ``--method interpolat``); subcommand parsers inherit it."""

    def _check_value(self, action: argparse.Action, value) -> None:
        if action.choices is not None and isinstance(value, str) and value not in action.choices:
            from posembed._utils.checks import did_you_mean

            hint = did_you_mean(value, [str(choice) for choice in action.choices])
            if hint:
                known = ", ".join(str(choice) for choice in action.choices)
                raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint}; choose from {known}")
        super()._check_value(action, value)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="posembed",
        description="Positional encodings for transformers: encode, inspect, compare.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")
    parser.add_argument("--version", action="version", version=f"posembed {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"posembed.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"posembed.cli.{name}":
                continue
            raise
        module.register(subparsers)
    return parser


def _asks_version(argv: list[str]) -> bool:
    """Whether ``--version`` comes among the options before the subcommand (answered without
    building the parser, whose subcommand modules import torch)."""
    for arg in argv:
        if arg == "--version":
            return True
        if arg in ("-h", "--help") or not arg.startswith("-"):
            return False
    return False


def main(argv: list[str] | None = None) -> int:
    if _asks_version(sys.argv[1:] if argv is None else argv):
        print(f"posembed {package_version()}")
        return 0
    # posembed reads local checkpoints only; never reach for a hub at run time
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UserError, ValueError, TypeError, FileNotFoundError, NotADirectoryError, UnicodeDecodeError) as error:
        print(f"posembed {args.command}: error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        from posembed._utils.hints import install_hint

        print(
            f"posembed {args.command}: error: the optional package {error.name!r} is needed here; "
            f"install it with: {install_hint(error.name)}",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:
        # the reader went away (``posembed schemes | head``): stop quietly
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"posembed {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
