"""Checks of a Hugging Face checkpoint folder before anything is built from it.

Every reader of a folder (:mod:`posembed.interop.hf`, the inspector, ``transformers`` itself
when the inspector hands it the folder) goes through here first, so that a broken or absurd
file is one :class:`~posembed.errors.CheckpointError` naming the file, not a traceback or a
2-minute allocation:

- ``config.json`` must be UTF-8 JSON holding an object; its size keys (``vocab_size``,
  ``hidden_size``, ``max_position_embeddings``, ``num_hidden_layers`` ...) positive integers;
- the weights must read: a safetensors header (shapes only, :func:`weight_shapes`), an index
  whose ``weight_map`` names shards inside the folder, a ``pytorch_model.bin`` that
  ``torch.load(weights_only=True)`` accepts (a pickle asking to run code is refused as unsafe);
  one rule for every reader (loading, inspecting, ``posembed extend``): :data:`WEIGHT_FILES` in
  that order, a sharded ``pytorch_model.bin`` included;
- the sizes must agree with the tables in the weights (:func:`check_sizes_against_weights`).

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text(json.dumps({"vocab_size": "lots"}))
    >>> read_hf_config(folder)
    Traceback (most recent call last):
    ...
    posembed.errors.CheckpointError: '.../config.json' says vocab_size='lots'; it must be a positive integer
"""

from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path

import torch

from posembed._utils.files import read_json, safetensors_shapes
from posembed.errors import CheckpointError

__all__ = [
    "read_hf_config",
    "check_hf_folder",
    "weights_file",
    "weight_files",
    "weight_shapes",
    "shard_map",
    "load_torch_bin",
    "check_sizes_against_weights",
    "WEIGHT_FILES",
]

#: weights files, in the order they are looked for
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
#: config keys that size a model; each, when present and not null, must be a positive integer
_SIZE_KEYS = (
    "vocab_size",
    "hidden_size",
    "embedding_size",
    "dim",
    "n_embd",
    "d_model",
    "max_position_embeddings",
    "n_positions",
    "n_ctx",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "n_layers",
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_key_value_heads",
    "intermediate_size",
    "n_inner",
    "hidden_dim",
    "head_dim",
)
#: (config keys, tensor-name suffixes, which dimension): the first key present is checked against
#: the first tensor found
_AGAINST_WEIGHTS = (
    (("vocab_size",), ("word_embeddings.weight", "wte.weight", "embed_tokens.weight", "embed_in.weight"), 0),
    (
        ("embedding_size", "hidden_size", "n_embd", "d_model", "dim"),
        ("word_embeddings.weight", "wte.weight", "embed_tokens.weight"),
        1,
    ),
    (("max_position_embeddings", "n_positions"), ("position_embeddings.weight", "wpe.weight"), 0),
    (("type_vocab_size",), ("token_type_embeddings.weight",), 0),
    (("intermediate_size",), ("intermediate.dense.weight", "mlp.up_proj.weight", "ffn.lin1.weight"), 0),
)
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
#: sizes that may be 0 (no segments; an embeddings-only checkpoint such as save_embeddings writes)
_MAY_BE_ZERO = frozenset({"type_vocab_size", *_LAYER_KEYS})
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)\.")


def read_hf_config(folder: str | Path) -> dict:
    """``folder/config.json`` as a dict: UTF-8 JSON, an object, its size keys positive integers."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: a Hugging Face checkpoint folder needs config.json")
    config = read_json(path)
    if not isinstance(config, dict):
        raise CheckpointError(path, f"holds a JSON {type(config).__name__}; config.json must be an object")
    for key in _SIZE_KEYS + ("type_vocab_size",):
        value = config.get(key)
        if value is None:
            continue
        smallest = 0 if key in _MAY_BE_ZERO else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < smallest:
            rule = "a non-negative integer" if smallest == 0 else "a positive integer"
            raise CheckpointError(path, f"says {key}={value!r}; it must be {rule}")
    return config


def check_hf_folder(folder: str | Path) -> dict:
    """Everything that can be checked without building: the config, the weights' headers, their agreement.

    Returns the config dict. Run before ``transformers`` or posembed builds anything from ``folder``.
    """
    config = read_hf_config(folder)
    shapes = weight_shapes(folder)
    if shapes is not None:
        check_sizes_against_weights(config, shapes, Path(folder))
    return config


def weights_file(folder: Path) -> Path:
    """The folder's weights file (or index), first of :data:`WEIGHT_FILES` present."""
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"no weights in {folder}: expected one of {', '.join(WEIGHT_FILES)}")


