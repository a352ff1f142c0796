"""What a model does with positions, beyond its tables: the scheme, the RoPE config, the q/k weights.

:func:`load_for_inspect` is ``posembed inspect MODEL``'s loader: :func:`~posembed.analysis.sources.load_source`
plus :func:`attach_details`, which gives the report sections about the model's own scheme what they need:

- a Hugging Face RoPE checkpoint: ``check_rope_config`` (per-pair wavelengths, scaling, attention
  factor, trained and effective context, the same reader as ``posembed rope check``), the scheme
  of the config's first layer type (``interop.rope.config.rotary_from_settings``: YaRN, NTK,
  Llama 3 ... honoured) and every layer's ``q_proj`` / ``k_proj`` weights;
- a lab checkpoint: the model's own scheme (``None``: NoPE), its attention weights and training length.

:func:`position_kind` names the kind the report is organised by.

Example:
    >>> from posembed.analysis.sources import load_scheme
    >>> position_kind(load_scheme("alibi", dim=16, max_len=32)), position_kind(load_scheme("rope", dim=16, max_len=32))
    ('bias', 'rotary')
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import torch

from posembed.analysis.lab_source import training_length
from posembed.analysis.scheme_source import rotary_closeness
from posembed.analysis.source_types import AttentionWeights, Source
from posembed.analysis.sources import load_source
from posembed.schemes.base import BiasScheme, RotaryScheme
from posembed.schemes.bias.nope import NoPE

__all__ = ["KINDS", "position_kind", "load_for_inspect", "attach_details", "lab_attention"]

logger = logging.getLogger(__name__)

#: the kinds of positions the report is organised by
KINDS = ("absolute", "rotary", "bias", "relative", "nope")
#: longest rotary closeness matrix the report draws (T x T float64)
CLOSENESS_POSITIONS = 512
_HF_QK = re.compile(r"(?:^|\.)layers\.(\d+)\.self_attn\.(q|k)_proj\.weight$")
#: notes of the loaders that name the old fixed section numbers: the report now says what is skipped itself
_STALE = ("are skipped", "is skipped", "section 2 measures posembed's RoPE", "(section 6)", "is skipped too")


def position_kind(source: Source) -> str:
    """``absolute`` (a position table), ``rotary``, ``bias`` (a bias from positions alone),
    ``relative`` (a bias that reads q/k: Shaw, CoPE, DeBERTa) or ``nope``."""
    scheme = source.scheme
    if source.position_table is not None:
        return "absolute"
    if isinstance(scheme, RotaryScheme) or source.rope_report is not None:
        return "rotary"
    if source.nope or isinstance(scheme, NoPE):
        return "nope"
    if isinstance(scheme, BiasScheme):
        return "relative" if scheme.needs_qk else "bias"
    if source.positions.startswith("rotary"):
        return "rotary"
    return "relative" if source.closeness is not None else "nope" if source.family == "lab" else "relative"


def load_for_inspect(model: str | Path | None, device: torch.device | None = None) -> Source:
    """Load ``model`` (see :func:`~posembed.analysis.sources.load_source`) with the scheme details attached;
    its model and matrices run on ``device`` (default: the CPU)."""
    source = load_source(model, device)
    folder = None if model is None else Path(model).expanduser()
    return attach_details(source, folder)


def attach_details(source: Source, folder: Path | None) -> Source:
    """Fill ``scheme``, ``attention``, ``rope_report`` and ``trained_length`` where the folder holds them."""
    if folder is not None and (folder / "posembed_model.json").exists():
        _attach_lab(source, folder)
    elif folder is not None and source.position_table is None and source.positions.startswith("rotary"):
        _attach_hf_rotary(source, folder)
    source.notes[:] = [note for note in source.notes if not any(stale in note for stale in _STALE)]
    return source


def lab_attention(model) -> list[AttentionWeights]:
    """Each block's ``q_proj`` / ``k_proj`` weights of a :mod:`posembed.nn.model.transformer` model."""
    found = []
    for block in model.blocks:
        attn = block.attn
        found.append(AttentionWeights(attn.q_proj.weight.detach().double(), attn.k_proj.weight.detach().double(),
                                      attn.num_heads, attn.num_heads, attn.head_dim))  # fmt: skip
    return found


def _attach_lab(source: Source, folder: Path) -> None:
    model = getattr(source.text_model, "model", None)
    meta = json.loads((folder / "posembed_model.json").read_text(encoding="utf-8"))
    source.trained_length = training_length(meta)[0]
    if model is None:
        return
    source.scheme = model.scheme
    source.nope = model.scheme is None
    source.attention = lab_attention(model)


def _attach_hf_rotary(source: Source, folder: Path) -> None:
    from posembed.interop.rope.config import rotary_from_settings
    from posembed.interop.rope_check.check import check_rope_config

    try:
        report = check_rope_config(folder)
        layer = report.layers[0]
        scheme = rotary_from_settings(layer.settings, layout=layer.settings.layout)
    except (ValueError, TypeError, KeyError) as error:
        source.notes.append(f"the config's RoPE could not be read ({error}); the rotary sections are skipped.")
        return
    source.rope_report, source.scheme, source.trained_length = report, scheme, layer.trained_context
    source.positions = _describe_rope(report, type(scheme).__name__)
    length = min(CLOSENESS_POSITIONS, layer.effective_context or CLOSENESS_POSITIONS)
    source.closeness = rotary_closeness(scheme, length, source.device)
    source.closeness_name = f"{type(scheme).__name__} logit of ones"
    source.attention = _hf_attention(folder, layer.settings)
    if len(report.layers) > 1:
        source.notes.append(f"{len(report.layers)} layer types with their own RoPE: the rotary sections show "
                            f"the first, {layer.settings.layer_type!r}.")  # fmt: skip


def _describe_rope(report, class_name: str) -> str:
    layer = report.layers[0]
    s = layer.settings
    if s.rope_type == "default":
        scaling = "no scaling"
    else:
        scaling = f"{s.rope_type} scaling, factor {s.factor:g}"
        if layer.trained_context and layer.effective_context and layer.effective_context != layer.trained_context:
            scaling += f", from {layer.trained_context} to {layer.effective_context} positions"
    factor = f", attention factor {layer.attention_factor:.4g}" if layer.attention_factor not in (None, 1.0) else ""
    return (
        f"rotary positions ({class_name}: RoPE theta {s.theta:g}, {scaling}{factor}; head_dim {s.head_dim}, "
        f"rotary_dim {s.rotary_dim}, layout {s.layout}; model_type {report.model_type!r}) applied to queries "
        "and keys; no absolute position table"
    )


def _hf_attention(folder: Path, settings) -> list[AttentionWeights]:
    """``layers.N.self_attn.{q,k}_proj.weight`` of every layer (none when the names differ)."""
    from safetensors import safe_open

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    heads = int(config.get("num_attention_heads") or 0)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    files = sorted(folder.glob("*.safetensors"))
    if not files or not heads:
        return []
    layers: dict[int, dict[str, torch.Tensor]] = {}
    with safe_open(str(files[0]), framework="pt") as handle:
        for key in handle.keys():
            match = _HF_QK.search(key)
            if match:
                layers.setdefault(int(match.group(1)), {})[match.group(2)] = handle.get_tensor(key).double()
    found = []
    for index in sorted(layers):
        pair = layers[index]
        if "q" in pair and "k" in pair and pair["q"].shape[0] == heads * settings.head_dim:
            found.append(AttentionWeights(pair["q"], pair["k"], heads, kv_heads, settings.head_dim))
    logger.info("read q/k projections of %d layers from %s", len(found), files[0].name)
    return found
