"""Causal self-attention with a bias scheme (ALiBi, T5): time and peak memory per length.

Each (implementation, scheme, length, mode) runs in a fresh subprocess, so its peak resident
memory (``VmHWM``; ``ru_maxrss`` would carry the parent's peak across ``exec``) is its own; "step MB" is that peak minus the resident set after
set-up (weights and inputs built, nothing run yet), i.e. the memory the step itself needed.
Batch 1, 4 heads of width 64 (model width 256), fp32, no dropout.

Implementations: posembed ``SelfAttention`` with each backend (``sdpa`` materialises the
``(H, T, T)`` bias and is the baseline of the memory target; ``chunked`` never holds more than
``(H, chunk, T)`` logits; ``fused``, block-streamed with a recomputing backward; ``eager``;
``flex``, inference only on CPU) and x-transformers' ``Attention`` fed its own
``AlibiPositionalBias`` / ``RelativePositionBias``.

On CUDA (``device="cuda"``) each case runs there and its memory is the peak of torch's CUDA
allocator instead of the resident set; ``flex`` runs compiled and trains too (as ``auto``
runs it there), and ``fused``, tuned for the CPU (:func:`posembed.devices.cpu_tuned`), is left
out, logged (so is the target, which is set on it).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics

import torch

from posembed.bench.harness import Row, as_device, peak_memory_mb, run_worker, start_memory, time_ms
from posembed.devices import cpu_tuned

log = logging.getLogger(__name__)

SECTION = "attention with a bias scheme"
BASELINE = "posembed sdpa (materialised bias)"
IMPLS = {
    BASELINE: "sdpa",
    "posembed chunked": "chunked",
    "posembed eager": "eager",
    "posembed flex": "flex",
    "posembed fused": "fused",
    "x-transformers": None,
}
HEADS, DIM_HEAD = 4, 64
FULL_LENGTHS = (1024, 2048, 4096, 8192)
QUICK_LENGTHS = (512,)


def _posembed(backend: str, scheme: str, device: torch.device):
    from posembed.attention import SelfAttention

    compiled = backend == "flex" and not cpu_tuned(device)  # off the CPU flex runs compiled, as auto runs it
    attention = SelfAttention(HEADS * DIM_HEAD, HEADS, scheme=_scheme(scheme), causal=True, backend=backend,
                              compile_flex=compiled).to(device)  # fmt: skip
    return lambda x: attention(x), attention


def _scheme(scheme: str):
    from posembed.schemes.alibi import ALiBi
    from posembed.schemes.t5_bias import T5RelativeBias

    return ALiBi(HEADS) if scheme == "alibi" else T5RelativeBias(HEADS, bidirectional=False)


def _x_transformers(scheme: str, device: torch.device):
    from torch import nn
    from x_transformers.x_transformers import AlibiPositionalBias, Attention, RelativePositionBias

    attention = Attention(HEADS * DIM_HEAD, dim_head=DIM_HEAD, heads=HEADS, causal=True)
    if scheme == "alibi":
        bias = AlibiPositionalBias(heads=HEADS, total_heads=HEADS)
    else:
        bias = RelativePositionBias(scale=DIM_HEAD**0.5, causal=True, heads=HEADS)
    holder = nn.ModuleList([attention, bias]).to(device)

    def call(x):
        length = x.shape[1]
        return attention(x, attn_bias=bias(length, length))

    return call, holder


def worker(spec: dict) -> dict:
    """Run one case in this (fresh) process: median time and memory of the step."""
    torch.manual_seed(0)
    torch.set_num_threads(spec.get("threads") or torch.get_num_threads())
    device = torch.device(spec.get("device") or "cpu")
    backend = IMPLS[spec["impl"]]
    if backend is None:
        call, module = _x_transformers(spec["scheme"], device)
    else:
        call, module = _posembed(backend, spec["scheme"], device)
    x = torch.randn(1, spec["length"], HEADS * DIM_HEAD)
    grad = torch.randn_like(x).to(device)
    x = x.to(device)
    train = spec["mode"] == "train"
    module.train(train)

    def step():
        if train:
            for p in module.parameters():
                p.grad = None
            call(x).backward(grad)
        else:
            with torch.no_grad():
                call(x)

    before = start_memory(device)
    warmup = spec.get("warmup", 1)
    times = [time_ms(step, device) for _ in range(warmup + spec["repeats"])]
    peak = peak_memory_mb(device)
    return {"median_ms": statistics.median(times[warmup:]), "peak_mb": peak, "step_mb": peak - before}


def _cases(quick: bool, device: torch.device):
    lengths = QUICK_LENGTHS if quick else FULL_LENGTHS
    on_cpu = cpu_tuned(device)
    if not on_cpu:
        log.info("on %s: 'posembed fused' left out (tuned for the CPU; auto never picks it there)", device)
    for length in lengths:
        for scheme in ("alibi", "t5"):
            for mode in ("train", "infer"):
                for impl, backend in IMPLS.items():
                    if backend == "fused" and not on_cpu:
                        continue
                    if backend == "flex" and mode == "train" and device.type == "cpu":
                        continue  # FlexAttention has no CPU backward in torch 2.13
                    if quick and backend in ("eager", "flex"):
                        continue  # a quick run keeps the baseline, the fast paths and the reference
                    if backend in ("eager", "flex") and length > 4096:
                        continue  # materialises several (H, T, T) tensors: slow, adds nothing
                    if backend == "chunked" and mode == "train" and length > 4096:
                        continue  # minutes per step at 8k on two cores
                    warmup = 0 if length > 4096 else 1
                    yield {"impl": impl, "scheme": scheme, "length": length, "mode": mode,
                           "repeats": 1 if length >= 4096 else 2, "warmup": warmup}


def run(
    quick: bool = False, repeats: int | None = None, threads: int | None = None,
    device: str | torch.device | None = None,
) -> list[Row]:
    """Every case in a fresh worker process on ``device`` (default: the CPU)."""
    device = as_device(device)
    memory = "peak RSS MB" if device.type == "cpu" else f"peak {device.type.upper()} MB"
    results: dict[tuple, dict] = {}
    for spec in _cases(quick, device):
        if repeats:
            spec["repeats"] = repeats
        spec["threads"] = threads
        if device.type != "cpu":
            spec["device"] = str(device)
        results[(spec["scheme"], spec["length"], spec["mode"], spec["impl"])] = run_worker(__name__, spec)
    rows = []
    for (scheme, length, mode, impl), result in results.items():
        case = f"{scheme} T={length} {'training step' if mode == 'train' else 'inference'}"
        if "error" in result:
            rows.append(Row(SECTION, case, impl, note=f"failed: {result['error']}"))
            continue
        base = results.get((scheme, length, mode, BASELINE), {})
        speed = base["median_ms"] / result["median_ms"] if "median_ms" in base else None
        memory = result["step_mb"] / base["step_mb"] if base.get("step_mb") else None
        extra = {"step MB": round(result["step_mb"], 1), memory: round(result["peak_mb"], 1)}
        if memory is not None:
            extra["memory vs baseline"] = round(memory, 3)
        rows.append(Row(SECTION, case, impl, round(result["median_ms"], 1), None if speed is None else round(speed, 2), extra))
    return rows


def targets(rows: list[Row]) -> list[dict]:
    """The target is checked on ``fused``, the backend ``backend="auto"`` picks at this length
    (``chunked``, its fallback, is in the table: it bounds memory by the chunk, not the target)."""
    found = []
    for scheme in ("alibi", "t5"):
        for impl in ("posembed fused",):
            match = [r for r in rows if r.case == f"{scheme} T=4096 training step" and r.impl == impl and r.speedup]
            if not match or "memory vs baseline" not in match[0].extra:
                continue
            memory, slowdown = match[0].extra["memory vs baseline"], 1 / match[0].speedup
            found.append({
                "target": f"{scheme} training T=4096: <= 1/3 the memory of the materialised bias at <= 1.5x its time ({impl})",
                "measured": f"{memory:.2f}x the memory, {slowdown:.2f}x the time",
                "met": memory <= 1 / 3 and slowdown <= 1.5,
            })
    return found


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one attention benchmark case (used by the runner)")
    parser.add_argument("--worker", required=True, help="JSON case spec")
    print(json.dumps(worker(json.loads(parser.parse_args().worker))))
