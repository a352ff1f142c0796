"""The study's text: tinyshakespeare (or any text file) encoded with the passkey vocabulary (its
characters plus the ten digits, :func:`~posembed.lab.tasks.passkey.passkey_vocabulary`), split
90/10 as the ``charlm`` task splits it.

Example:
    >>> data = ContextData.load("tinyshakespeare")
    >>> data.vocab_size, "7" in data.stoi, data.decode(data.val[:5].tolist())
    (74, True, '?\\n\\nGR')
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from posembed.lab.data import load_text, resolve_text_path
from posembed.lab.tasks.passkey import passkey_vocabulary

__all__ = ["ContextData"]


@dataclass(frozen=True)
class ContextData:
    """Vocabulary (``chars``, ``stoi``) and the encoded train / validation splits."""

    chars: tuple[str, ...]
    train: Tensor
    val: Tensor

    @classmethod
    def load(cls, text: str = "tinyshakespeare") -> ContextData:
        """The corpus behind ``text`` (a path or ``"tinyshakespeare"``), its encoding cached per text."""
        return _encoded(load_text(resolve_text_path(text), min_chars=1000))

    @property
    def stoi(self) -> dict[str, int]:
        return {ch: i for i, ch in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)


@functools.lru_cache(maxsize=2)
def _encoded(text: str) -> ContextData:
    chars = tuple(passkey_vocabulary(sorted(set(text))))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    split = int(0.9 * len(data))
    return ContextData(chars=chars, train=data[:split], val=data[split:])
