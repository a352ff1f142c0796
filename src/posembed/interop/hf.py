"""Hugging Face checkpoints in and out: the embedding block of a BERT-family model.

One converter with an explicit key map and shape checks. Reading needs ``safetensors`` (or
only torch for ``pytorch_model.bin``, read with ``torch.load(weights_only=True)``); the config is
plain JSON, so ``transformers`` itself is not needed. Optional packages are imported lazily.

Checkpoint keys are found under the first prefix that holds ``word_embeddings.weight``:
``embeddings.`` (``BertModel``), ``bert.embeddings.`` (heads such as ``BertForMaskedLM``),
``model.embeddings.``, ``roberta.embeddings.``, ``electra.embeddings.``, ... Older TF-converted
checkpoints spell LayerNorm's parameters ``gamma``/``beta``; both spellings are accepted.

RoBERTa-style models (``roberta``, ``xlm-roberta``, ``camembert``) number positions from
``pad_token_id + 1``: pass ``position_ids = positions_from_mask(mask) + pad_token_id + 1``.

Example (a round trip through a temporary folder):

    >>> import tempfile
    >>> from posembed import LearnedAbsolute
    >>> emb = TransformerEmbeddings(100, 8, position=LearnedAbsolute(16, 8))
    >>> folder = save_embeddings(emb, tempfile.mkdtemp())
    >>> sorted(p.name for p in folder.iterdir())
    ['config.json', 'model.safetensors']
    >>> back = load_embeddings(folder)
    >>> all(torch.equal(back.state_dict()[k], v) for k, v in emb.state_dict().items())
    True
"""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path

import torch
from torch import Tensor

from posembed._io import atomic_write_bytes, atomic_write_json
from posembed.embeddings import TransformerEmbeddings
from posembed.schemes.learned import LearnedAbsolute, LearnedParameter

__all__ = ["load_embeddings", "save_embeddings", "read_embedding_config", "HF_KEY_MAP"]

logger = logging.getLogger(__name__)

#: Hugging Face embedding-block key (after the prefix) -> posembed state-dict key
HF_KEY_MAP: dict[str, str] = {
    "word_embeddings.weight": "token_embeddings.weight",
    "position_embeddings.weight": "position.embedding.weight",
    "token_type_embeddings.weight": "token_type_embeddings.weight",
    "LayerNorm.weight": "norm.weight",
    "LayerNorm.bias": "norm.bias",
}
#: old spellings of the same parameters
_ALIASES = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}
_PREFIXES = ("embeddings.", "bert.embeddings.", "model.embeddings.", "roberta.embeddings.", "electra.embeddings.", "")
_ROBERTA_LIKE = {"roberta", "xlm-roberta", "camembert", "xlm-roberta-xl"}
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


# ---------------------------------------------------------------------- config


def read_embedding_config(path: str | Path) -> dict:
    """The embedding-block settings of ``path/config.json`` (with BERT's defaults).

    Returns keys ``vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
    pad_token_id, layer_norm_eps, dropout, model_type``.
    """
    config_file = _folder(path) / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{config_file} not found: a Hugging Face checkpoint folder needs config.json")
    raw = json.loads(config_file.read_text(encoding="utf-8"))
    missing = [k for k in ("vocab_size", "max_position_embeddings") if k not in raw]
    width = raw.get("embedding_size", raw.get("hidden_size", raw.get("dim")))
    if width is None:
        missing.append("hidden_size")
    if missing:
        raise ValueError(f"{config_file} lacks {', '.join(missing)}")
    kind = raw.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise ValueError(
            f"{config_file} has position_embedding_type={kind!r}; only 'absolute' maps to an embedding block "
            f"(relative positions belong to the attention layer: posembed.ShawRelative)"
        )
    model_type = raw.get("model_type", "bert")
    return {
        "vocab_size": int(raw["vocab_size"]),
        "hidden_size": int(width),
        "max_position_embeddings": int(raw["max_position_embeddings"]),
        "type_vocab_size": int(raw.get("type_vocab_size", 0 if model_type == "distilbert" else 2)),
        "pad_token_id": raw.get("pad_token_id", 0),
        "layer_norm_eps": float(raw.get("layer_norm_eps", 1e-12)),
        "dropout": float(raw.get("hidden_dropout_prob", raw.get("dropout", 0.1))),
        "model_type": model_type,
    }


# ---------------------------------------------------------------------- load


