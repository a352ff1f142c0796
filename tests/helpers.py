"""Test helpers: the one tolerance helper (per dtype) and shared fixtures' plumbing."""

from __future__ import annotations

import torch

#: (atol, rtol) per dtype: fp32 tight, half types explicitly looser
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-6, 1e-5),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 2e-3),
}


def assert_close(
    actual: torch.Tensor, expected: torch.Tensor, *, atol: float | None = None, rtol: float | None = None, msg: str = ""
) -> None:
    """Full-tensor comparison with the tolerance of ``actual``'s dtype (overridable)."""
    default_atol, default_rtol = TOLERANCES.get(actual.dtype, (1e-6, 1e-5))
    torch.testing.assert_close(
        actual,
        expected.to(actual.dtype) if expected.dtype != actual.dtype else expected,
        atol=default_atol if atol is None else atol,
        rtol=default_rtol if rtol is None else rtol,
        msg=(lambda m: f"{msg}\n{m}") if msg else None,
    )


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


#: the tokenizer files a random BERT borrows from all-MiniLM-L6-v2 (its vocabulary of 30522)
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def save_random_bert(folder, minilm_path, *, hidden_size: int, max_position_embeddings: int):
    """A 1-layer, 2-head random ``BertModel`` (seed 0) saved in ``folder`` with MiniLM's tokenizer:
    the loading, extending and encoding code runs on it as on a real checkpoint, quickly."""
    import shutil

    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=30522,
        hidden_size=hidden_size,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=max_position_embeddings,
    )
    transformers.BertModel(config).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copyfile(minilm_path / name, folder / name)
    return folder
