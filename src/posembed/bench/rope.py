"""RoPE on queries and keys: posembed against transformers, rotary-embedding-torch, x-transformers.

Every implementation rotates the same q and k of shape ``(B, H, T, D)`` (fp32) by positions
``0..T-1``; tables each library caches are built before timing, as a model would hold them.
Forward runs without autograd; forward+backward rotates q and k that require grad and
back-propagates a fixed gradient into both.

On CUDA (``device="cuda"``) the cases are issue 23's: q and k of ``(4, 32, 4096, 128)`` and
``(1, 8, 32768, 128)``, in bf16 and in fp32, forward and forward+backward, with an effective
bandwidth row per shape and dtype (the minimal bytes, reading q and k and writing both rotated,
over the median time, against the card's copy bandwidth measured in the same run). posembed's
module runs its default dispatch there (the compiled kernel: bf16 read and written, rotated in
float32 inside) and, as a second row, its eager path (``compiled=False``). Liger-Kernel's Triton
RoPE (``liger_kernel.transformers.rope.liger_rotary_pos_emb``, ``pip install liger-kernel``;
not a posembed dependency, imported only here) joins them; where it is not installed its row
says it was skipped. On the CPU its row is left out, logged, and the CPU's rows are as before.
"""

from __future__ import annotations

import importlib.util
import logging

import torch

from posembed._utils.devices import cpu_tuned
from posembed._utils.hints import package_hint
from posembed.bench.harness import Row, as_device, compare, copy_bandwidth, failure_note, rows_from_times

log = logging.getLogger(__name__)

SECTION = "RoPE"
REFERENCE = "transformers apply_rotary_pos_emb"
#: why the eager row can miss its target on a busy host (BENCHMARKS.md, "one and two threads")
CONTENTION = (
    "the eager rotation is four element-wise kernels, each ending in an OpenMP barrier; at two threads on a "
    "shared host the same case swung 31-70 ms within ten minutes (BENCHMARKS.md); --threads 1 or compiled=True holds"
)
POSEMBED = "posembed RotaryEmbedding"
FUSED = "posembed RotaryEmbedding (compiled=True)"
EAGER = "posembed RotaryEmbedding (compiled=False, eager)"
LIGER = "Liger-Kernel liger_rotary_pos_emb (Triton)"
FULL = (4, 16, 2048, 64)
QUICK = (2, 8, 512, 64)
#: issue 23's shapes on CUDA (B, H, T, D), each in every dtype of CUDA_DTYPES
CUDA_SHAPES = ((4, 32, 4096, 128), (1, 8, 32768, 128))
CUDA_DTYPES = (torch.bfloat16, torch.float32)
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float32: "fp32", torch.float16: "fp16"}


