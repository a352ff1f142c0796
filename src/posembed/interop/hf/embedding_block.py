"""The embedding block of a BERT-family checkpoint, in and out: :func:`load_embeddings` / :func:`save_embeddings`.

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
    >>> import torch
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

import logging
from pathlib import Path

from torch import Tensor

from posembed._utils.io import atomic_write_bytes, atomic_write_json
from posembed.errors import CheckpointError
from posembed.interop.hf.checks import load_torch_bin, read_hf_config, shard_map, weight_shapes, weights_file
from posembed.nn.embedding.block import TransformerEmbeddings
from posembed.schemes.absolute.learned import LearnedAbsolute, LearnedParameter

__all__ = ["load_embeddings", "save_embeddings", "read_embedding_config", "bert_family_problem", "HF_KEY_MAP"]

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
#: model types known not to hold a BERT-style embedding block, with how people write them
_OTHER_FAMILIES = {
    "gpt2": "GPT-2",
    "gpt_neox": "GPT-NeoX",
    "gptj": "GPT-J",
    "llama": "Llama",
    "mistral": "Mistral",
    "mixtral": "Mixtral",
    "qwen2": "Qwen2",
    "qwen3": "Qwen3",
    "gemma": "Gemma",
    "gemma2": "Gemma 2",
    "gemma3": "Gemma 3",
    "phi": "Phi",
    "phi3": "Phi-3",
    "opt": "OPT",
    "bloom": "BLOOM",
    "falcon": "Falcon",
    "mpt": "MPT",
    "t5": "T5",
    "bart": "BART",
    "olmo": "OLMo",
    "modernbert": "ModernBERT",
}
#: what the embedding-block readers support, for error messages
BERT_SCOPE = "BERT-family checkpoints (BERT, RoBERTa, DistilBERT, ELECTRA, MiniLM, ...)"


# ---------------------------------------------------------------------- config


def read_embedding_config(path: str | Path) -> dict:
    """The embedding-block settings of ``path/config.json`` (with BERT's defaults).

    Returns keys ``vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
    pad_token_id, layer_norm_eps, dropout, model_type``.

    Raises:
        CheckpointError: config.json is not UTF-8 JSON holding an object, or a size is not a
            positive integer (naming the key).
        ValueError: not a BERT-family config (the message says what the folder holds).
    """
    folder = _folder(path)
    raw = read_hf_config(folder)
    config_file = folder / "config.json"
    problem = bert_family_problem(raw)
    if problem:
        raise ValueError(f"posembed reads the embedding block of {BERT_SCOPE}; {folder} {problem}")
    kind = raw.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise ValueError(
            f"{config_file} has position_embedding_type={kind!r}; only 'absolute' maps to an embedding block "
            f"(relative positions belong to the attention layer: posembed.ShawRelative)"
        )
    model_type = raw.get("model_type", "bert")
    return {
        "vocab_size": raw["vocab_size"],
        "hidden_size": raw.get("embedding_size", raw.get("hidden_size", raw.get("dim"))),
        "max_position_embeddings": raw["max_position_embeddings"],
        "type_vocab_size": raw.get("type_vocab_size", 0 if model_type == "distilbert" else 2),
        "pad_token_id": raw.get("pad_token_id", 0),
        "layer_norm_eps": _number(raw, "layer_norm_eps", 1e-12, config_file),
        "dropout": _number(raw, "hidden_dropout_prob", _number(raw, "dropout", 0.1, config_file), config_file),
        "model_type": model_type,
    }


def bert_family_problem(config: dict) -> str | None:
    """``None`` for a BERT-family config; else what the folder holds instead, in words.

    >>> bert_family_problem({"model_type": "gpt2", "n_positions": 1024})
    "is a GPT-2 model (model_type 'gpt2')"
    >>> bert_family_problem({"model_type": "bert", "vocab_size": 9, "hidden_size": 8, "max_position_embeddings": 4})
    """
    model_type = config.get("model_type", "bert")
    if not isinstance(model_type, str):
        return f"has model_type={model_type!r}, not a name"
    if model_type in _OTHER_FAMILIES:
        return f"is a {_OTHER_FAMILIES[model_type]} model (model_type {model_type!r})"
    missing = [k for k in ("vocab_size", "max_position_embeddings") if config.get(k) is None]
    if all(config.get(k) is None for k in ("embedding_size", "hidden_size", "dim")):
        missing.append("hidden_size")
    if missing:
        return f"has a config.json without {', '.join(missing)} (model_type {model_type!r})"
    return None


def _number(raw: dict, key: str, default: float, path: Path) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CheckpointError(path, f"says {key}={value!r}; it must be a number")
    return float(value)


# ---------------------------------------------------------------------- load


def load_embeddings(path: str | Path, *, device=None, dtype=None) -> TransformerEmbeddings:
    """Build a :class:`TransformerEmbeddings` holding a checkpoint's embedding block.

    Args:
        path: a Hugging Face model folder (``config.json`` + ``model.safetensors``, a sharded
            ``model.safetensors.index.json``, or ``pytorch_model.bin``).
        device, dtype: where and in which dtype to put the weights (default: CPU, float32).

    Raises:
        FileNotFoundError: no folder, config or weights file.
        CheckpointError: a damaged, unsafe or truncated file, or missing or mis-shaped keys (all
            listed), found before the block is built.
        ValueError: not a BERT-family checkpoint, or a non-absolute position type.
    """
    config = read_embedding_config(path)
    if config["model_type"] in _ROBERTA_LIKE:
        logger.warning(
            "%s numbers positions from pad_token_id + 1 = %d: pass position_ids explicitly",
            config["model_type"],
            (config["pad_token_id"] or 0) + 1,
        )
    wanted = _expected_shapes(config)
    folder = _folder(path)
    shapes = weight_shapes(folder)  # the safetensors headers (or index) read and checked, no tensor data
    names = _block_names(folder, list(wanted))
    if shapes is not None:
        _check_block({short: shapes[name] for name, short in names.items()}, wanted, path)
    tensors = {names[name]: tensor for name, tensor in _load_tensors(folder, list(names)).items()}
    _check_block({key: tuple(t.shape) for key, t in tensors.items()}, wanted, path)
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


def _check_block(shapes: dict[str, tuple[int, ...]], wanted: dict[str, tuple[int, ...]], path: str | Path) -> None:
    problems = [f"missing {key}" for key in wanted if key not in shapes]
    problems += [
        f"{key} has shape {tuple(shapes[key])}, config.json implies {shape}"
        for key, shape in wanted.items()
        if key in shapes and tuple(shapes[key]) != shape
    ]
    if problems:
        raise CheckpointError(path, "does not hold a usable embedding block: " + "; ".join(problems))


def _block_names(folder: Path, keys: list[str]) -> dict[str, str]:
    """``checkpoint name -> block key`` (prefix stripped, aliases resolved) for the wanted ``keys``."""
    names = _list_keys(folder)
    prefix = _find_prefix(names)
    if prefix is None:
        raise ValueError(
            f"posembed reads the embedding block of {BERT_SCOPE}; the weights in {folder} hold none "
            f"(no key ends in 'word_embeddings.weight')"
        )
    chosen: dict[str, str] = {}
    for name in names:
        if name.startswith(prefix):
            short = _ALIASES.get(name[len(prefix) :], name[len(prefix) :])
            if short in keys:
                chosen[name] = short
    return chosen


def _find_prefix(names: list[str]) -> str | None:
    present = set(names)
    for prefix in _PREFIXES:
        if prefix + "word_embeddings.weight" in present:
            return prefix
    found = sorted(n[: -len("word_embeddings.weight")] for n in names if n.endswith(".word_embeddings.weight"))
    if found:
        logger.info("embedding block found under prefix %r", found[0])
    return found[0] if found else None


def _list_keys(folder: Path) -> list[str]:
    weights = weights_file(folder)
    if weights.name.endswith(".index.json"):
        return list(shard_map(weights))
    if weights.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(weights), framework="pt") as handle:  # its header was read by check_hf_folder
            return list(handle.keys())
    return list(load_torch_bin(weights))


def _load_tensors(folder: Path, names: list[str]) -> dict[str, Tensor]:
    weights = weights_file(folder)
    shards: dict[Path, list[str]] = {weights: names}
    if weights.name.endswith(".index.json"):
        where = shard_map(weights)
        shards = {}
        for name in names:
            shards.setdefault(where[name], []).append(name)
    out: dict[str, Tensor] = {}
    for shard, shard_names in shards.items():
        if shard.suffix == ".bin":
            state = load_torch_bin(shard)
            missing = [name for name in shard_names if name not in state]
            if missing:
                raise CheckpointError(shard, f"lacks {', '.join(missing)}, which its index places there")
            out.update({name: state[name] for name in shard_names})
            continue
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(shard), framework="pt") as handle:
                out.update({name: handle.get_tensor(name) for name in shard_names})
        except SafetensorError as error:
            raise CheckpointError(shard, f"is not a readable safetensors file: {error}") from None
    return out


# ---------------------------------------------------------------------- save


def save_embeddings(emb: TransformerEmbeddings, folder: str | Path) -> Path:
    """Write ``emb`` as a BERT checkpoint folder (``config.json`` + ``model.safetensors``).

    ``transformers.BertModel.from_pretrained(folder)`` restores the embedding block exactly
    (the encoder, with ``num_hidden_layers=0``, is empty). Only the BERT layout maps: ``add``,
    a learned position table (``LearnedAbsolute`` or ``LearnedParameter``) and a token table.
    A block without segments is saved with one all-zero segment row, which adds exactly 0.

    Returns the folder.
    """
    position = _savable_position(emb)
    tensors = {
        "embeddings.word_embeddings.weight": emb.token_embeddings.weight,
        "embeddings.position_embeddings.weight": position.weight,
        "embeddings.token_type_embeddings.weight": _segment_table(emb),
        "embeddings.LayerNorm.weight": emb.norm.weight,
        "embeddings.LayerNorm.bias": emb.norm.bias,
    }
    from safetensors.torch import save as safetensors_bytes

    tensors = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    target = Path(folder)
    atomic_write_bytes(target / "model.safetensors", safetensors_bytes(tensors, metadata={"format": "pt"}))
    atomic_write_json(target / "config.json", _bert_config(emb, position))
    logger.info("saved the embedding block to %s", target)
    return target


def _savable_position(emb: TransformerEmbeddings) -> LearnedAbsolute | LearnedParameter:
    """``emb``'s learned position table, once ``emb`` is checked to map to a BERT checkpoint."""
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
        raise ValueError(
            f"only token_scale=1 maps to a BERT checkpoint; this block has token_scale={emb.token_scale:g}"
        )
    return emb.position


def _segment_table(emb: TransformerEmbeddings) -> Tensor:
    if emb.token_type_embeddings is not None:
        return emb.token_type_embeddings.weight
    return emb.norm.weight.new_zeros(1, emb.hidden_size)


def _bert_config(emb: TransformerEmbeddings, position: LearnedAbsolute | LearnedParameter) -> dict:
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": emb.vocab_size,
        "hidden_size": emb.hidden_size,
        "max_position_embeddings": position.max_len,
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
