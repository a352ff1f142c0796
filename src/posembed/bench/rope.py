"""RoPE on queries and keys: posembed against transformers, rotary-embedding-torch, x-transformers.

Every implementation rotates the same q and k of shape ``(B, H, T, D)`` (fp32) by positions
``0..T-1``; tables each library caches are built before timing, as a model would hold them.
Forward runs without autograd; forward+backward rotates q and k that require grad and
back-propagates a fixed gradient into both.

On CUDA (``device="cuda"``) the same cases time there, and Liger-Kernel's Triton RoPE
(``liger_kernel.transformers.rope.liger_rotary_pos_emb``, ``pip install liger-kernel``; not a
posembed dependency) joins them when it is installed; elsewhere its row is left out, logged.
"""

from __future__ import annotations

import importlib.util
import logging

import torch

from posembed.bench.harness import Row, as_device, compare, rows_from_times

log = logging.getLogger(__name__)

SECTION = "RoPE"
REFERENCE = "transformers apply_rotary_pos_emb"
POSEMBED = "posembed RotaryEmbedding"
FUSED = "posembed RotaryEmbedding (compiled=True)"
LIGER = "Liger-Kernel liger_rotary_pos_emb (Triton)"
FULL = (4, 16, 2048, 64)
QUICK = (2, 8, 512, 64)


def _llama_cos_sin(length: int, dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(1, T, D)`` cos and sin, as ``LlamaRotaryEmbedding`` returns them (the "half" layout)."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)[None]  # (1, T, D)
    return emb.cos().to(device), emb.sin().to(device)


def _transformers(length: int, dim: int, device: torch.device):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    cos, sin = _llama_cos_sin(length, dim, device)
    return lambda q, k: apply_rotary_pos_emb(q, k, cos, sin)


def _posembed(length: int, dim: int, device: torch.device):
    from posembed.schemes.rotary import RotaryEmbedding

    rope = RotaryEmbedding(dim, max_len=length).to(device)
    return lambda q, k: rope(q, k)


def _rotary_embedding_torch(length: int, dim: int, device: torch.device):
    from rotary_embedding_torch import RotaryEmbedding

    rope = RotaryEmbedding(dim=dim, cache_if_possible=True, cache_max_seq_len=length).to(device)
    return lambda q, k: (rope.rotate_queries_or_keys(q), rope.rotate_queries_or_keys(k))


def _x_transformers(length: int, dim: int, device: torch.device):
    from x_transformers.x_transformers import RotaryEmbedding, apply_rotary_pos_emb

    rope = RotaryEmbedding(dim).to(device)
    freqs, scale = rope(torch.arange(length, device=device))
    return lambda q, k: (apply_rotary_pos_emb(q, freqs, scale), apply_rotary_pos_emb(k, freqs, scale))


def _posembed_fused(length: int, dim: int, device: torch.device):
    """The module with its compiled dispatch (``posembed.fused.rope``), same cache as above."""
    from posembed.fused.rope import available
    from posembed.schemes.rotary import RotaryEmbedding

    if not available():
        raise RuntimeError("torch.compile cannot build the kernel here")
    rope = RotaryEmbedding(dim, max_len=length, compiled=True).to(device)
    return lambda q, k: rope(q, k)


def _liger(length: int, dim: int, device: torch.device):
    """Liger-Kernel's Triton RoPE on the transformers tables. It rotates in place in its own
    ``(B, T, H, D)`` layout; the ``(B, H, T, D)`` q and k every case shares are copied into it
    first (Liger's ``contiguous()``), so they stay as they are."""
    from liger_kernel.transformers.rope import liger_rotary_pos_emb

    cos, sin = _llama_cos_sin(length, dim, device)
    return lambda q, k: liger_rotary_pos_emb(q, k, cos, sin)


def liger_skip_reason(device: str | torch.device) -> str | None:
    """Why the Liger-Kernel row cannot run on ``device`` (``None``: it can)."""
    device = torch.device(device)
    if device.type != "cuda":
        return f"Liger-Kernel's RoPE is a Triton kernel for CUDA; this run is on {device}"
    if importlib.util.find_spec("liger_kernel") is None:
        return "liger-kernel is not installed (pip install liger-kernel)"
    return None


BUILDERS = {
    REFERENCE: _transformers,
    POSEMBED: _posembed,
    FUSED: _posembed_fused,
    "rotary-embedding-torch": _rotary_embedding_torch,
    "x-transformers": _x_transformers,
    LIGER: _liger,
}


def _build(length: int, dim: int, compiled: bool, device: torch.device) -> tuple[dict, list[Row]]:
    impls, failed = {}, []
    for name, builder in BUILDERS.items():
        if name == FUSED and not compiled:
            continue
        if name == LIGER and (reason := liger_skip_reason(device)) is not None:
            log.info("%s left out: %s", LIGER, reason)
            continue
        try:
            impls[name] = builder(length, dim, device)
        except Exception as error:
            failed.append(Row(SECTION, "setup", name, note=f"failed: {type(error).__name__}: {error}"[:200]))
    return impls, failed


def _backward_step(fn, q, k, gq, gk):
    def step():
        q.grad = k.grad = None
        rq, rk = fn(q, k)
        torch.autograd.backward((rq, rk), (gq, gk))

    return step


def run(quick: bool = False, repeats: int | None = None, device: str | torch.device | None = None) -> list[Row]:
    """Forward and forward+backward of every implementation on ``device`` (default: the CPU)."""
    device = as_device(device)
    shape = QUICK if quick else FULL
    repeats = repeats or (3 if quick else 7)
    torch.manual_seed(0)
    q, k = torch.randn(shape).to(device), torch.randn(shape).to(device)
    impls, rows = _build(shape[2], shape[3], compiled=not quick, device=device)  # quick runs skip compiling
    with torch.no_grad():
        cases = {name: (lambda fn=fn: fn(q, k)) for name, fn in impls.items()}
        forward = compare(cases, warmup=2, repeats=repeats, device=device)
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    gq, gk = torch.randn(shape).to(device), torch.randn(shape).to(device)
    steps = {name: _backward_step(fn, qg, kg, gq, gk) for name, fn in impls.items()}
    backward = compare(steps, warmup=2, repeats=repeats, device=device)
    label = f"q, k {shape} fp32"
    rows += rows_from_times(SECTION, f"forward {label}", forward, REFERENCE)
    rows += rows_from_times(SECTION, f"forward+backward {label}", backward, REFERENCE)
    return rows


def targets(rows: list[Row]) -> list[dict]:
    found = []
    for impl in (POSEMBED, FUSED):
        match = [r for r in rows if r.section == SECTION and r.case.startswith("forward+backward") and r.impl == impl]
        if match and match[0].speedup is not None:
            found.append({
                "target": f"RoPE forward+backward: >= 3x transformers eager ({impl})",
                "measured": f"{match[0].speedup:.2f}x ({match[0].median_ms:.1f} ms)",
                "met": match[0].speedup >= 3.0,
            })
    return found
