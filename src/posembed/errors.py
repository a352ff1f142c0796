"""Every exception class of the package (helper tier: imports nothing from posembed).

:class:`CheckpointError` is the one error every checkpoint loader raises for a file that is
there but cannot be used: empty, truncated or garbage weights, a pickle refused as unsafe,
a ``config.json`` that is not an object, sizes that disagree with the weights, a shard path
leading out of the folder. It is a ``ValueError``, so callers that already catch
``ValueError`` keep working; ``path`` and ``problem`` are kept for callers that want them.

Example:
    >>> error = CheckpointError("ckpt/config.json", "holds a JSON list, not an object")
    >>> print(error)
    'ckpt/config.json' holds a JSON list, not an object
    >>> isinstance(error, ValueError), error.problem
    (True, 'holds a JSON list, not an object')
"""

from __future__ import annotations

import os

__all__ = [
    "CheckpointError",
    "DeviceError",
    "TextTooLongError",
    "ExtensionError",
    "UnsupportedCheckpoint",
    "AlreadyExtended",
    "OutDirError",
    "OutDirBusyError",
    "WorkerError",
    "StoreError",
    "ForeignStoreError",
    "UserError",
]


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and what is wrong.

    Args:
        path: the file (or folder) at fault.
        problem: what is wrong with it, a phrase that follows the quoted path ("is empty",
            "says model.depth=4 but ..."), no trailing period.
    """

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path!r} {problem}")

    def __reduce__(self):  # keep it picklable (multiprocessing) despite the two-argument constructor
        return type(self), (self.path, self.problem)


class DeviceError(ValueError):
    """A device request that this machine cannot serve (unknown name, no CUDA, no such GPU)."""


class TextTooLongError(ValueError):
    """A row longer than ``max_length`` without ``truncation``: which one, its tokens and the limit."""

    def __init__(self, index: int, tokens: int, limit: int, layout: str) -> None:
        self.index, self.tokens, self.limit, self.layout = index, tokens, limit, layout
        super().__init__(
            f"text {index} encodes to {tokens} tokens ({layout}), but the position table holds "
            f"max_length={limit} positions; shorten the text, or use a position scheme without a length limit"
        )


class ExtensionError(ValueError):
    """A checkpoint folder or request that ``extend`` refuses (the message says why)."""


class UnsupportedCheckpoint(ExtensionError):
    """The folder is not a BERT-family checkpoint with a learned absolute position table."""


class AlreadyExtended(ExtensionError):
    """The folder's config records an earlier posembed extension (pass ``force=True``)."""


class OutDirError(ValueError):
    """The out folder cannot be used or written (busy, read-only, full); the message names the path."""


class OutDirBusyError(OutDirError):
    """Another live process holds the out folder's lock."""


class WorkerError(RuntimeError):
    """A worker process died (killed, out of memory) before it sent its trial back."""


class StoreError(ValueError):
    """The store file cannot be used: empty, a folder, damaged, read-only, or its disk is full."""


class ForeignStoreError(ValueError):
    """The out dir's store belongs to another experiment, or its database to another program."""


class UserError(Exception):
    """An error the user can fix; the CLI prints its message without a traceback."""
