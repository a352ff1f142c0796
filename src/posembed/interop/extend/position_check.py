"""Does a real transformers model give the same hidden states padded, batched and packed?

:func:`check_positions` runs the same token sequences through the model (``AutoModel``, or
``AutoModelForCausalLM`` for a decoder; eval mode, fp32) unpadded one at a time, then
right-padded, left-padded (with the model's default position ids, then with the position-id
recipe it needs) and batched with a longer sequence, and for a causal model packed into one row
(positions running on or restarting per document; a causal or a block-diagonal mask). For each
setting it reports the largest difference of the real tokens' last hidden states from the
unpadded run, and whether it is within ``tolerance``.

Recipes: RoBERTa-style models number positions from ``padding_idx + 1``
(``position_ids = cumsum(mask) * mask + padding_idx``; transformers derives it from the pad
ids itself); other models need ``position_ids = cumsum(mask) - 1`` under left padding (pads
clamped to 0). Learned absolute positions shift under left padding without it; rotary ones do
not (only differences of positions reach the logits), which the report shows.

Without a tokenizer in the folder (random test models), token ids are generated (seeded) and
the report says so. transformers is imported lazily.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from posembed.interop.hf.checks import check_hf_folder
from posembed.interop.rope.settings import has_rope

__all__ = ["check_positions", "PositionReport", "SettingResult", "format_position_report", "DEFAULT_TEXTS"]

logger = logging.getLogger(__name__)

#: sequences of different lengths, so that padding shows
DEFAULT_TEXTS = (
    "Where is the token?",
    "Position embeddings tell a transformer where each token sits.",
    "Padding on the left shifts every absolute position unless the position ids follow the mask.",
)
#: files one of which a tokenizer needs
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)
#: model types that number positions from padding_idx + 1
ROBERTA_LIKE = frozenset(
    {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "data2vec-text", "roberta-prelayernorm"}
)
#: lengths of the generated sequences (no tokenizer), and of the longer companion
GENERATED_LENGTHS = (5, 9, 13)


@dataclass(frozen=True)
class SettingResult:
    """One setting: its name, the positions used, the largest difference, pass / fail.

    ``recommended``: what a correct stack does (these must pass); the others show what goes wrong.
    """

    setting: str
    positions: str
    max_diff: float
    passed: bool
    recommended: bool


@dataclass(frozen=True)
class PositionReport:
    folder: str
    model_type: str
    model_class: str
    causal: bool
    ids_source: str
    position_kind: str
    recipe: str
    tolerance: float
    results: tuple[SettingResult, ...]

    @property
    def ok(self) -> bool:
        """Every recommended setting matches the unpadded run."""
        return all(r.passed for r in self.results if r.recommended)


def _is_causal(config: Any) -> bool:
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in (config.architectures or ())):
        return True
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    return (
        config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    )


def _first_line(error: Exception) -> str:
    """transformers' messages run over several lines; the CLI prints one."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _load(folder: Path) -> tuple[Any, bool]:
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    config_dict = check_hf_folder(folder)  # damaged files and absurd sizes: one CheckpointError first
    kind = config_dict.get("position_embedding_type", "absolute")
    if kind not in ("absolute", None):
        raise ValueError(
            f"{folder} uses position_embedding_type={kind!r}: its positions are relative, so padding and "
            "position ids cannot shift them; check-positions covers absolute and rotary models"
        )

    try:
        config = AutoConfig.from_pretrained(str(folder))
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{folder} is not a transformers checkpoint: {_first_line(error)}") from error
    causal = _is_causal(config)
    loader = AutoModelForCausalLM if causal else AutoModel
    try:
        model = loader.from_pretrained(str(folder), dtype=torch.float32)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(
            f"cannot load {folder} with {loader.__name__} (unsupported architecture?): {_first_line(error)}"
        ) from error
    return model.eval(), causal


