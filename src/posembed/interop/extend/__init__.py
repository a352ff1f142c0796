"""Give a BERT-family checkpoint folder more positions: ``posembed extend``.

:func:`extend_checkpoint` copies a whole Hugging Face checkpoint folder (a sentence-transformers
model included) to a new folder whose learned position table has ``to`` positions, grown by one
of :data:`posembed.interop.extend.methods.METHODS`. It rewrites only what the size touches:

* the weights (``model.safetensors``; a sharded checkpoint's affected shards and index; a
  ``pytorch_model.bin`` is converted to ``model.safetensors``): the position table and, when the
  file holds them, the ``position_ids`` / ``token_type_ids`` buffers;
* ``config.json``: ``max_position_embeddings`` and a ``posembed_extension`` record
  (``method``, ``original_positions``, ``positions``, ``original_max_position_embeddings``);
* ``tokenizer_config.json``: ``model_max_length`` (and a legacy ``max_len``);
* ``sentence_bert_config.json``: ``max_seq_length``, when the folder is a sentence-transformers model.

Every other file is copied unchanged, except weights in other formats (TensorFlow, Flax, ONNX,
OpenVINO, a stale ``pytorch_model.bin`` beside safetensors), which would no longer match
``config.json``: they are left out, with a warning, and listed in the result.

``to`` counts usable positions (tokens per input). RoBERTa-style models number positions from
``padding_idx + 1``: their table keeps its first ``padding_idx + 1`` rows and gets ``to`` more,
and ``max_position_embeddings`` becomes ``to + padding_idx + 1`` (roberta-base: 514 = 512 + 2).

A folder already extended by posembed is refused unless ``force=True``; then the current table
counts as trained, and the new record keeps the old one under ``previous``.

The folder is built in a temporary folder beside ``out`` and renamed into place, so ``out``
either holds the whole result or is left as it was.

Example:
    >>> import tempfile, pathlib, transformers
    >>> config = transformers.BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=16, max_position_embeddings=16)
    >>> src = pathlib.Path(tempfile.mkdtemp()) / "bert"
    >>> transformers.BertModel(config).save_pretrained(src)
    >>> result = extend_checkpoint(src, src.parent / "bert-64", to=64, method="copy")
    >>> result.original_positions, result.positions, result.table_rows
    (16, 64, 64)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from posembed.interop.extend.methods import KEEPS_TRAINED_ROWS, METHODS, extend_table
from posembed.interop.hf.checks import check_hf_folder, load_torch_bin, shard_map

__all__ = [
    "FAMILIES",
    "ExtensionError",
    "UnsupportedCheckpoint",
    "AlreadyExtended",
    "CheckpointLayout",
    "ExtensionResult",
    "read_layout",
    "extend_checkpoint",
]

logger = logging.getLogger(__name__)

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
#: weight files in formats this tool does not rewrite (they would no longer match config.json)
_FOREIGN_WEIGHTS = ("tf_model.h5", "flax_model.msgpack", "rust_model.ot", "model.onnx", "onnx", "openvino")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
#: the most positions ``extend`` writes (a BERT attention over 2**20 tokens is far past any use)
MAX_POSITIONS = 1 << 20


class ExtensionError(ValueError):
    """A checkpoint folder or request that ``extend`` refuses (the message says why)."""


class UnsupportedCheckpoint(ExtensionError):
    """The folder is not a BERT-family checkpoint with a learned absolute position table."""


class AlreadyExtended(ExtensionError):
    """The folder's config records an earlier posembed extension (pass ``force=True``)."""


@dataclass(frozen=True)
class CheckpointLayout:
    """Where a checkpoint keeps its position table and how it numbers positions."""

    folder: Path
    model_type: str
    weights: Path  # model.safetensors, its index, or pytorch_model.bin
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


# ---------------------------------------------------------------------- reading


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
    weights = _weights_file(folder)
    prefix, rows = _find_table(weights)
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
        raise UnsupportedCheckpoint(f"{config_file} has position_embedding_type={kind!r}; only 'absolute' tables extend")
    if config.get("sinusoidal_pos_embds"):
        raise UnsupportedCheckpoint(f"{config_file} uses fixed sinusoidal positions (sinusoidal_pos_embds), not a learned table")
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