def shard_map(index: Path) -> dict[str, Path]:
    """``tensor name -> shard file`` from an index JSON; every shard a relative path inside the folder."""
    document = read_json(index)
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(index, "has no 'weight_map' object (tensor name -> shard file)")
    root = index.parent.resolve()
    shards: dict[str, Path] = {}
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise CheckpointError(index, f"maps {name!r} to {shard!r}; shard names must be file names")
        path = (index.parent / shard).resolve()
        if Path(shard).is_absolute() or not path.is_relative_to(root):
            raise CheckpointError(index, f"maps {name!r} to {shard!r}, outside the checkpoint folder; refused")
        if not path.is_file():
            raise CheckpointError(index, f"maps {name!r} to {shard!r}, which is not in the folder")
        shards[name] = path
    return shards


def weight_files(weights: Path) -> list[Path]:
    """The files holding a weights file's tensors: its shards (an index, checked) or itself."""
    if weights.name.endswith(".index.json"):
        return sorted(set(shard_map(weights).values()))
    return [weights]


def weight_shapes(folder: str | Path, *, read_bin: bool = False) -> dict[str, tuple[int, ...]] | None:
    """Every tensor's shape, from the safetensors headers (no data read).

    ``.bin`` weights (one file or sharded) have no header: ``None``, or with ``read_bin`` their
    shapes from loading them (:func:`load_torch_bin`). An index's shards are checked either way.
    """
    files = weight_files(weights_file(Path(folder)))
    shapes: dict[str, tuple[int, ...]] = {}
    for file in files:
        if file.suffix == ".bin":
            if not read_bin:
                return None
            shapes.update({key: tuple(value.shape) for key, value in load_torch_bin(file).items()})
        else:
            shapes.update(safetensors_shapes(file))
    return shapes


def load_torch_bin(path: Path) -> dict:
    """A ``pytorch_model.bin`` state dict, memory-mapped when it is a zip (torch >= 1.6) file.

    ``weights_only``: a pickle from the internet must never run code; one that asks to is refused
    as unsafe. Legacy (non-zip) files cannot be memory-mapped, so they are read whole.
    """
    if path.stat().st_size == 0:
        raise CheckpointError(path, "is empty (0 bytes)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except pickle.UnpicklingError as error:
        if "weights only load failed" in str(error).lower():
            reason = str(error).split("\n")[-1].strip() or "it asks to run code"
            raise CheckpointError(
                path, f"was refused as unsafe: torch.load(weights_only=True) will not unpickle it ({reason[:200]})"
            ) from None
        raise CheckpointError(path, f"is not a readable PyTorch file: {error}") from None
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile, KeyError, IndexError) as error:
        raise CheckpointError(path, f"is not a readable PyTorch file: {error}") from None
    if not isinstance(state, dict):
        raise CheckpointError(path, f"holds a {type(state).__name__}, not a state dict")
    return state


def check_sizes_against_weights(config: dict, shapes: dict[str, tuple[int, ...]], folder: Path) -> None:
    """The config's sizes against the tables in the weights: vocabulary, width, positions, segments, layers."""
    path = folder / "config.json"
    for keys, suffixes, dim in _AGAINST_WEIGHTS:
        key = next((k for k in keys if config.get(k) is not None), None)
        name = _first_tensor(shapes, suffixes)
        if key is None or name is None or len(shapes[name]) <= dim:
            continue
        if shapes[name][dim] != config[key]:
            raise CheckpointError(path, f"says {key}={config[key]}, but the weights' {name} has shape {shapes[name]}")
    key = next((k for k in _LAYER_KEYS if config.get(k) is not None), None)
    layers = {int(m.group(1)) for name in shapes for m in [_LAYER_INDEX.search(name)] if m}
    if key is not None and layers and config[key] > max(layers) + 1:  # more layers than saved: built empty
        raise CheckpointError(path, f"says {key}={config[key]}, but the weights hold {max(layers) + 1} layers")


def _first_tensor(shapes: dict[str, tuple[int, ...]], suffixes: tuple[str, ...]) -> str | None:
    for suffix in suffixes:
        found = sorted((n for n in shapes if n == suffix or n.endswith("." + suffix)), key=len)
        if found:
            return found[0]
    return None
