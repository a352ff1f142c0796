"""Text corpora for the character-level language model: load, check, encode, split.

A user's text file fails early with one clear message when it is missing, not UTF-8, empty
or too short for the training context.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import Tensor

from posembed._utils.data import tinyshakespeare_path

__all__ = ["CharCorpus", "check_text_file", "load_text", "resolve_text_path", "DEFAULT_TEXT"]

#: name that stands for the tinyshakespeare file shipped in the package (``posembed/data``)
DEFAULT_TEXT = "tinyshakespeare"


def resolve_text_path(text: str) -> Path:
    """The file behind a config's ``text``: a path, or ``"tinyshakespeare"``, which is
    ``$POSEMBED_TINYSHAKESPEARE`` when set, else the copy shipped in the package."""
    if text != DEFAULT_TEXT:
        return Path(text).expanduser()
    return tinyshakespeare_path("give a text file with --set text=PATH")


def check_text_file(path: str | os.PathLike) -> Path:
    """``path`` if it is a file; a clear error for a folder or a missing file."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"text {str(path)!r} is a folder, not a text file; give a file with --set text=PATH")
    if not path.is_file():
        raise FileNotFoundError(f"text file {str(path)!r} does not exist")
    return path


def load_text(path: str | os.PathLike, *, min_chars: int) -> str:
    """Read a UTF-8 text file of at least ``min_chars`` characters (clear errors otherwise)."""
    path = check_text_file(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"text file {str(path)!r} is not UTF-8 (byte {error.start}: {error.reason})") from None
    if not text:
        raise ValueError(f"text file {str(path)!r} is empty")
    if len(text) < min_chars:
        raise ValueError(
            f"text file {str(path)!r} has {len(text)} characters, shorter than the {min_chars} "
            f"needed for this context (training context + 1 in both the 90% and the 10% split)"
        )
    return text


class CharCorpus:
    """Character vocabulary of a text and its 90/10 train/validation split (nanoGPT's split).

    >>> corpus = CharCorpus("abcabcabcd")
    >>> corpus.vocab_size, corpus.train.tolist(), corpus.val.tolist()
    (4, [0, 1, 2, 0, 1, 2, 0, 1, 2], [3])
    """

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        data = torch.tensor([self.stoi[ch] for ch in text], dtype=torch.long)
        split = int(0.9 * len(data))
        self.train: Tensor = data[:split]
        self.val: Tensor = data[split:]

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)
