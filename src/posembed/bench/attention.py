"""Causal self-attention with a bias scheme (ALiBi, T5): time and peak memory per length.

Each (implementation, scheme, length, mode) runs in a fresh subprocess, so its peak resident
memory (``VmHWM``; ``ru_maxrss`` would carry the parent's peak across ``exec``) is its own; "step
MB" is that peak minus the resident set after set-up (weights and inputs built, nothing run yet),
i.e. the memory the step itself needed.
Batch 1, 4 heads of width 64 (model width 256), fp32, no dropout, on the CPU.

Implementations: posembed ``SelfAttention`` with each backend (``sdpa`` materialises the
``(H, T, T)`` bias and is the baseline of the memory target; ``chunked`` never holds more than
``(H, chunk, T)`` logits; ``fused``, block-streamed with a recomputing backward; ``eager``;
``flex``, inference only on CPU) and x-transformers' ``Attention`` fed its own
``AlibiPositionalBias`` / ``RelativePositionBias``.

On CUDA (``device="cuda"``) each case runs there, at the shape of a model one trains there
(16 heads of width 64) in bf16 and in fp32, at T = 2048 and 8192 (ALiBi in both dtypes, T5 in
bf16), every backend included (``fused`` and ``chunked`` beside ``flex`` and ``sdpa``: which one
``auto`` should pick there is what the rows show); its memory is the peak of torch's CUDA
allocator instead of the resident set, and ``flex`` runs compiled and trains too (as ``auto``
runs it there). The CPU's target is not checked there.

A comparison library that is not installed (x-transformers) is a row ``skipped: pip install
'posembed[bench]'``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics

import torch

from posembed._utils.devices import cpu_tuned
from posembed.bench.harness import Row, as_device, failure_note, peak_memory_mb, run_worker, start_memory, time_ms

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
#: the bias schemes timed, by their names in the factory (:mod:`posembed.schemes.factory`), which
#: builds them; rows and targets name them without the ``_bias`` suffix (``t5``), as they always have
SCHEMES = ("alibi", "t5_bias")
#: on CUDA: (scheme, dtype) pairs, lengths, heads (of DIM_HEAD); quick: the first length only
CUDA_SCHEMES = (("alibi", "bfloat16"), ("alibi", "float32"), ("t5_bias", "bfloat16"))
CUDA_LENGTHS = (2048, 8192)
CUDA_HEADS = 16


def _posembed(backend: str, scheme: str, device: torch.device, heads: int = HEADS):
    from posembed.nn.attention.layer import SelfAttention

    compiled = backend == "flex" and not cpu_tuned(device)  # off the CPU flex runs compiled, as auto runs it
    attention = SelfAttention(heads * DIM_HEAD, heads, scheme=_scheme(scheme, heads), causal=True, backend=backend,
                              compile_flex=compiled).to(device)  # fmt: skip
    return lambda x: attention(x), attention


def _scheme(name: str, heads: int = HEADS):
    """The factory's scheme ``name`` for this causal model (``heads`` heads of :data:`DIM_HEAD`)."""
    from posembed.schemes.factory import ModelSizes, build_from_sizes

    longest = max(FULL_LENGTHS + CUDA_LENGTHS)
    return build_from_sizes(name, ModelSizes(heads * DIM_HEAD, heads, DIM_HEAD, longest, causal=True))


def _label(name: str) -> str:
    """A scheme's name in rows and targets: the factory's without ``_bias`` (``t5_bias`` -> ``t5``)."""
    return name.removesuffix("_bias")


def _x_transformers(scheme: str, device: torch.device, heads: int = HEADS):
    from torch import nn
    from x_transformers.x_transformers import AlibiPositionalBias, Attention, RelativePositionBias

    attention = Attention(heads * DIM_HEAD, dim_head=DIM_HEAD, heads=heads, causal=True)
    if scheme == "alibi":
        bias = AlibiPositionalBias(heads=heads, total_heads=heads)
    else:
        bias = RelativePositionBias(scale=DIM_HEAD**0.5, causal=True, heads=heads)
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
    dtype = getattr(torch, spec.get("dtype", "float32"))
    heads = spec.get("heads", HEADS)
    backend = IMPLS[spec["impl"]]
    try:
        if backend is None:
            call, module = _x_transformers(spec["scheme"], device, heads)
        else:
            call, module = _posembed(backend, spec["scheme"], device, heads)
    except ModuleNotFoundError as error:
        return {"skipped": failure_note(error)}
    module.to(dtype)
    x = torch.randn(1, spec["length"], heads * DIM_HEAD)
    grad = torch.randn_like(x).to(device, dtype)
    x = x.to(device, dtype)
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
    if not cpu_tuned(device):
        yield from _cuda_cases(quick)
        return
    lengths = QUICK_LENGTHS if quick else FULL_LENGTHS
    for length in lengths:
        for scheme in SCHEMES:
            for mode in ("train", "infer"):
                for impl, backend in IMPLS.items():
                    if backend == "flex" and mode == "train":
                        continue  # FlexAttention has no CPU backward in torch 2.13
                    if quick and backend in ("eager", "flex"):
                        continue  # a quick run keeps the baseline, the fast paths and the reference
                    if backend in ("eager", "flex") and length > 4096:
                        continue  # materialises several (H, T, T) tensors: slow, adds nothing
                    if backend == "chunked" and mode == "train" and length > 4096:
                        continue  # minutes per step at 8k on two cores
                    warmup = 0 if length > 4096 else 1
                    yield {
                        "impl": impl,
                        "scheme": scheme,
                        "length": length,
                        "mode": mode,
                        "repeats": 1 if length >= 4096 else 2,
                        "warmup": warmup,
                    }


