"""The embedding block at BERT-base shape: posembed against transformers' ``BertEmbeddings``.

Every implementation shares the same tables. On the CPU: forward (eval, no grad) and
forward+backward (training mode, dropout 0.1, gradients reset to ``None`` every step as
``zero_grad()`` does), fp32; posembed's block is also measured with its huge-page advice off
("4 KiB pages": on a kernel without transparent huge pages every fresh page faults separately),
and the chunked ``fused_embedding`` on its own.

On CUDA (``device="cuda"``) the block dispatches to its compiled kernel
(:mod:`posembed.kernels.embedding_compiled`) and every pass runs in eval and in train, in bf16
and in fp32 (four rows per dtype); the CPU-tuned cases are left out (logged), and posembed's
eager path (``fused=False``) is timed beside the kernel.

Also reports the effective bandwidth of the minimal bytes moved (read the word rows, write the
output) against this machine's copy bandwidth, measured in the same run. Without transformers
(``pip install 'posembed[bench]'``) its rows are skipped and posembed's are timed alone.
"""

from __future__ import annotations

import logging

import torch

from posembed._utils.devices import cpu_tuned
from posembed.bench.harness import Row, as_device, compare, copy_bandwidth, failure_note, median, rows_from_times

log = logging.getLogger(__name__)

SECTION = "embedding block"
REFERENCE = "transformers BertEmbeddings (eager)"
REFERENCE_COMPILED = "transformers BertEmbeddings (torch.compile)"
FUSED = "posembed fused_embedding"
FUSED_COMPILED = "posembed fused_embedding (compiled, inference)"
BLOCK = "posembed TransformerEmbeddings"
BLOCK_EAGER = "posembed TransformerEmbeddings (eager, fused=False)"
BLOCK_SMALL_PAGES = "posembed TransformerEmbeddings (4 KiB pages)"
#: why a CPU target can be missed on a busy host (BENCHMARKS.md, "The embedding block under contention")
CONTENTION = (
    "on a busy host it fell from 6x to 1.1-1.9x transformers at the full shape (load 25, two threads), slowest "
    "right after another library's ops; at the quick shape it does not win even alone (the rows fit in cache); "
    "read the targets from a full run on a quiet machine or at --threads 1"
)
FULL = {"batch": 32, "length": 512, "width": 768, "vocab": 30522}
QUICK = {"batch": 4, "length": 128, "width": 768, "vocab": 30522}
POSITIONS, TYPES, DROPOUT = 512, 2, 0.1
#: (case name, with backward, train mode): the CPU's two, CUDA's four
CPU_MODES = (("forward (eval)", False, False), ("forward+backward (train, dropout 0.1)", True, True))
CUDA_MODES = (
    ("forward (eval)", False, False), ("forward (train, dropout 0.1)", False, True),
    ("forward+backward (eval)", True, False), ("forward+backward (train, dropout 0.1)", True, True),
)  # fmt: skip
CUDA_DTYPES = (torch.bfloat16, torch.float32)
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float32: "fp32", torch.float16: "fp16"}


