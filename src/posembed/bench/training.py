"""Training throughput (tokens/s) of posembed's ``Decoder`` against a nanoGPT-style model.

The nanoGPT model (Karpathy) is not on PyPI, so a minimal equivalent of its ``model.py``
is written here: token + learned position embeddings, pre-LN blocks with fused qkv and
causal SDPA, GELU MLP, final LayerNorm, tied head. Both use the small CPU configuration of
nanoGPT's README on tinyshakespeare characters (4 layers, 4 heads, width 128, block 64,
batch 12, dropout 0) and AdamW; their steps are interleaved in one process.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from posembed.bench.harness import Row, compare, median

SECTION = "lab training throughput"
REFERENCE = "nanoGPT-style (learned absolute)"
CONFIG = {"depth": 4, "heads": 4, "dim": 128, "block": 64, "batch": 12}


class NanoBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(dim, dim=2)
        q, k, v = (t.view(batch, length, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(batch, length, dim))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """Minimal nanoGPT-style decoder (learned absolute positions, tied head)."""

    def __init__(self, vocab: int, *, dim: int, depth: int, heads: int, block: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(NanoBlock(dim, heads) for _ in range(depth))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * depth) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


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


def _step(model: nn.Module, data: torch.Tensor, vocab: int):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    block, batch = CONFIG["block"], CONFIG["batch"]

    def step():
        start = torch.randint(0, len(data) - block - 1, (batch,), generator=generator)
        x = torch.stack([data[s : s + block] for s in start])
        y = torch.stack([data[s + 1 : s + block + 1] for s in start])
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def run(quick: bool = False, repeats: int | None = None) -> list[Row]:
    torch.manual_seed(0)
    data, vocab = _data()
    models = _models(vocab)
    steps = {name: _step(model, data, vocab) for name, model in models.items()}
    times = compare(steps, warmup=2, repeats=repeats or (5 if quick else 30))
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
