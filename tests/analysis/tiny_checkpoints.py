"""Tiny random Hugging Face checkpoints written into a temporary folder for the inspector's tests."""

from __future__ import annotations

from pathlib import Path


def save_tiny_llama(
    folder: Path, tokenizer_from: Path | None = None, rope_parameters: dict | None = None, kv_heads: int = 4
) -> Path:
    """A 2-layer LlamaModel (rotary positions, no position table); optionally with a copied tokenizer.

    ``rope_parameters`` (transformers 5.x spelling) sets the RoPE scaling, e.g. YaRN; the model then
    declares ``factor x original_max_position_embeddings`` positions.
    """
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    extra = {}
    if rope_parameters is not None:
        extra["rope_parameters"] = rope_parameters
    original = (rope_parameters or {}).get("original_max_position_embeddings")
    config = LlamaConfig(
        vocab_size=30522,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=int(original * rope_parameters["factor"]) if original else 128,
        **extra,
    )
    LlamaModel(config).save_pretrained(folder)
    if tokenizer_from is not None:
        AutoTokenizer.from_pretrained(str(tokenizer_from)).save_pretrained(folder)
    return folder


def save_tiny_gpt2(folder: Path) -> Path:
    """A 1-layer GPT2Model with learned positions (wpe) and no tokenizer."""
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=1, n_head=4)
    GPT2Model(config).save_pretrained(folder)
    return folder


def train_lab_charlm(out: Path, text: Path, variants: str = "base,untied") -> dict[str, Path]:
    """Checkpoints the lab runner itself writes: char-LM trials of a learned table, 2 steps each.

    The charlm table holds 8x the training context (16 -> 128 rows). Returns ``{variant: folder}``.
    """
    import json

    from posembed.lab.config import apply_overrides
    from posembed.lab.presets import get_preset
    from posembed.lab.sweep.runner import run_experiment

    overrides = ["tasks=charlm", "schemes=learned", f"variants={variants}", "steps=2", "dim=16", "heads=2"]
    overrides += ["eval_batches=1", "batch=2", "charlm.context=16", f"charlm.text={text}"]
    experiment = apply_overrides(get_preset("smoke"), overrides)
    run_experiment(experiment, out, progress=False)
    folders = {}
    for config in sorted((out / "checkpoints").glob("*/posembed_model.json")):
        folders[json.loads(config.read_text())["config"]["variant"]] = config.parent
    return folders


def save_lab_decoder(folder: Path, scheme, context: int = 32, vocab_size: int = 64) -> Path:
    """A 2-layer lab Decoder (width 32, 4 heads) with ``scheme`` (None: NoPE), saved by the lab's checkpoint writer.

    The meta records a char-LM trial of ``context`` characters, as the lab runner writes it.
    """
    from posembed.lab.training.checkpoint import save_checkpoint
    from posembed.nn.model.transformer import Decoder

    model = Decoder(vocab_size, dim=32, depth=2, num_heads=4, scheme=scheme)
    meta = {"task": "charlm", "trial": "tiny", "step": 0, "config": {"task": "charlm", "context": context}}
    return save_checkpoint(model, folder, meta)