def _llama_cos_sin(
    length: int, dim: int, device: torch.device, dtype=torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(1, T, D)`` cos and sin, as ``LlamaRotaryEmbedding`` returns them (the "half" layout, in q's dtype)."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)[None]  # (1, T, D)
    return emb.cos().to(device, dtype), emb.sin().to(device, dtype)


def _transformers(length: int, dim: int, device: torch.device, dtype=torch.float32):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    cos, sin = _llama_cos_sin(length, dim, device, dtype)
    return lambda q, k: apply_rotary_pos_emb(q, k, cos, sin)


def _posembed(length: int, dim: int, device: torch.device, dtype=torch.float32):
    """The module as a model holds it: its default dispatch (eager on the CPU, compiled on CUDA)."""
    from posembed.schemes.rotary.rope import RotaryEmbedding

    rope = RotaryEmbedding(dim, max_len=length).to(device)
    return lambda q, k: rope(q, k)


def _posembed_eager(length: int, dim: int, device: torch.device, dtype=torch.float32):
    """The module's eager path (``compiled=False``), what it runs on every device without a compiler."""
    from posembed.schemes.rotary.rope import RotaryEmbedding

    rope = RotaryEmbedding(dim, max_len=length, compiled=False).to(device)
    return lambda q, k: rope(q, k)


def _rotary_embedding_torch(length: int, dim: int, device: torch.device, dtype=torch.float32):
    from rotary_embedding_torch import RotaryEmbedding

    rope = RotaryEmbedding(dim=dim, cache_if_possible=True, cache_max_seq_len=length).to(device)
    return lambda q, k: (rope.rotate_queries_or_keys(q), rope.rotate_queries_or_keys(k))


def _x_transformers(length: int, dim: int, device: torch.device, dtype=torch.float32):
    from x_transformers.x_transformers import RotaryEmbedding, apply_rotary_pos_emb

    rope = RotaryEmbedding(dim).to(device)
    freqs, scale = rope(torch.arange(length, device=device))
    return lambda q, k: (apply_rotary_pos_emb(q, freqs, scale), apply_rotary_pos_emb(k, freqs, scale))


def _posembed_fused(length: int, dim: int, device: torch.device, dtype=torch.float32):
    """The module with its compiled dispatch (``posembed.kernels.rope``), same cache as above."""
    from posembed.kernels.rope import available
    from posembed.schemes.rotary.rope import RotaryEmbedding

    if not available():
        raise RuntimeError("torch.compile cannot build the kernel here")
    rope = RotaryEmbedding(dim, max_len=length, compiled=True).to(device)
    return lambda q, k: rope(q, k)


def _liger(length: int, dim: int, device: torch.device, dtype=torch.float32):
    """Liger-Kernel's Triton RoPE on the transformers tables. It rotates in place in its own
    ``(B, T, H, D)`` layout; the ``(B, H, T, D)`` q and k every case shares are copied into it
    first (Liger's ``contiguous()``), so they stay as they are."""
    from liger_kernel.transformers.rope import liger_rotary_pos_emb

    cos, sin = _llama_cos_sin(length, dim, device, dtype)
    return lambda q, k: liger_rotary_pos_emb(q, k, cos, sin)


def liger_skip_reason(device: str | torch.device) -> str | None:
    """Why the Liger-Kernel row cannot run on ``device`` (``None``: it can)."""
    device = torch.device(device)
    if device.type != "cuda":
        return f"Liger-Kernel's RoPE is a Triton kernel for CUDA; this run is on {device}"
    if importlib.util.find_spec("liger_kernel") is None:
        return f"liger-kernel is not installed ({package_hint('liger-kernel', explain=False)})"
    return None


BUILDERS = {
    REFERENCE: _transformers,
    POSEMBED: _posembed,
    FUSED: _posembed_fused,
    EAGER: _posembed_eager,
    "rotary-embedding-torch": _rotary_embedding_torch,
    "x-transformers": _x_transformers,
    LIGER: _liger,
}


def _wanted(name: str, compiled: bool, device: torch.device) -> bool:
    """Which rows a run has: the CPU's as before; on CUDA the default dispatch is the compiled
    kernel already, so its eager path is the second posembed row instead of ``compiled=True``."""
    if name == FUSED:
        return compiled and cpu_tuned(device)
    if name == EAGER:
        return not cpu_tuned(device)
    return True


def _build(length: int, dim: int, compiled: bool, device: torch.device, dtype=torch.float32) -> tuple[dict, list[Row]]:
    impls, failed = {}, []
    for name, builder in BUILDERS.items():
        if not _wanted(name, compiled, device):
            continue
        if name == LIGER and (reason := liger_skip_reason(device)) is not None:
            log.info("%s left out: %s", LIGER, reason)
            if not cpu_tuned(device):  # where it would run: a skipped row says so
                failed.append(Row(SECTION, "setup", name, note=f"skipped: {reason}"))
            continue
        try:
            impls[name] = builder(length, dim, device, dtype)
        except Exception as error:
            note = failure_note(error)
            if name == LIGER and note.startswith("skipped:"):
                note = f"skipped: {package_hint('liger-kernel', explain=False)} (liger_kernel is not installed)"
            failed.append(Row(SECTION, "setup", name, note=note))
    return impls, failed


def _backward_step(fn, q, k, gq, gk):
    def step():
        q.grad = k.grad = None
        rq, rk = fn(q, k)
        torch.autograd.backward((rq, rk), (gq, gk))

    return step


def run(quick: bool = False, repeats: int | None = None, device: str | torch.device | None = None) -> list[Row]:
    """Forward and forward+backward of every implementation on ``device`` (default: the CPU).

    The CPU: :data:`FULL` (or :data:`QUICK`) in fp32. CUDA: each of :data:`CUDA_SHAPES` (or
    :data:`QUICK`) in each of :data:`CUDA_DTYPES`, with an effective-bandwidth row for each.
    """
    device = as_device(device)
    repeats = repeats or (3 if quick else 7)
    if cpu_tuned(device):
        return _run_case(QUICK if quick else FULL, torch.float32, quick, repeats, device)
    rows = []
    for shape in (QUICK,) if quick else CUDA_SHAPES:
        for dtype in CUDA_DTYPES:
            rows += _run_case(shape, dtype, quick, repeats, device)
            rows.append(_bandwidth_row(rows, shape, dtype, quick, device))
    return rows


def _label(shape: tuple, dtype: torch.dtype) -> str:
    return f"q, k {shape} {_DTYPE_NAMES[dtype]}"


def _run_case(shape: tuple, dtype: torch.dtype, quick: bool, repeats: int, device: torch.device) -> list[Row]:
    torch.manual_seed(0)
    q, k = torch.randn(shape).to(device, dtype), torch.randn(shape).to(device, dtype)
    impls, rows = _build(shape[2], shape[3], compiled=not quick, device=device, dtype=dtype)  # quick: no compiling
    with torch.no_grad():
        cases = {name: (lambda fn=fn: fn(q, k)) for name, fn in impls.items()}
        forward = compare(cases, warmup=2, repeats=repeats, device=device)
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    gq, gk = torch.randn(shape).to(device, dtype), torch.randn(shape).to(device, dtype)
    steps = {name: _backward_step(fn, qg, kg, gq, gk) for name, fn in impls.items()}
    backward = compare(steps, warmup=2, repeats=repeats, device=device)
    label = _label(shape, dtype)
    if not cpu_tuned(device):  # several shapes and dtypes: each one's setup notes under its own case
        rows = [Row(SECTION, f"forward {label}", row.impl, note=row.note) for row in rows]
    rows += rows_from_times(SECTION, f"forward {label}", forward, REFERENCE)
    rows += rows_from_times(SECTION, f"forward+backward {label}", backward, REFERENCE)
    return rows


def _bandwidth_row(rows: list[Row], shape: tuple, dtype: torch.dtype, quick: bool, device: torch.device) -> Row:
    """The forward's minimal bytes (read q and k, write both rotated) over each median time."""
    elements = 1
    for size in shape:
        elements *= size
    minimal = 4 * elements * (torch.finfo(dtype).bits // 8)
    copy = copy_bandwidth(1 << 24 if quick else 1 << 28, device=device)
    extra = {"copy bandwidth GB/s": round(copy, 1), "minimal MB": round(minimal / 1e6, 1)}
    case = f"forward {_label(shape, dtype)}"
    for row in rows:
        if row.case == case and row.median_ms:
            rate = minimal / (row.median_ms * 1e-3) / 1e9
            extra[f"{row.impl} GB/s"] = round(rate, 1)
            extra[f"{row.impl} % of copy"] = round(100 * rate / copy, 1)
    return Row(SECTION, f"effective bandwidth, {case}", "minimal bytes / median time", extra=extra)


def targets(rows: list[Row]) -> list[dict]:
    found = []
    for impl in (POSEMBED, FUSED):
        match = [r for r in rows if r.section == SECTION and r.case.startswith("forward+backward") and r.impl == impl]
        if match and match[0].speedup is not None:
            found.append(
                {
                    "target": f"RoPE forward+backward: >= 3x transformers eager ({impl})",
                    "measured": f"{match[0].speedup:.2f}x ({match[0].median_ms:.1f} ms)",
                    "met": match[0].speedup >= 3.0,
                    "contention": CONTENTION if impl == POSEMBED else None,
                }
            )
    return found


def cuda_targets(rows: list[Row]) -> list[dict]:
    """Issue 23's on CUDA: posembed's bf16 forward+backward at least 1.5x Liger-Kernel's at each
    shape, and its forward at 60 % or more of the card's copy bandwidth (bf16 and fp32)."""
    found = []
    for row in rows:
        if row.section != SECTION or row.impl != POSEMBED or row.median_ms is None:
            continue
        if row.case.startswith("forward+backward") and "bf16" in row.case:
            liger = [r for r in rows if r.case == row.case and r.impl == LIGER and r.median_ms]
            if liger:
                ratio = liger[0].median_ms / row.median_ms
                found.append({
                    "target": f"RoPE {row.case}: >= 1.5x Liger-Kernel ({POSEMBED})",
                    "measured": f"{ratio:.2f}x ({row.median_ms:.3g} ms against {liger[0].median_ms:.3g} ms)",
                    "met": ratio >= 1.5,
                })  # fmt: skip
    for row in rows:
        if row.section == SECTION and row.case.startswith("effective bandwidth"):
            share = row.extra.get(f"{POSEMBED} % of copy")
            if share is not None:
                found.append({
                    "target": f"RoPE {row.case.removeprefix('effective bandwidth, ')}: >= 60 % of the copy bandwidth",
                    "measured": f"{share:.0f} % ({row.extra[f'{POSEMBED} GB/s']:.0f} GB/s)",
                    "met": share >= 60.0,
                })  # fmt: skip
    return found