def _weights_file(folder: Path) -> Path:
    for name in _WEIGHT_FILES:
        if (folder / name).is_file():
            return folder / name
    if (folder / "pytorch_model.bin.index.json").is_file():
        raise UnsupportedCheckpoint(f"{folder} holds a sharded pytorch_model.bin; convert it to safetensors first")
    raise ExtensionError(f"no weights in {folder}: expected one of {', '.join(_WEIGHT_FILES)}")


def _find_table(weights: Path) -> tuple[str, int]:
    shapes = _key_shapes(weights)
    found = [key for key in shapes if key == TABLE_KEY or key.endswith("embeddings." + TABLE_KEY)]
    if len(found) != 1:
        what = "no key" if not found else f"{len(found)} keys ({', '.join(found)})"
        raise UnsupportedCheckpoint(f"{weights}: expected one '...embeddings.{TABLE_KEY}', found {what}")
    shape = shapes[found[0]]
    if len(shape) != 2:
        raise UnsupportedCheckpoint(f"{weights}: {found[0]} has shape {shape}, expected (rows, width)")
    return found[0][: -len(TABLE_KEY)], shape[0]


def _key_shapes(weights: Path) -> dict[str, tuple[int, ...]]:
    if weights.suffix == ".bin":
        return {key: tuple(value.shape) for key, value in _load_bin(weights).items()}
    from safetensors import safe_open

    files = [weights]
    if weights.name.endswith(".index.json"):
        files = list(dict.fromkeys(shard_map(weights).values()))  # shards confined to the folder
    shapes: dict[str, tuple[int, ...]] = {}
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            shapes.update({key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()})
    return shapes


def _load_bin(weights: Path) -> dict[str, Tensor]:
    return load_torch_bin(weights)  # weights_only; a refused or damaged pickle is a CheckpointError


# ---------------------------------------------------------------------- extending


