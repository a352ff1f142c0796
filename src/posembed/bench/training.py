"""Training throughput (tokens/s) of posembed's ``Decoder`` against a nanoGPT-style model.

The nanoGPT model (Karpathy) is not on PyPI, so a minimal equivalent of its ``model.py``
is written in :mod:`posembed.bench.nanogpt_ref`: token + learned position embeddings, pre-LN
blocks with fused qkv and causal SDPA, GELU MLP, final LayerNorm, tied head, no biases. The
Decoders are built without biases too (``bias=False``, as the lab's calibration preset); what
still differs is theirs by design: the embedding block's LayerNorm and an untied head. Both use
the small CPU configuration of nanoGPT's README on tinyshakespeare characters (4 layers, 4 heads,
width 128, block 64, batch 12, dropout 0) and AdamW; their steps are interleaved in one process.

On CUDA (``device="cuda"``) every model trains there as the lab trains on it
(:mod:`posembed.lab.training.train`): bf16 autocast and fused AdamW; batches are cut on the CPU and
copied over, as nanoGPT's loop does. There the suite also times GPT-2 small (12 layers of 768,
12 heads, block 1024, batch 8, GPT-2's vocabulary padded to 50304, random tokens), and each size
eagerly and under ``torch.compile`` (a quick run: the CPU recipe's size, eager only).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posembed._utils.devices import cpu_tuned
from posembed.bench.harness import Row, as_device, compare, median
from posembed.bench.nanogpt_ref import NanoGPT

SECTION = "lab training throughput"
REFERENCE = "nanoGPT-style (learned absolute)"
#: nanoGPT's CPU recipe (tinyshakespeare characters)
CONFIG = {"depth": 4, "heads": 4, "dim": 128, "block": 64, "batch": 12}
#: GPT-2 small (CUDA only): random tokens of GPT-2's vocabulary padded to 50304, as nanoGPT pads it
GPT2_SMALL = {"depth": 12, "heads": 12, "dim": 768, "block": 1024, "batch": 8, "vocab": 50304}


def _data(config: dict) -> tuple[torch.Tensor, int]:
    """Token ids and the vocabulary size: tinyshakespeare's characters, or random ids for ``config["vocab"]``."""
    if "vocab" in config:
        generator = torch.Generator().manual_seed(0)
        return torch.randint(0, config["vocab"], (200_000,), generator=generator), config["vocab"]
    from posembed.lab.data import DEFAULT_TEXT, resolve_text_path

    text = resolve_text_path(DEFAULT_TEXT).read_text(encoding="utf-8")
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    return torch.tensor([lookup[c] for c in text[:200_000]], dtype=torch.long), len(chars)


def _models(vocab: int, c: dict) -> dict[str, nn.Module]:
    from posembed.nn.model.transformer import Decoder
    from posembed.schemes.absolute.learned import LearnedAbsolute
    from posembed.schemes.bias.alibi import ALiBi
    from posembed.schemes.rotary.rope import RotaryEmbedding

    # bias=False as nanoGPT's model and the lab's calibration preset: the same layers on both sides
    common = {"dim": c["dim"], "depth": c["depth"], "num_heads": c["heads"], "dropout": 0.0, "bias": False}
    head_dim = c["dim"] // c["heads"]
    return {
        REFERENCE: NanoGPT(vocab, dim=c["dim"], depth=c["depth"], heads=c["heads"], block=c["block"]),
        "posembed Decoder (learned absolute)": Decoder(vocab, scheme=LearnedAbsolute(c["block"], c["dim"]), **common),
        "posembed Decoder (RoPE)": Decoder(vocab, scheme=RotaryEmbedding(head_dim, max_len=c["block"]), **common),
        "posembed Decoder (ALiBi)": Decoder(vocab, scheme=ALiBi(c["heads"]), **common),
    }


def plan(quick: bool, device: torch.device) -> list[tuple[dict, bool]]:
    """The ``(size, compiled)`` groups timed on ``device``: the CPU recipe eagerly on the CPU; on
    CUDA also GPT-2 small, each eager and compiled (a quick run: the CPU recipe, eager)."""
    if cpu_tuned(device) or quick:
        return [(CONFIG, False)]
    return [(size, compiled) for size in (CONFIG, GPT2_SMALL) for compiled in (False, True)]


def _step(model: nn.Module, data: torch.Tensor, vocab: int, config: dict, device: torch.device):
    from posembed._utils.devices import autocast

    fused = {"fused": True} if device.type == "cuda" else {}  # as the lab's optimizer on CUDA
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **fused)
    generator = torch.Generator().manual_seed(0)
    block, batch = config["block"], config["batch"]

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
    """Interleaved training steps of every model on ``device`` (default: the CPU), per :func:`plan` group."""
    device = as_device(device)
    rows = []
    for config, compiled in plan(quick, device):
        rows += _run_group(config, compiled, repeats or (5 if quick else 30), device)
    return rows


def _label(c: dict, compiled: bool, device: torch.device) -> str:
    label = f"{c['depth']} layers, width {c['dim']}, block {c['block']}, batch {c['batch']}"
    if device.type == "cuda":
        label += ", bf16 autocast, fused AdamW"
    return label + (", torch.compile" if compiled else "")


def _run_group(config: dict, compiled: bool, repeats: int, device: torch.device) -> list[Row]:
    torch.manual_seed(0)
    data, vocab = _data(config)
    models = {name: model.to(device) for name, model in _models(vocab, config).items()}
    runs = {name: torch.compile(model) if compiled else model for name, model in models.items()}
    steps = {name: _step(model, data, vocab, config, device) for name, model in runs.items()}
    times = compare(steps, warmup=3 if compiled else 2, repeats=repeats, device=device)
    tokens = config["batch"] * config["block"]
    ref = median(times[REFERENCE]) if REFERENCE in times else None
    rows = []
    label = _label(config, compiled, device)
    for name, values in times.items():
        if name.endswith("!error"):
            rows.append(Row(SECTION, label, name[: -len("!error")], note=values[0]))
            continue
        ms = median(values)
        params = sum(p.numel() for p in models[name].parameters())
        extra = {"tokens/s": round(tokens / (ms * 1e-3)), "parameters": params}
        rows.append(Row(SECTION, label, name, round(ms, 2), None if ref is None else round(ref / ms, 2), extra))
    return rows


def targets(rows: list[Row]) -> list[dict]:
    return []  # no target in the issue: throughput is reported side by side