def _setup(shape: dict, device: torch.device, dtype: torch.dtype = torch.float32):
    """posembed's block (BERT's sizes, dropout 0.1) on ``device`` and a batch of sentence pairs."""
    from posembed.nn.embedding.block import TransformerEmbeddings
    from posembed.schemes.absolute.learned import LearnedAbsolute

    block = TransformerEmbeddings(
        shape["vocab"], shape["width"], position=LearnedAbsolute(POSITIONS, shape["width"]), type_vocab_size=TYPES,
        pad_token_id=0, dropout=DROPOUT,
    ).to(device, dtype)  # fmt: skip
    ids = torch.randint(1, shape["vocab"], (shape["batch"], shape["length"]))
    types = torch.zeros_like(ids)
    types[:, shape["length"] // 2 :] = 1  # sentence pairs: second half is segment B
    return block, ids.to(device), types.to(device)


def _reference(block):
    """transformers' ``BertEmbeddings`` holding copies of the block's tables (ModuleNotFoundError without it)."""
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    config = BertConfig(
        vocab_size=block.vocab_size, hidden_size=block.hidden_size, max_position_embeddings=POSITIONS,
        type_vocab_size=TYPES, hidden_dropout_prob=DROPOUT, pad_token_id=0, layer_norm_eps=block.norm.eps,
    )  # fmt: skip
    weight = block.token_embeddings.weight
    bert = BertEmbeddings(config).to(weight.device, weight.dtype)
    with torch.no_grad():
        bert.word_embeddings.weight.copy_(weight)
        bert.position_embeddings.weight.copy_(block.position.lookup_table)
        bert.token_type_embeddings.weight.copy_(block.token_type_embeddings.weight)
    return bert


def _fused_call(block, ids, types, compiled=False):
    from posembed.kernels.embedding import fused_embedding

    def call():
        return fused_embedding(
            ids, block.token_embeddings.weight, block.position.lookup_table, token_type_ids=types,
            type_weight=block.token_type_embeddings.weight, norm_weight=block.norm.weight, norm_bias=block.norm.bias,
            eps=block.norm.eps, dropout=DROPOUT, training=block.training, padding_idx=0, compiled=compiled,
        )  # fmt: skip

    return call


def _without_huge_pages(fn):
    """``fn`` with posembed's huge-page advice off: what the block does where THP is unavailable."""
    from posembed._utils.memory import huge_pages

    def call():
        with huge_pages(False):
            return fn()

    return call


def _implementations(block, ids, types, compile_reference: bool) -> tuple[dict, list, dict]:
    """``(callables by name, modules whose gradients to reset, notes of implementations that cannot run)``."""
    impls, modules, skipped = {}, [block], {}
    try:
        bert = _reference(block)
    except ModuleNotFoundError as error:
        skipped[REFERENCE] = failure_note(error)
    else:
        modules.append(bert)
        impls[REFERENCE] = lambda: bert(ids, token_type_ids=types)
    impls[BLOCK] = lambda: block(ids, token_type_ids=types)
    if cpu_tuned(ids.device):
        impls[FUSED] = _fused_call(block, ids, types)
        impls[BLOCK_SMALL_PAGES] = _without_huge_pages(impls[BLOCK])
    else:
        eager = _eager_copy(block)
        modules.append(eager)
        impls[BLOCK_EAGER] = lambda: eager(ids, token_type_ids=types)
        log.info("on %s: %s left out (tuned for the CPU; the block runs its compiled kernel there)",
                 ids.device, ", ".join((FUSED, FUSED_COMPILED, BLOCK_SMALL_PAGES)))  # fmt: skip
    if compile_reference and REFERENCE in impls:
        compiled = torch.compile(modules[1])
        impls[REFERENCE_COMPILED] = lambda: compiled(ids, token_type_ids=types)
    if compile_reference and cpu_tuned(ids.device):
        impls[FUSED_COMPILED] = _fused_call(block, ids, types, compiled=True)
    return impls, modules, skipped


def _eager_copy(block):
    """The same block with its fast paths off (``fused=False``), sharing nothing."""
    import copy

    eager = copy.deepcopy(block)
    eager.fused = False
    return eager


def _train_step(fn, modules, grad):
    params = [p for m in modules for p in m.parameters()]

    def step():
        for p in params:
            p.grad = None
        fn().backward(grad)

    return step


def _label(shape: dict, dtype: torch.dtype, device: torch.device) -> str:
    label = f"({shape['batch']}, {shape['length']}, {shape['width']}), vocab {shape['vocab']}"
    return label if cpu_tuned(device) else f"{label}, {_DTYPE_NAMES[dtype]}"


def run(quick: bool = False, repeats: int | None = None, device: str | torch.device | None = None) -> list[Row]:
    """Every pass of every implementation on ``device`` (default: the CPU); see the module docstring."""
    device = as_device(device)
    rows = []
    for dtype in (torch.float32,) if cpu_tuned(device) else CUDA_DTYPES:
        rows += _run_dtype(QUICK if quick else FULL, dtype, quick, repeats or (3 if quick else 7), device)
        if not cpu_tuned(device):
            torch._dynamo.reset()  # each dtype compiles its own graphs: keep under the recompile limit
    return rows


def _run_dtype(shape: dict, dtype: torch.dtype, quick: bool, repeats: int, device: torch.device) -> list[Row]:
    torch.manual_seed(0)
    block, ids, types = _setup(shape, device, dtype)
    impls, modules, skipped = _implementations(block, ids, types, compile_reference=not quick)
    warmup = 1 if quick else 2  # the compiled cases compile during warm-up
    label = _label(shape, dtype, device)
    grad = torch.randn(shape["batch"], shape["length"], shape["width"]).to(device, dtype)
    rows, forward = [], {}
    for name, backward, train in CPU_MODES if cpu_tuned(device) else CUDA_MODES:
        for module in modules:
            module.train(train)
        if backward:
            cases = {n: _train_step(fn, modules, grad) for n, fn in impls.items() if n != FUSED_COMPILED}
            times = compare(cases, warmup=warmup, repeats=repeats, device=device)
        else:
            cases = {n: fn for n, fn in impls.items() if not (train and n == FUSED_COMPILED)}
            with torch.no_grad():
                times = compare(cases, warmup=warmup, repeats=repeats, device=device)
            forward = forward or times
        case = f"{name} {label}"
        rows += rows_from_times(SECTION, case, times, REFERENCE)
        rows += [Row(SECTION, case, impl, note=note) for impl, note in skipped.items()]
    rows.append(_bandwidth_row(shape, forward, label, quick, device, dtype))
    return rows


def _bandwidth_row(
    shape: dict, forward: dict, label: str, quick: bool, device: torch.device, dtype: torch.dtype
) -> Row:
    """Minimal bytes of the forward (eval): read each token's word row once, write the output once."""
    tokens = shape["batch"] * shape["length"]
    size = torch.finfo(dtype).bits // 8
    minimal = 2 * tokens * shape["width"] * size + 2 * tokens * 8
    copy = copy_bandwidth(1 << 24 if quick else 1 << 27, device=device)
    extra = {"copy bandwidth GB/s": round(copy, 1), "minimal MB": round(minimal / 1e6, 1)}
    for name in (FUSED, FUSED_COMPILED, BLOCK, REFERENCE):
        if name in forward:
            rate = minimal / (median(forward[name]) * 1e-3) / 1e9
            extra[f"{name} GB/s"] = round(rate, 1)
            extra[f"{name} % of copy"] = round(100 * rate / copy, 1)
    return Row(SECTION, f"effective bandwidth, forward (eval) {label}", "minimal bytes / median time", extra=extra)


def targets(rows: list[Row]) -> list[dict]:
    """The CPU's targets (checked on the CPU)."""
    goals = (("forward (eval)", 3.0, BLOCK), ("forward (eval)", 3.0, FUSED_COMPILED), ("forward+backward", 2.0, BLOCK))
    return _targets(rows, goals, by_case=False)


def cuda_targets(rows: list[Row]) -> list[dict]:
    """Issue 23's: the block on CUDA at least 2x transformers' eager, every pass, train mode included."""
    return _targets(rows, tuple((name, 2.0, BLOCK) for name, _, _ in CUDA_MODES), by_case=True)


def _targets(rows: list[Row], goals: tuple, by_case: bool) -> list[dict]:
    """One target per goal and matching row, named by the goal (``by_case``: by the row's whole case)."""
    found = []
    for case, goal, impl in goals:
        for match in (r for r in rows if r.section == SECTION and r.case.startswith(case) and r.impl == impl):
            if match.speedup is None:
                continue
            found.append({
                "target": (f"embedding block {match.case if by_case else case}: "
                           f">= {goal:g}x transformers eager ({impl})"),
                "measured": f"{match.speedup:.2f}x ({match.median_ms:.2f} ms)",
                "met": match.speedup >= goal,
                "contention": None if by_case else CONTENTION,
            })  # fmt: skip
    return found
