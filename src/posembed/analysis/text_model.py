"""Real text through a real model: the probe text, windows of token ids, and each layer's hidden states.

The default probe text is English prose the project wrote itself (``posembed/data/positions_essay.txt``);
``--text FILE`` replaces it. A :class:`TextModel` tokenises text with the checkpoint's own tokenizer and
returns ``[h_0, ..., h_L]`` (embedding output, then every layer), each ``(B, T, C)`` on the CPU; the
model itself runs on the text model's ``device`` (:func:`device_copy`).

Example:
    >>> text = load_probe_text(None)
    >>> len(text.split()) > 2000
    True
    >>> windows = make_windows(list(range(10)), length=4, prefix=[100], suffix=[101])
    >>> windows.tolist()
    [[100, 0, 1, 101], [100, 2, 3, 101], [100, 4, 5, 101], [100, 6, 7, 101], [100, 8, 9, 101]]
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path
from typing import Protocol

import torch

from posembed._utils.progress import quiet_transformers

__all__ = [
    "DEFAULT_TEXT", "load_probe_text", "make_windows", "device_copy", "TextModel", "HFTextModel", "LabTextModel",
]  # fmt: skip

logger = logging.getLogger(__name__)

DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "data" / "positions_essay.txt"
MIN_CHARS = 200
#: files any of which marks a folder as holding its own tokenizer (we never reach for a hub)
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "tokenizer.model",
)


def device_copy(module: torch.nn.Module, device: torch.device | None) -> torch.nn.Module:
    """``module`` itself for the CPU (or ``None``); elsewhere a copy on ``device``, so the original
    stays on the CPU, where the report's other sections read it.

    >>> layer = torch.nn.Linear(2, 2)
    >>> device_copy(layer, torch.device("cpu")) is layer, device_copy(layer, torch.device("meta")).weight.device.type
    (True, 'meta')
    """
    if device is None or torch.device(device).type == "cpu":
        return module
    return copy.deepcopy(module).to(device)


def load_probe_text(path: str | os.PathLike | None) -> str:
    """Read the probe text (default: the shipped essay); clear errors for missing, unreadable or non-UTF-8 files."""
    path = DEFAULT_TEXT if path is None else Path(path)
    if not path.exists():
        raise FileNotFoundError(f"text file {str(path)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"text file {str(path)!r} is a directory, not a text file")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"text file {str(path)!r} cannot be read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"text file {str(path)!r} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})"
        ) from None
    if len(text.strip()) < MIN_CHARS:
        raise ValueError(
            f"text file {str(path)!r} has {len(text.strip())} characters; the probe needs at least {MIN_CHARS}"
        )
    return text


def make_windows(
    ids: list[int], length: int, prefix: list[int] = (), suffix: list[int] = (), limit: int | None = None
) -> torch.Tensor:
    """Cut token ids into consecutive windows of ``length`` (special tokens included), at most ``limit``.

    Shape:
        returns ``(B, length)`` int64.
    """
    body = length - len(prefix) - len(suffix)
    if body < 2:
        raise ValueError(f"window length {length} leaves {body} text tokens after the special tokens; need >= 2")
    count = len(ids) // body
    if limit is not None:
        count = min(count, limit)
    if count < 2:
        raise ValueError(f"the text gives {len(ids)} tokens, fewer than 2 windows of {body}; give a longer --text")
    rows = [list(prefix) + ids[i * body : (i + 1) * body] + list(suffix) for i in range(count)]
    return torch.tensor(rows, dtype=torch.long)


class TextModel(Protocol):
    """Tokenise text and run the model; ``prefix``/``suffix`` are the special ids around each window."""

    prefix: list[int]
    suffix: list[int]
    max_length: int

    def encode(self, text: str) -> list[int]: ...

    def hidden_states(self, input_ids: torch.Tensor) -> list[torch.Tensor]: ...


class HFTextModel:
    """A Hugging Face checkpoint's tokenizer and ``AutoModel`` (loaded on first use)."""

    def __init__(self, folder: Path, tokenizer, max_length: int, device: torch.device | None = None) -> None:
        self.folder = folder
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.device = torch.device("cpu" if device is None else device)
        self.prefix = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
        self.suffix = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
        self._model = None

    @classmethod
    def open(cls, folder: Path, notes: list[str], device: torch.device | None = None) -> HFTextModel | None:
        """The folder's tokenizer, or None (with a note) when it has none; the model will run on ``device``."""
        from transformers import AutoConfig, AutoTokenizer

        if not any((folder / name).exists() for name in _TOKENIZER_FILES):
            notes.append(
                "no tokenizer files in the folder (" + ", ".join(_TOKENIZER_FILES[:3]) + ", ...); section 5 is skipped."
            )
            return None
        try:
            with quiet_transformers():
                tokenizer = AutoTokenizer.from_pretrained(str(folder))
        except (OSError, ValueError, TypeError) as error:
            notes.append(f"no usable tokenizer in the folder ({type(error).__name__}); section 5 is skipped.")
            return None
        with quiet_transformers():
            config = AutoConfig.from_pretrained(str(folder))
        limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or 512
        return cls(folder, tokenizer, int(limit), device)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def model(self):
        if self._model is None:
            from transformers import AutoModel

            logger.info("loading %s with transformers (on %s)", self.folder, self.device)
            with quiet_transformers():  # no "Loading weights" bar beside the sections' progress
                self._model = AutoModel.from_pretrained(str(self.folder)).eval().to(self.device)
        return self._model

    @torch.no_grad()
    def hidden_states(self, input_ids: torch.Tensor) -> list[torch.Tensor]:
        input_ids = input_ids.to(self.device)
        output = self.model()(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), output_hidden_states=True)
        return [h.float().cpu() for h in output.hidden_states]