def _token_ids(folder: Path, config: Any, texts: Sequence[str] | None) -> tuple[list[list[int]], list[int], str]:
    """Token id lists, a longer companion sequence, and where the ids came from."""
    if any((folder / name).is_file() for name in TOKENIZER_FILES):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        texts = list(texts or DEFAULT_TEXTS)
        ids = [tokenizer(text)["input_ids"] for text in texts]
        return ids, tokenizer(" ".join(texts * 2))["input_ids"], "tokenizer"
    if texts:
        raise ValueError(
            f"{folder} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}); "
            "leave the texts out to use generated ids"
        )
    specials = [i for i in (config.pad_token_id, config.bos_token_id, config.eos_token_id) if isinstance(i, int)]
    low = max([i for i in specials if i < config.vocab_size // 2] + [-1]) + 1
    generator = torch.Generator().manual_seed(0)

    def draw(n: int) -> list[int]:
        return torch.randint(low, config.vocab_size, (n,), generator=generator).tolist()

    ids = [draw(n) for n in GENERATED_LENGTHS]
    return ids, draw(3 * max(GENERATED_LENGTHS)), "generated ids (no tokenizer in the folder)"


def _recipe(config: Any) -> tuple[str, Callable[[Tensor], Tensor]]:
    if config.model_type in ROBERTA_LIKE:
        pad = config.pad_token_id
        return f"position_ids = cumsum(mask) * mask + {pad} (padding_idx + 1 onwards)", lambda m: m.cumsum(-1) * m + pad
    return "position_ids = cumsum(mask) - 1 (pads clamped to 0)", lambda m: (m.cumsum(-1) - 1).clamp(min=0)


def _position_kind(config: Any) -> str:
    if has_rope(config.to_dict()):
        return "rotary (relative: a shift of every position cancels)"
    if config.model_type in ROBERTA_LIKE:
        return "learned absolute, numbered from padding_idx + 1"
    return "absolute (learned or fixed)" if getattr(config, "max_position_embeddings", None) else "unknown"


def _hidden(model: Any, ids: Tensor, **kwargs) -> Tensor:
    with torch.no_grad():
        return model(input_ids=ids, output_hidden_states=True, **kwargs).hidden_states[-1]  # (B, T, C)


def _padded(seqs: list[list[int]], pad: int, left: bool) -> tuple[Tensor, Tensor, list[slice]]:
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    spans = []
    for row, seq in enumerate(seqs):
        span = slice(width - len(seq), width) if left else slice(0, len(seq))
        ids[row, span], mask[row, span] = torch.tensor(seq), 1
        spans.append(span)
    return ids, mask, spans


def _diff(out: Tensor, rows: Sequence[int], spans: Sequence[slice], refs: Sequence[Tensor]) -> float:
    return max(float((out[row, span] - ref).abs().max()) for row, span, ref in zip(rows, spans, refs))


def _batch_results(model, seqs, refs, pad, recipe_text, recipe, longer) -> list[tuple[str, str, float, bool]]:
    rows = list(range(len(seqs)))
    results = []
    for left in (False, True):
        ids, mask, spans = _padded(seqs, pad, left)
        side = "left" if left else "right"
        results.append(
            (
                f"{side}-padded",
                "model default",
                _diff(_hidden(model, ids, attention_mask=mask), rows, spans, refs),
                not left,
            )
        )
        if left:
            out = _hidden(model, ids, attention_mask=mask, position_ids=recipe(mask))
            results.append((f"{side}-padded", recipe_text, _diff(out, rows, spans, refs), True))
    ids, mask, spans = _padded(seqs + [longer], pad, False)
    out = _hidden(model, ids, attention_mask=mask)
    results.append(
        ("batched with a longer sequence (right-padded)", "model default", _diff(out, rows, spans[:-1], refs), True)
    )
    return results


def _packed_results(model, seqs, refs) -> list[tuple[str, str, float, bool]]:
    lengths = [len(s) for s in seqs]
    ids = torch.tensor([sum(seqs, [])])  # (1, T)
    doc = torch.repeat_interleave(torch.arange(len(seqs)), torch.tensor(lengths))  # (T,)
    restart = torch.cat([torch.arange(n) for n in lengths])[None]  # (1, T)
    causal = torch.ones(len(doc), len(doc), dtype=torch.bool).tril()
    block = ((doc[:, None] == doc[None, :]) & causal)[None, None]  # (1, 1, T, T)
    starts = torch.tensor([0] + lengths).cumsum(0).tolist()
    spans = [slice(a, b) for a, b in zip(starts, starts[1:])]
    rows = [0] * len(seqs)
    results = []
    for positions, pos_text in ((None, "running on"), (restart, "per document")):
        for mask, mask_text in ((None, "causal mask"), (block, "block-diagonal mask")):
            kwargs = {} if positions is None else {"position_ids": positions}
            if mask is not None:
                kwargs["attention_mask"] = mask
            out = _hidden(model, ids, **kwargs)
            recommended = positions is not None and mask is not None
            results.append(
                (f"packed documents, {mask_text}", f"positions {pos_text}", _diff(out, rows, spans, refs), recommended)
            )
    return results


def check_positions(
    folder: str | Path, texts: Sequence[str] | None = None, *, tolerance: float = 1e-4
) -> PositionReport:
    """Compare a model's hidden states unpadded, padded, batched and packed.

    Args:
        folder: a transformers checkpoint folder (``config.json`` and weights).
        texts: the texts to run (default :data:`DEFAULT_TEXTS`); needs a tokenizer in the
            folder, else generated token ids are used (``texts`` must then be left out).
        tolerance: the largest difference that passes (fp32).

    Raises:
        FileNotFoundError: no such folder.
        ValueError: not a checkpoint, an architecture transformers cannot load, texts without a tokenizer.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder} is not a checkpoint: it has no config.json")
    model, causal = _load(folder)
    config = model.config
    seqs, longer, source = _token_ids(folder, config, texts)
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if limit:
        budget = limit - 2 if config.model_type in ROBERTA_LIKE else limit
        seqs, longer = [s[: budget // len(seqs)] for s in seqs], longer[:budget]
    pad = config.pad_token_id if isinstance(config.pad_token_id, int) else 0
    recipe_text, recipe = _recipe(config)
    refs = [_hidden(model, torch.tensor([seq]))[0] for seq in seqs]  # unpadded, one at a time
    raw = _batch_results(model, seqs, refs, pad, recipe_text, recipe, longer)
    if causal:
        raw += _packed_results(model, seqs, refs)
    results = tuple(SettingResult(name, pos, diff, diff <= tolerance, rec) for name, pos, diff, rec in raw)
    logger.info("checked positions of %s: %d settings", folder, len(results))
    return PositionReport(str(folder), config.model_type, type(model).__name__, causal, source, _position_kind(config),
                          recipe_text, tolerance, results)  # fmt: skip


def report_json(report: PositionReport) -> dict:
    return {**asdict(report), "ok": report.ok}


def format_position_report(report: PositionReport) -> str:
    """A plain-text table: one line per setting, pass / fail, then the recipe and the verdict."""
    lines = [
        f"model: {report.folder} ({report.model_class}, model_type {report.model_type}, "
        f"{'causal' if report.causal else 'encoder'})",
        f"token ids: {report.ids_source}",
        f"positions: {report.position_kind}",
        f"{'setting':46s} {'positions':64s} {'max diff':>9s}  result",
    ]
    for r in report.results:
        verdict = "pass" if r.passed else ("FAIL" if r.recommended else "fail (the trap this setting shows)")
        lines.append(f"{r.setting:46s} {r.positions:64s} {r.max_diff:9.2e}  {verdict}")
    lines.append(f"recipe under left padding: {report.recipe}")
    lines.append(f"result: {'OK' if report.ok else 'FAILED'} (tolerance {report.tolerance:g}, fp32)")
    return "\n".join(lines)
