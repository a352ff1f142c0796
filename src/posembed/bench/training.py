"""Training throughput (tokens/s) of posembed's ``Decoder`` against a nanoGPT-style model.

The nanoGPT model (Karpathy) is not on PyPI, so a minimal equivalent of its ``model.py``
is written in :mod:`posembed.bench.nanogpt_ref`: token + learned position embeddings, pre-LN
blocks with fused qkv and causal SDPA, GELU MLP, final LayerNorm, tied head, no biases. Both use the small CPU configuration of
nanoGPT's README on tinyshakespeare characters (4 layers, 4 heads, width 128, block 64,
batch 12, dropout 0) and AdamW; their steps are interleaved in one process.

On CUDA (``device="cuda"``) every model trains there as the lab trains on it
(:mod:`posembed.lab.train`): bf16 autocast and fused AdamW; batches are cut on the CPU and
copied over, as nanoGPT's loop does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posembed.bench.harness import Row, as_device, compare, median
from posembed.bench.nanogpt_ref import NanoGPT

SECTION = "lab training throughput"
REFERENCE = "nanoGPT-style (learned absolute)"
CONFIG = {"depth": 4, "heads": 4, "dim": 128, "block": 64, "batch": 12}


def _data() -> tuple[torch.Tensor, int]:
    from posembed.lab.data import DEFAULT_TEXT, resolve_text_path

    text = resolve_text_path(DEFAULT_TEXT).read_text(encoding="utf-8")
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    return torch.tensor([lookup[c] for c in text[:200_000]], dtype=torch.long), len(chars)


def _models(vocab: int) -> dict[str, nn.Module]:
    from posembed.model import Decoder
    from posembed.schemes.alibi import ALiBi
    from posembed.schemes.learned import LearnedAbsolute
    from posembed.schemes.rotary import RotaryEmbedding

    c = CONFIG
    common = {"dim": c["dim"], "depth": c["depth"], "num_heads": c["heads"], "dropout": 0.0}
    head_dim = c["dim"] // c["heads"]
    return {
        REFERENCE: NanoGPT(vocab, dim=c["dim"], depth=c["depth"], heads=c["heads"], block=c["block"]),
        "posembed Decoder (learned absolute)": Decoder(vocab, scheme=LearnedAbsolute(c["block"], c["dim"]), **common),
        "posembed Decoder (RoPE)": Decoder(vocab, scheme=RotaryEmbedding(head_dim, max_len=c["block"]), **common),
        "posembed Decoder (ALiBi)": Decoder(vocab, scheme=ALiBi(c["heads"]), **common),
    }


def _step(model: nn.Module, data: torch.Tensor, vocab: int, device: torch.device):
    from posembed.lab.train import autocast

    fused = {"fused": True} if device.type == "cuda" else {}  # as the lab's optimizer on CUDA
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **fused)
    generator = torch.Generator().manual_seed(0)
    block, batch = CONFIG["block"], CONFIG["batch"]

    def step():
        start = torch.randint(0, len(data) - block - 1, (batch,), generator=generator)
        x = torch.stack([data[s : s + block] for s in start]).to(device)
        y = torch.stack([data[s + 1 : s + block + 1] for s in start]).to(device)
        with autocast(device):
            loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def run(quick: bool = False, repeats: int | None = None, device: str | torch.device | None = None) -> list[Row]:
    """Interleaved training steps of every model on ``device`` (default: the CPU)."""
    device = as_device(device)
    torch.manual_seed(0)
    data, vocab = _data()
    models = {name: model.to(device) for name, model in _models(vocab).items()}
    steps = {name: _step(model, data, vocab, device) for name, model in models.items()}
    times = compare(steps, warmup=2, repeats=repeats or (5 if quick else 30), device=device)
    tokens = CONFIG["batch"] * CONFIG["block"]
    ref = median(times[REFERENCE]) if REFERENCE in times else None
    rows = []
    label = f"{CONFIG['depth']} layers, width {CONFIG['dim']}, block {CONFIG['block']}, batch {CONFIG['batch']}"
    for name, values in times.items():
        if name.endswith("!error"):
            rows.append(Row(SECTION, label, name[: -len("!error")], note=f"failed: {values[0]}"))
            continue
        ms = median(values)
        params = sum(p.numel() for p in models[name].parameters())
        extra = {"tokens/s": round(tokens / (ms * 1e-3)), "parameters": params}
        rows.append(Row(SECTION, label, name, round(ms, 2), None if ref is None else round(ref / ms, 2), extra))
    return rows


def targets(rows: list[Row]) -> list[dict]:
    return []  # no target in the issue: throughput is reported side by side
