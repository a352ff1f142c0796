"""The embedding block at BERT-base shape: posembed against transformers' ``BertEmbeddings``.

Forward (eval, no grad) and forward+backward (training mode, dropout 0.1, gradients reset to
``None`` every step as ``zero_grad()`` does). Every implementation shares the same tables.
posembed's block is also measured with its huge-page advice off ("4 KiB pages"): on a kernel
without transparent huge pages every fresh page faults separately. Also reports the effective
bandwidth of the minimal bytes moved (read the word rows, write the output) against this
machine's copy bandwidth, measured in the same run.

On a device other than the CPU (``device="cuda"``) the same cases time there, except the
CPU-tuned ones (:func:`posembed.devices.cpu_tuned`): the fused kernel and the huge-page
variant are left out (logged), and posembed's block runs its eager path, as it does there.
"""

from __future__ import annotations

import logging

import torch

from posembed.bench.harness import Row, as_device, compare, copy_bandwidth, median, rows_from_times
from posembed.devices import cpu_tuned

log = logging.getLogger(__name__)

SECTION = "embedding block"
REFERENCE = "transformers BertEmbeddings (eager)"
FUSED = "posembed fused_embedding"
FUSED_COMPILED = "posembed fused_embedding (compiled, inference)"
BLOCK = "posembed TransformerEmbeddings"
BLOCK_SMALL_PAGES = "posembed TransformerEmbeddings (4 KiB pages)"
FULL = {"batch": 32, "length": 512, "width": 768, "vocab": 30522}
QUICK = {"batch": 4, "length": 128, "width": 768, "vocab": 30522}


