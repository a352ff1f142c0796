"""Checks of a lab checkpoint before anything is built: the JSON against the weights file.

A ``posembed_model.json`` saying ``depth: 1000000`` or ``vocab_size: 10**7`` would otherwise
build (and allocate) the model before the weights' shapes refuse it. Here, in order:

1. the JSON reads, is an object, and holds a ``model`` object (:func:`read_checkpoint_json`);
2. the weights file's header reads (:func:`read_weight_shapes`: shapes only, no tensor data);
3. every size in ``model`` has the right type and range, and agrees with the weights: the
   token table holds ``vocab_size`` rows, the final norm is ``dim`` wide, the file holds
   ``depth`` blocks, the MLP is ``mlp_ratio * dim`` wide, the head has ``vocab_size`` (decoder)
   or ``num_classes`` (encoder) rows;
4. the model is built on the meta device (no memory, initialisation skipped) and every saved
   tensor's shape is compared with the file's; tensors the file does not hold (a rotary
   scheme's cos/sin cache) must fit in memory, together (layers sharing one scheme count it once).

A model with one scheme per layer keeps them under ``model.layer_schemes`` (one object, ``null``
or ``{"same_as": j}`` per layer) beside ``model.scheme`` (then ``null`` or an absolute scheme):
messages name the key that says what the file contradicts, ``model.layer_schemes[i]`` for a
layer's table.

Each problem is a :class:`~posembed.errors.CheckpointError` naming the file and the key.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from posembed._utils.checks import device_memory_bytes, format_bytes
from posembed._utils.files import read_json, safetensors_shapes
from posembed.errors import CheckpointError
from posembed.lab.task_registry import MODELS

__all__ = ["read_checkpoint_json", "read_weight_shapes", "check_lab_checkpoint"]

_POSITIVE_INTS = ("vocab_size", "dim", "depth", "num_heads", "mlp_ratio")
_BLOCK = re.compile(r"blocks\.(\d+)\.")
_LAYER_SCHEME = re.compile(r"blocks\.(\d+)\.attn\.scheme\.")
#: in-place initialisers a meta-device build skips (``normal_`` on meta costs ~3 s the first time)
_INIT_OPS = frozenset({"normal_", "uniform_", "trunc_normal_", "fill_", "zero_", "copy_", "exponential_"})


def read_checkpoint_json(path: str | Path) -> dict:
    """The checkpoint's JSON document; it must be an object with a ``model`` object."""
    path = Path(path)
    document = read_json(path)
    if not isinstance(document, dict):
        raise CheckpointError(path, f"holds a JSON {type(document).__name__}, not an object")
    if not isinstance(document.get("model"), dict):
        raise CheckpointError(path, "has no 'model' config (an object)")
    return document