def _cuda_cases(quick: bool):
    """Every backend at 16 heads, bf16 and fp32 (:data:`CUDA_SCHEMES`), warmed up (flex compiles)."""
    lengths = CUDA_LENGTHS[:1] if quick else CUDA_LENGTHS
    for length in lengths:
        for scheme, dtype in CUDA_SCHEMES:
            for mode in ("train", "infer"):
                for impl, backend in IMPLS.items():
                    if backend == "eager" and length > 4096:
                        continue  # materialises several (H, T, T) tensors: what sdpa's row already shows
                    yield {
                        "impl": impl,
                        "scheme": scheme,
                        "length": length,
                        "mode": mode,
                        "dtype": dtype,
                        "heads": CUDA_HEADS,
                        "repeats": 5,
                        "warmup": 2,
                    }


def run(
    quick: bool = False,
    repeats: int | None = None,
    threads: int | None = None,
    device: str | torch.device | None = None,
) -> list[Row]:
    """Every case in a fresh worker process on ``device`` (default: the CPU).

    A quick run times its cases in this process instead (no interpreter start per case): on the
    CPU its memory, which would then be this process's, is not reported.
    """
    device = as_device(device)
    results: dict[tuple, dict] = {}
    for spec in _cases(quick, device):
        if repeats:
            spec["repeats"] = repeats
        spec["threads"] = threads
        if device.type != "cpu":
            spec["device"] = str(device)
        key = (spec["scheme"], spec.get("dtype"), spec["length"], spec["mode"], spec["impl"])
        results[key] = _in_process(spec, device) if quick else run_worker(__name__, spec)
    return [_row(key, result, results, device) for key, result in results.items()]


def _in_process(spec: dict, device: torch.device) -> dict:
    """:func:`worker` in this process; on the CPU without the memory (the resident set is not the case's own)."""
    try:
        result = worker(spec)
    except Exception as error:  # a case that cannot run is a row, as a failed worker is
        return {"error": failure_note(error).removeprefix("failed: ")}
    if device.type == "cpu" and "median_ms" in result:
        result = {
            "median_ms": result["median_ms"],
            "note": "quick run: timed in the bench's process, memory not measured",
        }
    return result


def _row(key: tuple, result: dict, results: dict, device: torch.device) -> Row:
    """One case's row: time and speed against the baseline's, the step's memory and the whole peak."""
    scheme, dtype, length, mode, impl = key
    kind = "training step" if mode == "train" else "inference"
    case = f"{_label(scheme)} T={length} {kind}" + ("" if dtype is None else f" {_DTYPE_NAMES[dtype]}")
    if "skipped" in result or "error" in result:
        return Row(SECTION, case, impl, note=result.get("skipped") or f"failed: {result['error']}")
    base = results.get((scheme, dtype, length, mode, BASELINE), {})
    speed = base["median_ms"] / result["median_ms"] if "median_ms" in base else None
    extra = {}
    if "step_mb" in result:
        peak_label = "peak RSS MB" if device.type == "cpu" else f"peak {device.type.upper()} MB"
        extra = {"step MB": round(result["step_mb"], 1), peak_label: round(result["peak_mb"], 1)}
    if "step_mb" in result and base.get("step_mb"):
        extra["memory vs baseline"] = round(result["step_mb"] / base["step_mb"], 3)
    speed = None if speed is None else round(speed, 2)
    return Row(SECTION, case, impl, round(result["median_ms"], 3), speed, extra, note=result.get("note", ""))


_DTYPE_NAMES = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}


def targets(rows: list[Row]) -> list[dict]:
    """The target is checked on ``fused``, the backend ``backend="auto"`` picks at this length
    (``chunked``, its fallback, is in the table: it bounds memory by the chunk, not the target)."""
    found = []
    for scheme in map(_label, SCHEMES):
        for impl in ("posembed fused",):
            match = [r for r in rows if r.case == f"{scheme} T=4096 training step" and r.impl == impl and r.speedup]
            if not match or "memory vs baseline" not in match[0].extra:
                continue
            memory, slowdown = match[0].extra["memory vs baseline"], 1 / match[0].speedup
            found.append(
                {
                    "target": (
                        f"{scheme} training T=4096: <= 1/3 the memory of the materialised bias at <= 1.5x its time "
                        f"({impl})"
                    ),
                    "measured": f"{memory:.2f}x the memory, {slowdown:.2f}x the time",
                    "met": memory <= 1 / 3 and slowdown <= 1.5,
                }
            )
    return found


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one attention benchmark case (used by the runner)")
    parser.add_argument("--worker", required=True, help="JSON case spec")
    print(json.dumps(worker(json.loads(parser.parse_args().worker))))