def _setup(shape: dict, device: torch.device):
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    config = BertConfig(vocab_size=shape["vocab"], hidden_size=shape["width"], hidden_dropout_prob=0.1)
    bert = BertEmbeddings(config)
    ids = torch.randint(1, shape["vocab"], (shape["batch"], shape["length"]))
    types = torch.zeros_like(ids)
    types[:, shape["length"] // 2 :] = 1  # sentence pairs: second half is segment B
    return bert.to(device), config, ids.to(device), types.to(device)


def _fused_call(bert, config, ids, types, compiled=False):
    from posembed.fused.embedding import fused_embedding

    def call():
        return fused_embedding(
            ids, bert.word_embeddings.weight, bert.position_embeddings.weight,
            token_type_ids=types, type_weight=bert.token_type_embeddings.weight,
            norm_weight=bert.LayerNorm.weight, norm_bias=bert.LayerNorm.bias, eps=config.layer_norm_eps,
            dropout=config.hidden_dropout_prob, training=bert.training, padding_idx=config.pad_token_id,
            compiled=compiled,
        )

    return call


def _posembed_block(bert, config):
    """posembed's TransformerEmbeddings holding copies of the same tables (it dispatches to the fused path)."""
    from posembed.embeddings import TransformerEmbeddings
    from posembed.schemes.learned import LearnedAbsolute

    block = TransformerEmbeddings(
        config.vocab_size, config.hidden_size, position=LearnedAbsolute(config.max_position_embeddings, config.hidden_size),
        type_vocab_size=config.type_vocab_size, pad_token_id=config.pad_token_id, dropout=config.hidden_dropout_prob,
    )
    with torch.no_grad():
        block.token_embeddings.weight.copy_(bert.word_embeddings.weight)
        block.position.embedding.weight.copy_(bert.position_embeddings.weight)
        block.token_type_embeddings.weight.copy_(bert.token_type_embeddings.weight)
    return block


def _without_huge_pages(fn):
    """``fn`` with posembed's huge-page advice off: what the block does where THP is unavailable."""
    from posembed._memory import huge_pages

    def call():
        with huge_pages(False):
            return fn()

    return call


def _implementations(bert, config, ids, types, compile_reference: bool) -> dict:
    impls = {REFERENCE: lambda: bert(ids, token_type_ids=types), FUSED: _fused_call(bert, config, ids, types)}
    block = _posembed_block(bert, config).to(ids.device)
    impls[BLOCK] = lambda: block(ids, token_type_ids=types)
    impls[BLOCK_SMALL_PAGES] = _without_huge_pages(lambda: block(ids, token_type_ids=types))
    impls["_block"] = block
    if compile_reference:
        compiled = torch.compile(bert)
        impls["transformers BertEmbeddings (torch.compile)"] = lambda: compiled(ids, token_type_ids=types)
        impls[FUSED_COMPILED] = _fused_call(bert, config, ids, types, compiled=True)
    if not cpu_tuned(ids.device):
        left_out = [name for name in (FUSED, FUSED_COMPILED, BLOCK_SMALL_PAGES) if impls.pop(name, None)]
        log.info("on %s: %s left out (tuned for the CPU; the block runs its eager path there)",
                 ids.device, ", ".join(left_out))  # fmt: skip
    return impls


def _train_step(fn, modules, grad):
    params = [p for m in modules for p in m.parameters()]

    def step():
        for p in params:
            p.grad = None
        fn().backward(grad)

    return step


def run(quick: bool = False, repeats: int | None = None, device: str | torch.device | None = None) -> list[Row]:
    """The forward and forward+backward cases on ``device`` (default: the CPU)."""
    device = as_device(device)
    shape = QUICK if quick else FULL
    repeats = repeats or (3 if quick else 7)
    torch.manual_seed(0)
    bert, config, ids, types = _setup(shape, device)
    impls = _implementations(bert, config, ids, types, compile_reference=not quick)
    block = impls.pop("_block", None)
    modules = [bert] + ([block] if block is not None else [])
    warmup = 1 if quick else 2  # the compiled reference compiles during warm-up
    label = f"({shape['batch']}, {shape['length']}, {shape['width']}), vocab {shape['vocab']}"

    for m in modules:
        m.eval()
    with torch.no_grad():
        forward = compare(impls, warmup=warmup, repeats=repeats, device=device)
    for m in modules:
        m.train()
    grad = torch.randn(shape["batch"], shape["length"], shape["width"]).to(device)
    steps = {name: _train_step(fn, modules, grad) for name, fn in impls.items() if name != FUSED_COMPILED}
    backward = compare(steps, warmup=warmup, repeats=repeats, device=device)

    rows = rows_from_times(SECTION, f"forward (eval) {label}", forward, REFERENCE)
    rows += rows_from_times(SECTION, f"forward+backward (train, dropout 0.1) {label}", backward, REFERENCE)
    rows.append(_bandwidth_row(shape, forward, label, quick, device))
    return rows


def _bandwidth_row(shape: dict, forward: dict, label: str, quick: bool, device: torch.device) -> Row:
    """Minimal bytes of the forward: read each token's word row once, write the output once."""
    tokens = shape["batch"] * shape["length"]
    minimal = 2 * tokens * shape["width"] * 4 + 2 * tokens * 8
    copy = copy_bandwidth(1 << 24 if quick else 1 << 27, device=device)
    extra = {"copy bandwidth GB/s": round(copy, 1), "minimal MB": round(minimal / 1e6, 1)}
    for name in (FUSED, FUSED_COMPILED, REFERENCE):
        if name in forward:
            rate = minimal / (median(forward[name]) * 1e-3) / 1e9
            extra[f"{name} GB/s"] = round(rate, 1)
            extra[f"{name} % of copy"] = round(100 * rate / copy, 1)
    return Row(SECTION, f"effective bandwidth, forward {label}", "minimal bytes / median time", extra=extra)


def targets(rows: list[Row]) -> list[dict]:
    found = []
    for case, goal, impl in (("forward (eval)", 3.0, BLOCK), ("forward (eval)", 3.0, FUSED_COMPILED), ("forward+backward", 2.0, BLOCK)):
        match = [r for r in rows if r.section == SECTION and r.case.startswith(case) and r.impl == impl]
        if match and match[0].speedup is not None:
            found.append({
                "target": f"embedding block {case}: >= {goal:g}x transformers eager ({impl})",
                "measured": f"{match[0].speedup:.2f}x ({match[0].median_ms:.1f} ms)",
                "met": match[0].speedup >= goal,
            })
    return found
