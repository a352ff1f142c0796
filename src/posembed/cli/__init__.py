"""The ``posembed`` command: a thin layer over importable functions.

Each subcommand lives in its own module here with ``register(subparsers)``, which adds its
parser and sets ``func(args) -> int``, and its name in ``command.COMMANDS``. Errors a user can fix
(bad values, missing files, missing optional packages) end in one clear line on stderr and exit
code 2, no traceback.

Files (one module per subcommand, and the two they share):

=================== ============================================================================
file                what
=================== ============================================================================
``encode``          ``posembed encode``: the embedding block, token by token
``check_positions`` ``posembed check-positions``: padding, batching, packing
``models``          ``posembed models``: the bundled default model and where it is
``schemes``         ``posembed schemes``: every scheme, its kind, limits and arguments
``rope``            ``posembed rope check``: a config's RoPE, pair by pair
``inspect``         ``posembed inspect``: a model's positional embeddings
``extend``          ``posembed extend`` and ``extend-eval``: more positions for a checkpoint
``lab``             ``posembed lab``: run, report and list a sweep
``lab_context``     ``posembed lab context`` and ``lab extend``: the context-extension study
``bench``           ``posembed bench``: the benchmark suites
``command``         ``posembed`` itself: ``main``, the parser, ``COMMANDS``, how errors end
``shared``          ``UserError``, the bundled default model, ``--device`` / ``--quiet``
``__main__``        ``python -m posembed.cli``, the same as ``posembed``
=================== ============================================================================
"""

from posembed._utils.names import submodules
from posembed.cli.command import build_parser, main
from posembed.cli.shared import DEFAULT_MODEL, DEFAULT_MODEL_HELP, add_run_options, model_folder
from posembed.errors import UserError

__all__ = [
    "main",
    "build_parser",
    "UserError",
    "model_folder",
    "add_run_options",
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_HELP",
]

__getattr__ = submodules(__name__)  # posembed.cli.<file>: imported on first use
