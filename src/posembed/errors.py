"""The library's error types (helper tier: imports nothing from posembed).

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

__all__ = ["CheckpointError"]


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
