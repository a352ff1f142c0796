"""Write a copy of a checkpoint folder with a longer position table: :func:`extend_checkpoint`.

What is rewritten, what is copied and what is left out is listed in :mod:`posembed.interop.extend`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import torch
from torch import Tensor

from posembed.errors import AlreadyExtended, ExtensionError
from posembed.interop.extend.layout import (
    BUFFERS,
    MAX_POSITIONS,
    TABLE_KEY,
    CheckpointLayout,
    ExtensionResult,
    read_layout,
)
from posembed.interop.extend.methods import KEEPS_TRAINED_ROWS, METHODS, extend_table
from posembed.interop.hf.checks import load_torch_bin, shard_map, weight_files

__all__ = ["extend_checkpoint"]

logger = logging.getLogger(__name__)
#: weight files in formats this tool does not rewrite (they would no longer match config.json)
_FOREIGN_WEIGHTS = ("tf_model.h5", "flax_model.msgpack", "rust_model.ot", "model.onnx", "onnx", "openvino")


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
        target,
        layout.model_type,
        method,
        layout.positions,
        to,
        layout.offset + to,
        tuple(sorted(rewritten)),
        tuple(sorted(set(copied) - set(rewritten))),
        tuple(sorted(left_out)),
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


def _is_bin(layout: CheckpointLayout) -> bool:
    """Whether the weights are ``pytorch_model.bin``, one file or sharded (converted to safetensors)."""
    return layout.weights.name.endswith((".bin", ".bin.index.json"))


def _safetensors_name(bin_name: str) -> str:
    """``pytorch_model.bin`` -> ``model.safetensors``; ``pytorch_model-00001-of-00002.bin`` ->
    ``model-00001-of-00002.safetensors``, as transformers names them."""
    return bin_name.replace("pytorch_model", "model", 1).removesuffix(".bin") + ".safetensors"


def _read_table(layout: CheckpointLayout) -> Tensor:
    key = layout.prefix + TABLE_KEY
    path = layout.weights
    if path.name.endswith(".index.json"):
        path = shard_map(path)[key]
    if path.suffix == ".bin":
        return load_torch_bin(path)[key]
    from safetensors import safe_open

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
    return relative.name == "pytorch_model.bin" and len(relative.parts) == 1 and not _is_bin(layout)


def _copy_others(layout: CheckpointLayout, work: Path) -> tuple[list[str], list[str]]:
    copied, left_out = [], []
    converted = {layout.weights, *weight_files(layout.weights)} if _is_bin(layout) else set()
    for path in sorted(layout.folder.rglob("*")):
        relative = path.relative_to(layout.folder)
        if path.is_dir() or ".cache" in relative.parts:
            continue
        if path in converted:
            left_out.append(str(relative))  # converted to safetensors by _write_weights
            continue
        if relative == Path(layout.weights.name) and layout.weights.suffix != ".json":
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
    if layout.weights.name.endswith(".bin.index.json"):
        written.append(_converted_index(layout, work))
    elif layout.weights.name.endswith(".index.json"):
        written.append(_rewrite_index(layout, work, written))
    return written


def _shards_to_rewrite(layout: CheckpointLayout, keys: set[str]) -> dict[str, tuple[dict[str, Tensor], dict]]:
    """Output file name -> (all its tensors, safetensors metadata), for each file holding ``keys``."""
    weights = layout.weights
    if _is_bin(layout):  # every file converted, every name kept; tied tensors (shared memory) copied apart
        return {_safetensors_name(p.name): (_untie(load_torch_bin(p)), {"format": "pt"}) for p in weight_files(weights)}
    from safetensors import safe_open

    names = [weights.name]
    if weights.name.endswith(".index.json"):
        where = shard_map(weights)
        names = sorted({where[key].name for key in keys if key in where})
    shards = {}
    for name in names:
        with safe_open(str(weights.parent / name), framework="pt") as handle:
            shards[name] = (
                {key: handle.get_tensor(key) for key in handle.keys()},
                handle.metadata() or {"format": "pt"},
            )
    return shards


def _untie(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """``tensors`` with every tensor that shares memory with another copied apart (contiguous);
    the others are returned as they are.

    safetensors refuses a file whose tensors share memory, as a tied head does in a legacy
    ``.bin``. Its ``save_model`` would keep one name per shared group, the first in sorted order,
    which is not always the one transformers keeps: for GPT-2 it drops ``transformer.wte.weight``
    for ``lm_head.weight``, and ``GPT2Model.from_pretrained`` then initialises ``wte`` at random.
    So every name is written, as the ``.bin`` held it.

    Example:
        >>> weight = torch.ones(2, 2)
        >>> out = _untie({"wte": weight, "lm_head": weight, "wpe": torch.zeros(3)})
        >>> out["wte"] is weight, out["wte"].data_ptr() == out["lm_head"].data_ptr(), torch.equal(out["wte"], weight)
        (False, False, True)
    """
    owners: dict[tuple[str, int], int] = {}
    for tensor in tensors.values():
        key = (tensor.device.type, tensor.untyped_storage().data_ptr())
        owners[key] = owners.get(key, 0) + 1
    shared = {key for key, count in owners.items() if count > 1}
    return {
        name: tensor.detach().clone().contiguous()
        if (tensor.device.type, tensor.untyped_storage().data_ptr()) in shared
        else tensor.detach().contiguous()
        for name, tensor in tensors.items()
    }


def _rewrite_index(layout: CheckpointLayout, work: Path, shards: list[str]) -> str:
    """Update a sharded checkpoint's ``total_size`` (bytes of tensor data, as transformers counts
    it) by what the rewritten shards gained."""
    index = json.loads(layout.weights.read_text(encoding="utf-8"))
    delta = sum(_tensor_bytes(work / s) - _tensor_bytes(layout.folder / s) for s in shards)
    if "total_size" in index.get("metadata", {}):
        index["metadata"]["total_size"] += delta
    _write_json(work / layout.weights.name, index)
    return layout.weights.name


def _converted_index(layout: CheckpointLayout, work: Path) -> str:
    """``model.safetensors.index.json`` for a sharded ``.bin`` converted shard by shard."""
    index = json.loads(layout.weights.read_text(encoding="utf-8"))
    weight_map = {key: _safetensors_name(Path(shard).name) for key, shard in index["weight_map"].items()}
    total = sum(_tensor_bytes(work / name) for name in set(weight_map.values()))
    _write_json(
        work / "model.safetensors.index.json",
        {**index, "metadata": {**index.get("metadata", {}), "total_size": total}, "weight_map": weight_map},
    )
    return "model.safetensors.index.json"


def _tensor_bytes(path: Path) -> int:
    """Bytes of tensor data in a safetensors file (its header's data offsets, nothing loaded)."""
    with path.open("rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
    return sum(
        end - begin for key, entry in header.items() if key != "__metadata__" for begin, end in [entry["data_offsets"]]
    )


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
    for name, keys in (
        ("tokenizer_config.json", ("model_max_length", "max_len")),
        ("sentence_bert_config.json", ("max_seq_length",)),
    ):
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
