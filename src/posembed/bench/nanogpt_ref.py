"""A nanoGPT-style reference: model and training loop, written here to time the lab against.

nanoGPT (Karpathy) is not on PyPI, so this module restates, in its own code, what nanoGPT's
``model.py`` and ``train.py`` do for the character-level CPU recipe of its README
(:data:`posembed.lab.calibration.NANOGPT_CPU`):

- model: token + learned position embeddings, pre-LN blocks (one fused ``Linear(C, 3C)``
  for q, k, v; causal SDPA; GELU MLP), final LayerNorm, head tied to the token table;
  ``bias=False`` in every Linear and LayerNorm, as nanoGPT's default;
- loop (:func:`train_reference`): random ``block + 1`` windows of the first 90 % of the text,
  AdamW (decay on matrices only, nanoGPT's for-loop AdamW on CPU), linear warmup then cosine
  decay, gradient clipping at 1, and every ``eval_interval`` iterations (and at 0) an estimate
  of the train and validation loss over ``eval_iters`` random batches each.

It is a yardstick only: nothing in the library imports it.

Example:
    >>> model = NanoGPT(11, dim=8, depth=1, heads=2, block=6)
    >>> model(torch.randint(0, 11, (2, 5))).shape
    torch.Size([2, 5, 11])
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["NanoGPT", "RefRun", "train_reference", "char_data", "configure_optimizer"]


class NanoBlock(nn.Module):
    """Pre-LN block with one fused qkv projection. Shape: ``(B, T, C) -> (B, T, C)``."""

    def __init__(self, dim: int, heads: int, bias: bool = False) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(dim, bias=bias), nn.LayerNorm(dim, bias=bias)
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim, bias=bias), nn.Linear(dim, dim, bias=bias)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim, bias=bias), nn.GELU(), nn.Linear(4 * dim, dim, bias=bias))

    def forward(self, x: Tensor) -> Tensor:
        batch, length, dim = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(dim, dim=2)
        q, k, v = (
            t.view(batch, length, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v)
        )  # (B, H, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        x = x + self.c_proj(y.transpose(1, 2).reshape(batch, length, dim))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """Minimal nanoGPT-style decoder (learned absolute positions, tied head).

    Shape: ids ``(B, T)`` -> logits ``(B, T, vocab)``.
    """

    def __init__(self, vocab: int, *, dim: int, depth: int, heads: int, block: int, bias: bool = False) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(NanoBlock(dim, heads, bias) for _ in range(depth))
        self.ln_f = nn.LayerNorm(dim, bias=bias)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * depth) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, T, V)


def char_data(text: str) -> tuple[Tensor, Tensor, int]:
    """``(train, val, vocab)``: the characters of ``text`` as ids, split 90/10."""
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([lookup[c] for c in text], dtype=torch.long)
    split = int(0.9 * len(data))
    return data[:split], data[split:], len(chars)


@dataclass(frozen=True)
class RefRun:
    """What :func:`train_reference` measured: wall seconds in all and per iteration, last losses."""

    seconds: float
    seconds_per_iteration: float
    train_loss: float
    val_loss: float
    iterations: int


def _batch(data: Tensor, block: int, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    starts = torch.randint(len(data) - block, (batch,), generator=generator)
    windows = torch.stack([data[s : s + block + 1] for s in starts.tolist()])  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def _lr(step: int, *, lr: float, min_lr: float, warmup: int, decay: int) -> float:
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay:
        return min_lr
    ratio = (step - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


@torch.no_grad()
def _estimate(model, splits, block, batch, iters, generator) -> list[float]:
    model.eval()
    out = []
    for data in splits:
        losses = [
            F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
            for x, y in (_batch(data, block, batch, generator) for _ in range(iters))
        ]
        out.append(sum(losses) / len(losses))
    model.train()
    return out


def configure_optimizer(model: nn.Module, *, lr: float, beta2: float, weight_decay: float) -> torch.optim.AdamW:
    """nanoGPT's ``configure_optimizers`` on the CPU: decay on matrices only, the for-loop AdamW."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2))


def train_reference(
    text: str,
    *,
    steps: int = 2000,
    dim: int = 128,
    depth: int = 4,
    heads: int = 4,
    block: int = 64,
    batch: int = 12,
    lr: float = 1e-3,
    min_lr: float = 1e-4,
    warmup: int = 100,
    weight_decay: float = 0.1,
    beta2: float = 0.99,
    grad_clip: float = 1.0,
    eval_interval: int = 250,
    eval_iters: int = 20,
    log_interval: int = 10,
    seed: int = 1337,
) -> RefRun:
    """Train the reference with nanoGPT's loop on ``text``; wall time from the first step to the end."""
    torch.manual_seed(seed)
    train, val, vocab = char_data(text)
    model = NanoGPT(vocab, dim=dim, depth=depth, heads=heads, block=block)
    optimizer = configure_optimizer(model, lr=lr, beta2=beta2, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    train_loss = val_loss = float("nan")
    start = time.perf_counter()
    for step in range(steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = _lr(step, lr=lr, min_lr=min_lr, warmup=warmup, decay=steps)
        if step % eval_interval == 0 or step == steps:
            train_loss, val_loss = _estimate(model, (train, val), block, batch, eval_iters, generator)
        if step == steps:
            break
        x, y = _batch(train, block, batch, generator)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        if step % log_interval == 0:
            loss.item()  # nanoGPT syncs here to print the loss
    seconds = time.perf_counter() - start
    return RefRun(seconds, seconds / steps, train_loss, val_loss, steps)