def read_weight_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape in a safetensors file, read from its header (no tensor data is loaded)."""
    return safetensors_shapes(Path(path))


def check_lab_checkpoint(config: dict, weights: str | Path, config_path: str | Path = "posembed_model.json") -> None:
    """Refuse a lab ``model`` config that disagrees with the weights file, before building anything.

    Args:
        config: the ``model`` object of ``posembed_model.json``.
        weights: the checkpoint's ``model.safetensors``.
        config_path: the JSON file, named in the messages.

    Raises:
        CheckpointError: a wrong type or range, or a size the weights contradict (naming the key).
    """
    shapes = read_weight_shapes(weights)
    _check_types(config, Path(config_path))
    _check_sizes(config, shapes, Path(config_path), Path(weights))
    _check_built_shapes(config, shapes, Path(config_path), Path(weights))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_types(config: dict, path: Path) -> None:
    architecture = config.get("architecture")
    if architecture not in MODELS:
        raise CheckpointError(path, f"says model.architecture must be 'decoder' or 'encoder', got {architecture!r}")
    for name in _POSITIVE_INTS:
        value = config.get(name)
        if not _is_int(value) or value < 1:
            raise CheckpointError(path, f"says model.{name} must be a positive integer, got {value!r}")
    num_classes = config.get("num_classes")
    if architecture == "encoder" and num_classes is not None and (not _is_int(num_classes) or num_classes < 1):
        # None: an encoder with per-token logits over the vocabulary
        raise CheckpointError(path, f"says model.num_classes must be a positive integer or null, got {num_classes!r}")
    max_len = config.get("max_len")
    if max_len is not None and (not _is_int(max_len) or max_len < 1):
        raise CheckpointError(path, f"says model.max_len must be a positive integer or null, got {max_len!r}")
    dropout = config.get("dropout", 0.0)
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
        raise CheckpointError(path, f"says model.dropout must be a number in [0, 1], got {dropout!r}")
    if not isinstance(config.get("untied", False), bool):
        raise CheckpointError(path, f"says model.untied must be true or false, got {config['untied']!r}")
    for name in ("combine", "inject", "backend"):
        if name in config and not isinstance(config[name], str):
            raise CheckpointError(path, f"says model.{name} must be a string, got {config[name]!r}")
    scheme = config.get("scheme")
    if scheme is not None and not (isinstance(scheme, dict) and isinstance(scheme.get("name"), str)):
        raise CheckpointError(path, f"says model.scheme must be null or an object with a 'name', got {scheme!r}")
    _check_layer_schemes(config, path)
    if config["dim"] % config["num_heads"]:
        raise CheckpointError(
            path, f"says model.dim={config['dim']}, not divisible by model.num_heads={config['num_heads']}"
        )


def _check_layer_schemes(config: dict, path: Path) -> None:
    """``model.layer_schemes``, when present: a list of ``depth`` entries, each null, an object with a
    ``name``, or ``{"same_as": j}`` with ``j`` an earlier layer."""
    if "layer_schemes" not in config:
        return
    layers = config["layer_schemes"]
    if not isinstance(layers, list) or len(layers) != config["depth"]:
        got = f"{len(layers)} entries" if isinstance(layers, list) else repr(layers)
        raise CheckpointError(
            path,
            f"says model.layer_schemes must be a list of model.depth={config['depth']} "
            f"entries (one scheme or null per layer), got {got}",
        )
    for index, layer in enumerate(layers):
        same = layer.get("same_as") if isinstance(layer, dict) else None
        if layer is None or (isinstance(layer, dict) and isinstance(layer.get("name"), str)):
            continue
        if isinstance(layer, dict) and set(layer) == {"same_as"} and _is_int(same) and 0 <= same < index:
            continue
        raise CheckpointError(
            path,
            f"says model.layer_schemes[{index}] must be null, an object with a 'name' or "
            f'{{"same_as": j}} with j an earlier layer, got {layer!r}',
        )


def _schemes_said(config: dict) -> str:
    """What the config says about positions: ``model.scheme=...`` and, per layer, ``model.layer_schemes=[...]``."""
    said = f"model.scheme={_scheme_name(config.get('scheme'))}"
    if "layer_schemes" in config:
        said += f", model.layer_schemes=[{', '.join(_scheme_name(layer) for layer in config['layer_schemes'])}]"
    return said


def _scheme_name(entry: object) -> str:
    if entry is None:
        return "null"
    if isinstance(entry, dict) and "same_as" in entry:
        return f"same as {entry['same_as']}"
    return str(entry.get("name")) if isinstance(entry, dict) else repr(entry)


def _table_key(name: str, config: dict) -> str:
    """The config key behind the derived table ``name``, with its value."""
    match = _LAYER_SCHEME.match(name)
    layers = config.get("layer_schemes")
    if match is None or not isinstance(layers, list):
        return f"model.scheme={config.get('scheme')}"
    index = int(match.group(1))
    entry = layers[index]
    if isinstance(entry, dict) and "same_as" in entry:  # shared: the first layer holding it says how it is built
        return f"model.layer_schemes[{index}]={entry} (layer {entry['same_as']}: {layers[entry['same_as']]})"
    return f"model.layer_schemes[{index}]={entry}"


def _check_sizes(config: dict, shapes: dict[str, tuple[int, ...]], path: Path, weights: Path) -> None:
    """The sizes that scale the model (vocabulary, width, depth, MLP, head) against the file's tensors."""
    dim, depth = config["dim"], config["depth"]
    blocks = sorted({int(match.group(1)) for name in shapes if (match := _BLOCK.match(name))})
    if blocks != list(range(depth)):
        held = f"blocks {blocks[0]}..{blocks[-1]}" if blocks else "no blocks"
        raise CheckpointError(path, f"says model.depth={depth} but {weights.name} holds {len(blocks)} ({held})")
    classifier = config["architecture"] == "encoder" and config.get("num_classes") is not None
    head_rows = ("num_classes", config["num_classes"]) if classifier else ("vocab_size", config["vocab_size"])
    expected = {
        "norm.weight": ("dim", (dim,)),
        "embeddings.token_embeddings.weight": ("vocab_size", (config["vocab_size"], None)),
        "head.weight": (head_rows[0], (head_rows[1], dim)),
        "blocks.0.mlp.0.weight": ("mlp_ratio", (config["mlp_ratio"] * dim, dim)),
    }
    for name, (key, shape) in expected.items():
        if name not in shapes:
            raise CheckpointError(weights, f"lacks the tensor {name!r} every lab model saves")
        found = shapes[name]
        if len(found) != len(shape) or any(want is not None and want != got for want, got in zip(shape, found)):
            want = tuple("*" if n is None else n for n in shape)
            raise CheckpointError(
                path,
                f"says model.{key}={config[key]}, which implies {name} of shape {want}, "
                f"but {weights.name} holds {found}",
            )