def load_embeddings(path: str | Path, *, device=None, dtype=None) -> TransformerEmbeddings:
    """Build a :class:`TransformerEmbeddings` holding a checkpoint's embedding block.

    Args:
        path: a Hugging Face model folder (``config.json`` + ``model.safetensors``, a sharded
            ``model.safetensors.index.json``, or ``pytorch_model.bin``).
        device, dtype: where and in which dtype to put the weights (default: CPU, float32).

    Raises:
        FileNotFoundError: no folder, config or weights file.
        ValueError: missing or mis-shaped keys (all listed), or a non-absolute position type.
    """
    config = read_embedding_config(path)
    if config["model_type"] in _ROBERTA_LIKE:
        logger.warning(
            "%s numbers positions from pad_token_id + 1 = %d: pass position_ids explicitly",
            config["model_type"], (config["pad_token_id"] or 0) + 1,
        )
    wanted = _expected_shapes(config)
    tensors = _read_block(_folder(path), list(wanted))
    _check_block(tensors, wanted, path)
    emb = _new_block(config, dtype)
    emb.load_state_dict({HF_KEY_MAP[key]: tensor for key, tensor in tensors.items()}, strict=True)
    logger.info("loaded the embedding block of %s (%d tensors)", path, len(tensors))
    return emb.to(device) if device is not None else emb


def _folder(path: str | Path) -> Path:
    folder = Path(path)
    if not folder.exists():
        raise FileNotFoundError(f"checkpoint folder {folder} does not exist")
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder; give the checkpoint folder (with config.json)")
    return folder


def _expected_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    width = config["hidden_size"]
    shapes = {
        "word_embeddings.weight": (config["vocab_size"], width),
        "position_embeddings.weight": (config["max_position_embeddings"], width),
        "LayerNorm.weight": (width,),
        "LayerNorm.bias": (width,),
    }
    if config["type_vocab_size"]:
        shapes["token_type_embeddings.weight"] = (config["type_vocab_size"], width)
    return shapes


def _new_block(config: dict, dtype) -> TransformerEmbeddings:
    """A block shaped like the checkpoint's (its random init is overwritten by the load).

    Not built on the meta device: the first ``normal_`` there imports torch's reference ops (~3 s).
    """
    width = config["hidden_size"]
    return TransformerEmbeddings(
        config["vocab_size"],
        width,
        position=LearnedAbsolute(config["max_position_embeddings"], width, dtype=dtype),
        type_vocab_size=config["type_vocab_size"],
        pad_token_id=config["pad_token_id"],
        layer_norm_eps=config["layer_norm_eps"],
        dropout=config["dropout"],
        dtype=dtype,
    )


def _check_block(tensors: dict[str, Tensor], wanted: dict[str, tuple[int, ...]], path: str | Path) -> None:
    problems = [f"missing {key}" for key in wanted if key not in tensors]
    problems += [
        f"{key} has shape {tuple(tensors[key].shape)}, config.json implies {shape}"
        for key, shape in wanted.items()
        if key in tensors and tuple(tensors[key].shape) != shape
    ]
    if problems:
        raise ValueError(f"checkpoint {path} does not hold a usable embedding block: " + "; ".join(problems))


def _read_block(folder: Path, keys: list[str]) -> dict[str, Tensor]:
    """The embedding-block tensors (prefix stripped, aliases resolved) from the weights file."""
    names = _list_keys(folder)
    prefix = _find_prefix(names)
    if prefix is None:
        raise ValueError(
            f"no embedding block in {folder}: no key ends in 'word_embeddings.weight' "
            f"(tried prefixes {', '.join(repr(p) for p in _PREFIXES)})"
        )
    chosen: dict[str, str] = {}
    for name in names:
        if name.startswith(prefix):
            short = _ALIASES.get(name[len(prefix) :], name[len(prefix) :])
            if short in keys:
                chosen[name] = short
    raw = _load_tensors(folder, list(chosen))
    return {chosen[name]: tensor for name, tensor in raw.items()}


def _find_prefix(names: list[str]) -> str | None:
    present = set(names)
    for prefix in _PREFIXES:
        if prefix + "word_embeddings.weight" in present:
            return prefix
    found = sorted(n[: -len("word_embeddings.weight")] for n in names if n.endswith(".word_embeddings.weight"))
    if found:
        logger.info("embedding block found under prefix %r", found[0])
    return found[0] if found else None


def _weights_file(folder: Path) -> Path:
    for name in _WEIGHT_FILES:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"no weights in {folder}: expected one of {', '.join(_WEIGHT_FILES)}")


def _list_keys(folder: Path) -> list[str]:
    weights = _weights_file(folder)
    if weights.name.endswith(".index.json"):
        return list(json.loads(weights.read_text(encoding="utf-8"))["weight_map"])
    if weights.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(weights), framework="pt") as handle:
            return list(handle.keys())
    return list(_torch_bin(weights))


