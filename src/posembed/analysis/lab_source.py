"""The inspector's :class:`~posembed.analysis.sources.Source` for a checkpoint written by ``posembed lab``.

Which positions are analysed: the rows the model was trained on. A lab trial sizes its position
table to the longest *evaluated* sequence (for ``charlm`` 8x the training context), so the rows
beyond the training length were never updated; the inspector reads the training length from the
checkpoint's ``meta["config"]`` (``context``, turned into a sequence length per task) and analyses
rows ``0 .. L-1``, capped by whatever hard limit the model has (table size, ``max_len``:
:func:`posembed.lab.training.train.model_position_limit`).

Example:
    >>> training_length({"task": "copy", "config": {"context": 6}})
    (13, 'copy operands of up to context=6 tokens make inputs of 13 tokens')
    >>> training_length({"task": "charlm", "config": {"context": 16}})[0]
    16
    >>> training_length({"task": "copy"})
    (None, 'the checkpoint records no training config')
"""

from __future__ import annotations

from pathlib import Path

import torch

from posembed.analysis.probes import MIN_POSITIONS
from posembed.analysis.scheme_source import scheme_closeness
from posembed.analysis.source_types import Source
from posembed.analysis.text_model import LabTextModel
from posembed.lab.training.train import model_position_limit

__all__ = ["load_lab_checkpoint", "training_length", "analysed_length"]

#: length analysed when neither the model nor the checkpoint bounds it
FALLBACK_LENGTH = 512


def training_length(meta: dict) -> tuple[int | None, str]:
    """The longest input the trial trained on, from ``meta["config"]``, and how it was derived."""
    config = meta.get("config") or {}
    context, task = config.get("context"), config.get("task", meta.get("task"))
    if not isinstance(context, int) or context <= 0:
        return None, "the checkpoint records no training config"
    from posembed.lab.tasks.algorithmic import sequence_length

    try:  # an algorithmic task (by its registry entry's class): context counts operand tokens
        length = sequence_length(task, context)
    except (ValueError, TypeError):  # not an algorithmic task (or not a name at all)
        return context, f"{task} trains on sequences of context={context} tokens"
    return length, f"{task} operands of up to context={context} tokens make inputs of {length} tokens"


def analysed_length(model, meta: dict) -> tuple[int, str]:
    """How many positions (rows ``0 .. T-1``) to analyse, and why, in words for the report."""
    limit = model_position_limit(model)
    trained, how = training_length(meta)
    if (meta.get("config") or {}).get("randomized_positions"):
        trained, how = None, "the trial trained on randomized positions, which reach every row of the table"
    if trained is None:
        length = limit or FALLBACK_LENGTH
        size = f"the model's limit of {limit} positions" if limit else f"{FALLBACK_LENGTH} positions (no limit)"
        return length, f"positions 0..{length - 1} are analysed: {size}; {how}."
    length = max(trained, MIN_POSITIONS) if limit is None else min(max(trained, MIN_POSITIONS), limit)
    beyond = f" of the {limit} the model holds" if limit and limit > length else ""
    untrained = f"; rows {length}..{limit - 1} were never trained and are left out" if limit and limit > length else ""
    floor = f" (raised to the analyses' minimum of {MIN_POSITIONS})" if trained < length else ""
    return length, (
        f"positions 0..{length - 1}{beyond} are analysed (sections 1-5): the training length{floor}, "
        f"as {how}{untrained}."
    )


def _position_table(model, length: int):
    """Rows ``0 .. length-1`` of the absolute positions; untied (TUPE) models keep the scheme out of the input."""
    ids = torch.arange(length)
    vectors = model.scheme(ids) if model.untied else model.embeddings.position_embeddings(ids)
    return vectors.double().numpy()  # (T, C)


def load_lab_checkpoint(folder: str | Path, device: torch.device | None = None) -> Source:
    """Read a checkpoint written by ``posembed lab`` (``posembed_model.json`` + ``model.safetensors``).

    The model stays on the CPU; its forward (the text model) and the scheme's closeness run on
    ``device`` (default: the CPU).
    """
    from posembed.lab.training.checkpoint import load_checkpoint
    from posembed.schemes.base import AbsoluteScheme

    model, meta = load_checkpoint(folder)
    model.eval()
    scheme = model.scheme
    run = ", ".join(f"{key} {meta.get(key, '?')}" for key in ("task", "trial", "step"))
    config = model.config_dict()
    options = ", ".join(f"{key}={config[key]}" for key in ("combine", "inject", "untied") if key in config)
    described = (
        "no positional encoding (NoPE)" if scheme is None else f"{scheme.name} ({scheme.kind.value} scheme; {options})"
    )
    source = Source(name=f"{Path(folder).name} (lab: {run})", family="lab", positions=described)
    source.device = torch.device("cpu" if device is None else device)
    length, why = analysed_length(model, meta)
    source.notes.append(why)
    with torch.no_grad():
        if isinstance(scheme, AbsoluteScheme):
            source.position_table = _position_table(model, length)
            if model.untied:
                source.notes.append(
                    "untied (TUPE) model: the table is the scheme's raw vectors, which feed the attention's "
                    "separate position term (after its own LayerNorm), not the input."
                )
        elif scheme is not None:
            scheme_closeness(source, scheme, length)
        else:
            source.notes.append("no positional encoding (NoPE): no position table; sections 1-4 and 6 are skipped.")
        source.token_table = model.embeddings.token_embeddings.weight.double().numpy()
        if getattr(model.embeddings, "token_type_embeddings", None) is not None:
            source.segment_table = model.embeddings.token_type_embeddings.weight.double().numpy()
    source.text_model = LabTextModel.open(model, meta, source.notes, max_length=length, device=source.device)
    source.notes.append(
        "lab models: the four-term decomposition (section 6) covers Hugging Face BERT/GPT-2 checkpoints only."
    )
    return source
