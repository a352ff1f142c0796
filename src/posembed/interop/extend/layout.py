"""Where a BERT-family checkpoint keeps its position table: :func:`read_layout`.

The weights are found and read by :mod:`posembed.interop.hf.checks` (one rule for every reader:
:data:`~posembed.interop.hf.checks.WEIGHT_FILES` in that order, a sharded ``pytorch_model.bin``
included); this module checks the family and finds the table.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from posembed.errors import AlreadyExtended, ExtensionError, UnsupportedCheckpoint
from posembed.interop.hf.checks import check_hf_folder, weight_shapes, weights_file

__all__ = [
    "FAMILIES",
    "TABLE_KEY",
    "BUFFERS",
    "MAX_POSITIONS",
    "ExtensionError",
    "UnsupportedCheckpoint",
    "AlreadyExtended",
    "CheckpointLayout",
    "ExtensionResult",
    "read_layout",
]

#: model_type -> how the first position's row is found: "zero" (row 0), "pad" (pad_token_id + 1),
#: or a fixed offset (MPNet's padding_idx is always 1)
FAMILIES: dict[str, str | int] = {
    "bert": "zero",
    "electra": "zero",
    "distilbert": "zero",
    "albert": "zero",
    "roberta": "pad",
    "xlm-roberta": "pad",
    "camembert": "pad",
    "mpnet": 2,
}
TABLE_KEY = "position_embeddings.weight"
#: buffers some checkpoints store, sized by the table: name -> how to rebuild them
BUFFERS = ("position_ids", "token_type_ids")
#: the most positions ``extend`` writes (a BERT attention over 2**20 tokens is far past any use)
MAX_POSITIONS = 1 << 20


@dataclass(frozen=True)
class CheckpointLayout:
    """Where a checkpoint keeps its position table and how it numbers positions."""

    folder: Path
    model_type: str
    weights: Path  # model.safetensors, pytorch_model.bin, or either's index
    prefix: str  # key prefix of the embedding block, e.g. "embeddings." or "roberta.embeddings."
    offset: int  # rows below the first position (RoBERTa: padding_idx + 1)
    table_rows: int
    config: dict = field(repr=False)

    @property
    def positions(self) -> int:
        """Usable positions (tokens per input)."""
        return self.table_rows - self.offset


@dataclass(frozen=True)
class ExtensionResult:
    """What :func:`extend_checkpoint` wrote."""

    out: Path
    model_type: str
    method: str
    original_positions: int
    positions: int
    table_rows: int
    rewritten: tuple[str, ...]
    copied: tuple[str, ...]
    left_out: tuple[str, ...]

    def to_json(self) -> dict:
        data = asdict(self)
        data["out"] = str(self.out)
        return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items()}


def read_layout(src: str | os.PathLike) -> CheckpointLayout:
    """Check that ``src`` is a supported checkpoint folder and find its position table.

    Raises:
        ExtensionError: no folder or no ``config.json``.
        UnsupportedCheckpoint: not one of :data:`FAMILIES`, a relative or sinusoidal position
            type, or weights without exactly one position table of the configured size.
    """
    folder = Path(src)
    if not folder.is_dir():
        raise ExtensionError(f"checkpoint folder {folder} does not exist or is not a folder")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ExtensionError(f"{config_file} not found: a Hugging Face checkpoint folder needs config.json")
    config = check_hf_folder(folder)  # CheckpointError for damaged files or absurd sizes, before anything is read
    model_type = _check_family(config, config_file)
    weights = weights_file(folder)
    prefix, rows = _find_table(weights, weight_shapes(folder, read_bin=True))
    if rows != config["max_position_embeddings"]:
        raise UnsupportedCheckpoint(
            f"{weights} has a {rows}-row position table but config.json says max_position_embeddings="
            f"{config['max_position_embeddings']}"
        )
    offset = _offset(model_type, config)
    if rows <= offset:
        raise UnsupportedCheckpoint(f"{weights}: a {rows}-row table leaves no positions after the first {offset} rows")
    return CheckpointLayout(folder, model_type, weights, prefix, offset, rows, config)


def _check_family(config: dict, config_file: Path) -> str:
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise UnsupportedCheckpoint(
            f"{config_file} has model_type={model_type!r}; extend supports the BERT family with a learned "
            f"absolute position table: {', '.join(FAMILIES)}"
        )
    kind = config.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise UnsupportedCheckpoint(
            f"{config_file} has position_embedding_type={kind!r}; only 'absolute' tables extend"
        )
    if config.get("sinusoidal_pos_embds"):
        raise UnsupportedCheckpoint(
            f"{config_file} uses fixed sinusoidal positions (sinusoidal_pos_embds), not a learned table"
        )
    if not isinstance(config.get("max_position_embeddings"), int):
        raise UnsupportedCheckpoint(f"{config_file} lacks an integer max_position_embeddings")
    return model_type


def _offset(model_type: str, config: dict) -> int:
    rule = FAMILIES[model_type]
    if rule == "zero":
        return 0
    if rule == "pad":
        pad = config.get("pad_token_id")
        return (1 if pad is None else int(pad)) + 1
    return int(rule)


def _find_table(weights: Path, shapes: dict[str, tuple[int, ...]]) -> tuple[str, int]:
    found = [key for key in shapes if key == TABLE_KEY or key.endswith("embeddings." + TABLE_KEY)]
    if len(found) != 1:
        what = "no key" if not found else f"{len(found)} keys ({', '.join(found)})"
        raise UnsupportedCheckpoint(f"{weights}: expected one '...embeddings.{TABLE_KEY}', found {what}")
    shape = shapes[found[0]]
    if len(shape) != 2:
        raise UnsupportedCheckpoint(f"{weights}: {found[0]} has shape {shape}, expected (rows, width)")
    return found[0][: -len(TABLE_KEY)], shape[0]