class _SkipInit(TorchFunctionMode):
    """Initialisers do nothing: on the meta device there is no data to fill."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")  # torch.nn.init passes it by keyword
        if getattr(func, "__name__", "") in _INIT_OPS and getattr(target, "is_meta", False):
            return target
        return func(*args, **kwargs)


def _check_built_shapes(config: dict, shapes: dict[str, tuple[int, ...]], path: Path, weights: Path) -> None:
    from posembed.nn.attention.layer import fused_qkv_shapes
    from posembed.nn.model.transformer import build_model

    shapes = fused_qkv_shapes(shapes)  # checkpoints from before the fused qkv projection convert at load

    try:
        with torch.device("meta"), _SkipInit():
            model = build_model(config)
    except (ValueError, TypeError, MemoryError) as error:  # MemoryError: a table refused by its size alone
        raise CheckpointError(path, f"holds a model config that does not build: {error}") from None
    state = model.state_dict(keep_vars=True)  # a module shared by several owners: one tensor, every name
    saved = {name: tuple(t.shape) for name, t in state.items()}
    names: dict[int, list[str]] = {}
    for name, tensor in state.items():
        names.setdefault(id(tensor), []).append(name)
    # safetensors' save_model writes a shared tensor under one of its names, load_model fills the others
    problems = [f"missing {group[0]}" for group in names.values() if not any(name in shapes for name in group)]
    problems += [f"unexpected {name}" for name in shapes if name not in saved]
    problems += [
        f"{name} is {shapes[name]} in the file, {shape} by the config"
        for name, shape in saved.items()
        if name in shapes and shapes[name] != shape
    ]
    if problems:
        more = f" (and {len(problems) - 4} more)" if len(problems) > 4 else ""
        listed = "; ".join(problems[:4]) + more
        raise CheckpointError(weights, f"does not match {path.name} ({_schemes_said(config)}): {listed}")
    _check_unsaved(model, set(saved), config, path)


def _check_unsaved(model: torch.nn.Module, saved: set[str], config: dict, path: Path) -> None:
    """Tables the file does not hold (derived caches) are sized by the config alone: they must fit in memory."""
    unsaved = [(name, b) for name, b in model.named_buffers(remove_duplicate=True) if name not in saved]
    total = sum(math.prod(b.shape) * b.element_size() for _, b in unsaved)
    limit = device_memory_bytes("cpu")
    if limit is not None and total > limit:
        largest = max(unsaved, key=lambda item: math.prod(item[1].shape) * item[1].element_size())
        raise CheckpointError(
            path,
            f"says {_table_key(largest[0], config)}, which implies {format_bytes(total)} of derived tables "
            f"(the largest {largest[0]} {tuple(largest[1].shape)}), more than the {format_bytes(limit)} of memory",
        )