def _charlm_chars(meta: dict, vocab_size: int) -> list[str] | None:
    """The character vocabulary of a lab char-LM run, rebuilt from its training text when it is still there."""
    config = meta.get("config") or {}
    if meta.get("task") != "charlm" or not config.get("text"):
        return None
    try:
        from posembed.lab.data import resolve_text_path

        chars = sorted(set(resolve_text_path(config["text"]).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        return None
    return chars if len(chars) == vocab_size else None


class LabTextModel:
    """A lab model with its character vocabulary (``meta['chars']``) or, failing that, UTF-8 bytes."""

    def __init__(
        self, model, chars: list[str] | None, vocab_size: int, max_length: int, device: torch.device | None = None
    ) -> None:
        self.model = model  # on the CPU: the report reads its scheme and weights
        self.chars = chars
        self.vocab_size = vocab_size
        self.max_length = max_length
        self.device = torch.device("cpu" if device is None else device)
        self.prefix: list[int] = []
        self.suffix: list[int] = []
        self._runner = None

    @classmethod
    def open(
        cls, model, meta: dict, notes: list[str], max_length: int, device: torch.device | None = None
    ) -> LabTextModel:
        """The model with its vocabulary; windows stay within ``max_length`` (the positions the caller analyses);
        the model runs on ``device`` (a copy there, :func:`device_copy`)."""
        vocab_size = int(model.embeddings.vocab_size)
        chars = meta.get("chars") or meta.get("vocab") or _charlm_chars(meta, vocab_size)
        if isinstance(chars, str):
            chars = list(chars)
        if not chars:
            notes.append(
                "the lab checkpoint stores no character vocabulary: "
                "token ids are the text's UTF-8 bytes modulo the vocabulary size."
            )
        return cls(model, chars, vocab_size, int(max_length), device)

    def encode(self, text: str) -> list[int]:
        if self.chars:
            index = {ch: i for i, ch in enumerate(self.chars)}
            return [index[ch] for ch in text if ch in index]
        return [byte % self.vocab_size for byte in text.encode("utf-8")]

    @torch.no_grad()
    def hidden_states(self, input_ids: torch.Tensor) -> list[torch.Tensor]:
        if self._runner is None:
            self._runner = device_copy(self.model, self.device)
        return [h.float().cpu() for h in self._runner.hidden_states(input_ids.to(self.device))]