def _load_tensors(folder: Path, names: list[str]) -> dict[str, Tensor]:
    weights = _weights_file(folder)
    if weights.suffix == ".bin":
        state = _torch_bin(weights)
        return {name: state[name] for name in names}
    shards: dict[Path, list[str]] = {weights: names}
    if weights.name.endswith(".index.json"):
        weight_map = json.loads(weights.read_text(encoding="utf-8"))["weight_map"]
        shards = {}
        for name in names:
            shards.setdefault(folder / weight_map[name], []).append(name)
    from safetensors import safe_open

    out: dict[str, Tensor] = {}
    for shard, shard_names in shards.items():
        with safe_open(str(shard), framework="pt") as handle:
            out.update({name: handle.get_tensor(name) for name in shard_names})
    return out


def _torch_bin(weights: Path) -> dict[str, Tensor]:
    """A ``pytorch_model.bin`` state dict; memory-mapped when it is a zip (torch >= 1.6) file.

    ``weights_only``: a pickle from the internet must never run code. Legacy (non-zip) files
    cannot be memory-mapped, so they are read whole.
    """
    mmap = zipfile.is_zipfile(weights)
    return torch.load(weights, map_location="cpu", weights_only=True, mmap=mmap)


# ---------------------------------------------------------------------- save


def save_embeddings(emb: TransformerEmbeddings, folder: str | Path) -> Path:
    """Write ``emb`` as a BERT checkpoint folder (``config.json`` + ``model.safetensors``).

    ``transformers.BertModel.from_pretrained(folder)`` restores the embedding block exactly
    (the encoder, with ``num_hidden_layers=0``, is empty). Only the BERT layout maps: ``add``,
    a learned position table (``LearnedAbsolute`` or ``LearnedParameter``) and a token table.
    A block without segments is saved with one all-zero segment row, which adds exactly 0.

    Returns the folder.
    """
    _check_savable(emb)
    tensors = {
        "embeddings.word_embeddings.weight": emb.token_embeddings.weight,
        "embeddings.position_embeddings.weight": emb.position.weight,
        "embeddings.token_type_embeddings.weight": _segment_table(emb),
        "embeddings.LayerNorm.weight": emb.norm.weight,
        "embeddings.LayerNorm.bias": emb.norm.bias,
    }
    from safetensors.torch import save as safetensors_bytes

    tensors = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    target = Path(folder)
    atomic_write_bytes(target / "model.safetensors", safetensors_bytes(tensors, metadata={"format": "pt"}))
    atomic_write_json(target / "config.json", _bert_config(emb))
    logger.info("saved the embedding block to %s", target)
    return target


def _check_savable(emb: TransformerEmbeddings) -> None:
    if not isinstance(emb, TransformerEmbeddings):
        raise TypeError(f"save_embeddings expects a TransformerEmbeddings, got {type(emb).__name__}")
    if not isinstance(emb.position, (LearnedAbsolute, LearnedParameter)):
        name = type(emb.position).__name__ if emb.position is not None else "no position scheme"
        raise ValueError(
            f"only learned absolute positions map to a BERT checkpoint; this block has {name}. "
            f"Save it with torch.save(emb.state_dict(), ...) instead"
        )
    if emb.combine_mode != "add":
        raise ValueError(f"only combine='add' maps to a BERT checkpoint; this block has combine={emb.combine_mode!r}")
    if emb.token_scale != 1.0:
        raise ValueError(f"only token_scale=1 maps to a BERT checkpoint; this block has token_scale={emb.token_scale:g}")


def _segment_table(emb: TransformerEmbeddings) -> Tensor:
    if emb.token_type_embeddings is not None:
        return emb.token_type_embeddings.weight
    return emb.norm.weight.new_zeros(1, emb.hidden_size)


def _bert_config(emb: TransformerEmbeddings) -> dict:
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": emb.vocab_size,
        "hidden_size": emb.hidden_size,
        "max_position_embeddings": emb.position.max_len,
        "type_vocab_size": max(emb.type_vocab_size, 1),
        "pad_token_id": emb.pad_token_id if emb.pad_token_id is not None else 0,
        "layer_norm_eps": emb.norm.eps,
        "hidden_dropout_prob": emb.dropout.p,
        "position_embedding_type": "absolute",
        "num_hidden_layers": 0,
        "num_attention_heads": 1,
        "intermediate_size": 4 * emb.hidden_size,
        "dtype": str(emb.norm.weight.dtype).removeprefix("torch."),
    }