def extend_checkpoint(
    src: str | os.PathLike,
    out: str | os.PathLike,
    to: int,
    method: str = "copy",
    *,
    force: bool = False,
    finetune: int = 0,
    text: str | os.PathLike | None = None,
    seed: int = 0,
    progress: bool | str | None = False,
) -> ExtensionResult:
    """Write a copy of checkpoint folder ``src`` to ``out`` with a ``to``-position table.

    Args:
        src: a BERT-family Hugging Face (or sentence-transformers) checkpoint folder.
        out: the new folder; must not exist, or be empty.
        to: usable positions wanted; more than the checkpoint has now.
        method: ``"copy"``, ``"interpolate"`` or ``"hierarchical"``
            (see :mod:`posembed.interop.extend.methods`).
        force: extend a folder that posembed extended before.
        finetune: tune only the new rows for this many steps
            (:func:`posembed.interop.extend.finetune.tune_new_rows`), the original rows and every
            other weight frozen; needs a method of
            :data:`~posembed.interop.extend.methods.KEEPS_TRAINED_ROWS`. 0: no tuning.
        text: the tuning pairs' text file (default: the shipped tinyshakespeare).
        seed: the tuning's seed.

    Raises:
        ExtensionError (a ValueError): bad ``to``/``method``/``out``, missing folder or config;
            its subclasses UnsupportedCheckpoint and AlreadyExtended.
    """
    layout = read_layout(src)
    target = _check_request(layout, Path(out), to, method, force)
    _check_finetune(finetune, method)
    table, tuning = None, None
    if finetune:
        table, tuning = _tuned_table(layout, to, method, finetune, text, seed, progress)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        copied, left_out = _copy_others(layout, work)
        rewritten = _write_weights(layout, work, to, method, table)
        rewritten += _write_configs(layout, work, to, method, tuning)
        if target.exists():
            target.rmdir()  # checked empty above
        os.rename(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    logger.info("extended %s from %d to %d positions (%s) into %s", layout.folder, layout.positions, to, method, target)
    return ExtensionResult(
        target, layout.model_type, method, layout.positions, to, layout.offset + to,
        tuple(sorted(rewritten)), tuple(sorted(set(copied) - set(rewritten))), tuple(sorted(left_out)),
    )


def _check_request(layout: CheckpointLayout, out: Path, to: int, method: str, force: bool) -> Path:
    if method not in METHODS:
        raise ExtensionError(f"unknown extension method {method!r}; choose one of {', '.join(METHODS)}")
    if not isinstance(to, int) or isinstance(to, bool) or to <= layout.positions:
        raise ExtensionError(f"--to must be larger than the checkpoint's {layout.positions} positions, got {to!r}")
    if to > MAX_POSITIONS:
        raise ExtensionError(f"--to {to} is more than the {MAX_POSITIONS} positions extend writes")
    if method == "hierarchical" and to > layout.positions**2:
        raise ExtensionError(f"hierarchical extension reaches at most {layout.positions**2} positions, got --to {to}")
    record = layout.config.get("posembed_extension")
    if record and not force:
        raise AlreadyExtended(
            f"{layout.folder} was already extended by posembed ({record.get('method')}: "
            f"{record.get('original_positions')} -> {record.get('positions')} positions); pass --force to extend again"
        )
    target = out.resolve()
    source = layout.folder.resolve()
    if target == source or source in target.parents:
        raise ExtensionError(f"--out {out} must lie outside the checkpoint folder {layout.folder}")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ExtensionError(f"--out {out} exists and is not an empty folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _check_finetune(finetune: int, method: str) -> None:
    if not isinstance(finetune, int) or isinstance(finetune, bool) or finetune < 0:
        raise ExtensionError(f"--finetune takes a number of steps >= 0, got {finetune!r}")
    if finetune and method not in KEEPS_TRAINED_ROWS:
        raise ExtensionError(
            f"--finetune tunes the new rows with the trained ones frozen, which needs a method that keeps them "
            f"({', '.join(sorted(KEEPS_TRAINED_ROWS))}); {method!r} changes them"
        )


def _read_table(layout: CheckpointLayout) -> Tensor:
    key = layout.prefix + TABLE_KEY
    if layout.weights.suffix == ".bin":
        return _load_bin(layout.weights)[key]
    from safetensors import safe_open

    path = layout.weights
    if path.name.endswith(".index.json"):
        path = shard_map(path)[key]
    with safe_open(str(path), framework="pt") as handle:
        return handle.get_tensor(key)


def _tuned_table(
    layout: CheckpointLayout, to: int, method: str, steps: int, text, seed: int, progress: bool | str | None
) -> tuple[Tensor, dict]:
    from posembed.interop.extend.finetune import tune_new_rows

    grown = extend_table(_read_table(layout), to, method, offset=layout.offset)
    return tune_new_rows(layout.folder, grown, layout.table_rows, steps=steps, text=text, seed=seed, progress=progress)


def _is_foreign(relative: Path, layout: CheckpointLayout) -> bool:
    if relative.parts[0] in _FOREIGN_WEIGHTS or relative.suffix == ".onnx":
        return True
    # a pytorch_model.bin beside safetensors would keep the old table
    return relative.name == "pytorch_model.bin" and len(relative.parts) == 1 and layout.weights.suffix != ".bin"


def _copy_others(layout: CheckpointLayout, work: Path) -> tuple[list[str], list[str]]:
    copied, left_out = [], []
    for path in sorted(layout.folder.rglob("*")):
        relative = path.relative_to(layout.folder)
        if path.is_dir() or ".cache" in relative.parts:
            continue
        if relative == Path(layout.weights.name) and layout.weights.suffix != ".json":
            if layout.weights.suffix == ".bin":
                left_out.append(str(relative))  # converted to model.safetensors
            continue  # rewritten by _write_weights
        if _is_foreign(relative, layout):
            left_out.append(str(relative))
            logger.warning("left out %s: weights in another format would not match the new config.json", relative)
            continue
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, work / relative)  # follows symlinks (Hugging Face cache snapshots)
        copied.append(str(relative))
    return copied, left_out


def _grow(layout: CheckpointLayout, key: str, tensor: Tensor, to: int, method: str, table: Tensor | None) -> Tensor:
    name = key[len(layout.prefix) :]
    rows = layout.offset + to
    if name == TABLE_KEY and table is not None:
        return table.contiguous()
    if name == TABLE_KEY:
        return extend_table(tensor, to, method, offset=layout.offset).contiguous()
    if name == "position_ids":
        return torch.arange(rows, dtype=tensor.dtype).reshape(*tensor.shape[:-1], rows).contiguous()
    return torch.zeros(*tensor.shape[:-1], rows, dtype=tensor.dtype)  # token_type_ids


def _write_weights(layout: CheckpointLayout, work: Path, to: int, method: str, table: Tensor | None) -> list[str]:
    from safetensors.torch import save_file

    keys = {layout.prefix + name for name in (TABLE_KEY, *BUFFERS)}
    written = []
    for shard, (tensors, metadata) in _shards_to_rewrite(layout, keys).items():
        for key in keys & tensors.keys():
            tensors[key] = _grow(layout, key, tensors[key], to, method, table)
        save_file(tensors, str(work / shard), metadata=metadata)
        written.append(shard)
    if layout.weights.name.endswith(".index.json"):
        written.append(_rewrite_index(layout, work, written))
    return written


def _shards_to_rewrite(layout: CheckpointLayout, keys: set[str]) -> dict[str, tuple[dict[str, Tensor], dict]]:
    """Output file name -> (all its tensors, safetensors metadata), for each file holding ``keys``."""
    weights = layout.weights
    if weights.suffix == ".bin":
        state = _load_bin(weights)
        # safetensors refuses tensors that share memory (tied heads): give each its own copy
        return {"model.safetensors": ({k: v.detach().clone().contiguous() for k, v in state.items()}, {"format": "pt"})}
    from safetensors import safe_open

    names = [weights.name]
    if weights.name.endswith(".index.json"):
        where = shard_map(weights)
        names = sorted({where[key].name for key in keys if key in where})
    shards = {}
    for name in names:
        with safe_open(str(weights.parent / name), framework="pt") as handle:
            shards[name] = ({key: handle.get_tensor(key) for key in handle.keys()}, handle.metadata() or {"format": "pt"})
    return shards


def _rewrite_index(layout: CheckpointLayout, work: Path, shards: list[str]) -> str:
    """Update a sharded checkpoint's ``total_size`` (bytes of tensor data, as transformers counts
    it) by what the rewritten shards gained."""
    index = json.loads(layout.weights.read_text(encoding="utf-8"))
    delta = sum(_tensor_bytes(work / s) - _tensor_bytes(layout.folder / s) for s in shards)
    if "total_size" in index.get("metadata", {}):
        index["metadata"]["total_size"] += delta
    _write_json(work / layout.weights.name, index)
    return layout.weights.name


def _tensor_bytes(path: Path) -> int:
    """Bytes of tensor data in a safetensors file (its header's data offsets, nothing loaded)."""
    with path.open("rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
    return sum(end - begin for key, entry in header.items() if key != "__metadata__" for begin, end in [entry["data_offsets"]])


def _write_configs(layout: CheckpointLayout, work: Path, to: int, method: str, tuning: dict | None) -> list[str]:
    config = dict(layout.config)
    record = {
        "method": method,
        "original_positions": layout.positions,
        "positions": to,
        "original_max_position_embeddings": layout.table_rows,
    }
    if tuning is not None:
        record["finetune"] = tuning
    if "posembed_extension" in config:
        record["previous"] = config["posembed_extension"]
    config["max_position_embeddings"] = layout.offset + to
    config["posembed_extension"] = record
    _write_json(work / "config.json", config)
    written = ["config.json"]
    for name, keys in (("tokenizer_config.json", ("model_max_length", "max_len")), ("sentence_bert_config.json", ("max_seq_length",))):
        path = layout.folder / name
        if not path.is_file():
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        for key in keys:
            if key in data or key == keys[0]:
                data[key] = to
        _write_json(work / name, data)
        written.append(name)
    return written


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
