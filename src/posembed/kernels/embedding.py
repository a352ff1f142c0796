"""Fused embedding block: ``LayerNorm(word[ids] + type[tt] + pos[pids])`` then dropout.

Computes exactly what Hugging Face ``BertEmbeddings`` computes (Devlin et al. 2019), in eval
and in training, with far less memory traffic on CPU:

- the token-type and position tables are indexed through one combined row id
  ``t * P + p`` (a ``(type x position, C)`` table of a few MiB carries the gradients, one
  scatter instead of two); the forward adds the type and then the position rows, in Hugging
  Face's order, so its sums are bit-identical;
- the work runs in row chunks of 512 KiB (170 rows of 768): the word rows are gathered
  straight into the output (``index_select(out=)``), the type and position rows are added in
  place, LayerNorm and dropout are applied to the chunk while it is in the core's L2 cache
  and written back. Every temporary lives in per-thread chunk buffers reused call after call
  (:func:`clear_workspace` frees them), so the loops allocate only the LayerNorm op's own
  chunk-sized results (heap blocks, reused by malloc); the only large fresh tensors are the
  output (advised to fault in huge pages) and, in training, the dropout mask;
- the backward recomputes the pre-norm sum chunk by chunk from the ids (nothing large is
  saved but the per-row mean and 1/std and the dropout mask), runs the LayerNorm backward
  on the chunk, and adds its rows into the table gradients with ``index_add_`` while they
  are still in cache; the word-table gradient is allocated with ``calloc`` (fresh zero
  pages), so only the rows of the batch's tokens are ever touched instead of zero-filling
  the whole ``(V, C)`` table.

Large fresh tensors page-fault heavily on glibc (blocks over 32 MiB go back to the OS on
free), so avoiding them is where the speed comes from.

When it applies: the additive combine (``word + position (+ type)``) of three lookup
tables with a LayerNorm after the sum: learned position tables, or any precomputed table
(a sinusoidal buffer) passed as ``position_weight``. Tables with ``requires_grad=False``
get no gradient and cost nothing in the backward. It does not cover ``concat``, schemes that
are not a table lookup, or ``inputs_embeds``.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from posembed._utils.checks import check_index_tensor, check_probability
from posembed._utils.memory import advise_huge_pages
from posembed._utils.torch_private import layer_norm_backward
from posembed.kernels.dropout import KeepMask

__all__ = ["fused_embedding", "combined_table", "clear_workspace", "CHUNK_ELEMENTS"]

#: Elements per row chunk (512 KiB of fp32, 170 rows of 768: the chunk's gather, sum,
#: LayerNorm and dropout stay in the core's L2 cache; bigger chunks stream through memory).
CHUNK_ELEMENTS = 1 << 17

_local = threading.local()
_NUMPY_DTYPES = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}


def combined_table(position_weight: Tensor, type_weight: Tensor | None = None) -> Tensor:
    """Fold the token-type table into the position table: row ``t * P + p = type[t] + pos[p]``.

    Args:
        position_weight: ``(P, C)`` position table.
        type_weight: ``(NT, C)`` token-type table, or ``None`` (one zero type).

    Shape:
        output ``(NT * P, C)``; differentiable with respect to both tables.

    >>> pos, typ = torch.arange(6.0).view(3, 2), torch.tensor([[0.0, 0.0], [10.0, 20.0]])
    >>> combined_table(pos, typ)[4]
    tensor([12., 23.])
    """
    if type_weight is None:
        return position_weight
    return (type_weight[:, None, :] + position_weight[None, :, :]).flatten(0, 1)  # (NT * P, C)


def fused_embedding(
    input_ids: Tensor,
    word_weight: Tensor,
    position_weight: Tensor,
    *,
    position_ids: Tensor | None = None,
    token_type_ids: Tensor | None = None,
    type_weight: Tensor | None = None,
    norm_weight: Tensor | None = None,
    norm_bias: Tensor | None = None,
    eps: float = 1e-12,
    dropout: float = 0.0,
    training: bool = False,
    padding_idx: int | None = None,
    compiled: bool = False,
) -> Tensor:
    """``dropout(LayerNorm(word[ids] + type[tt] + pos[pids]))``, fused and chunked.

    Same result and gradients as ``BertEmbeddings`` with the same tables (Devlin et al. 2019).

    Args:
        input_ids: ``(B, T)`` token ids in ``[0, V)``.
        word_weight: ``(V, C)`` token table.
        position_weight: ``(P, C)`` position table (learned or a fixed buffer).
        position_ids: ``(T,)`` or ``(B, T)`` positions in ``[0, P)``; ``None`` = ``arange(T)``.
        token_type_ids: ``(T,)`` or ``(B, T)`` segment ids in ``[0, NT)``; ``None`` = all 0.
        type_weight: ``(NT, C)`` token-type table, or ``None`` for none.
        norm_weight, norm_bias: LayerNorm affine parameters ``(C,)`` (``None``: not affine).
        eps: LayerNorm epsilon (BERT: 1e-12).
        dropout: drop probability, applied only when ``training``; kept values are scaled by
            ``1 / (1 - dropout)`` as ``nn.Dropout`` (see :class:`posembed.kernels.dropout.KeepMask`; its own random
            stream, so the masks differ from torch's for the same seed).
        training: apply dropout.
        padding_idx: token whose table row gets no gradient (``nn.Embedding(padding_idx=)``).
        compiled: for inference (no gradient needed, no dropout), run one ``torch.compile``'d
            loop instead (gather + add + LayerNorm in one pass; the first call per shape
            compiles for seconds). Ignored when a gradient or dropout is needed.

    Shape:
        output ``(B, T, C)`` in the tables' dtype.

    >>> V, P, C = 10, 8, 4
    >>> word, pos, typ = torch.randn(V, C), torch.randn(P, C), torch.randn(2, C)
    >>> ids = torch.tensor([[1, 2, 3]])
    >>> ref = torch.nn.functional.layer_norm(word[ids] + pos[:3] + typ[0], (C,), eps=1e-12)
    >>> out = fused_embedding(ids, word, pos, type_weight=typ)
    >>> bool(torch.allclose(out, ref, atol=1e-6))
    True
    """
    ids, rows = _check_inputs(input_ids, word_weight, position_weight, position_ids, token_type_ids, type_weight)
    _check_dtypes(input_ids, position_ids, token_type_ids, word_weight, position_weight, type_weight, norm_weight)
    check_probability(dropout, "dropout")
    table = combined_table(position_weight, type_weight)
    p = dropout if training else 0.0
    tensors = (word_weight, table, norm_weight, norm_bias)
    if (
        compiled
        and p == 0.0
        and not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors))
    ):
        out = torch.empty(ids.shape[0], word_weight.shape[1], dtype=word_weight.dtype, device=word_weight.device)
        advise_huge_pages(out)  # the compiled loop writes straight into it (no second buffer)
        _compiled_forward()(out, ids, rows, word_weight, table, norm_weight, norm_bias, eps)
        return out.view(*input_ids.shape, word_weight.shape[1])  # (B, T, C)
    # the forward adds in Hugging Face's order, (word + type) + position, from the separate tables
    # (bit-identical sums); gradients flow through the combined table
    parts = None if type_weight is None else (type_weight.detach(), position_weight.detach())
    out = _FusedEmbedding.apply(ids, rows, word_weight, table, norm_weight, norm_bias, eps, p, padding_idx, parts)
    return out.view(*input_ids.shape, word_weight.shape[1])  # (B, T, C)


def _forward_formula(out, ids, rows, word, table, weight, bias, eps: float) -> None:
    summed = word.index_select(0, ids) + table.index_select(0, rows)  # (B * T, C)
    out.copy_(torch.nn.functional.layer_norm(summed, (word.shape[1],), weight, bias, eps))


@functools.cache
def _compiled_forward():
    return torch.compile(_forward_formula, dynamic=None)


def _check_inputs(input_ids, word_weight, position_weight, position_ids, token_type_ids, type_weight):
    """Validate and return flat ``(token ids, combined-table rows)``, both ``(B * T,)``."""
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (B, T), got {tuple(input_ids.shape)}")
    if word_weight.dim() != 2 or position_weight.dim() != 2 or word_weight.shape[1] != position_weight.shape[1]:
        raise ValueError(
            f"word_weight {tuple(word_weight.shape)} and position_weight {tuple(position_weight.shape)} "
            "must be (V, C) and (P, C) with the same C"
        )
    if type_weight is not None and (type_weight.dim() != 2 or type_weight.shape[1] != word_weight.shape[1]):
        raise ValueError(f"type_weight must be (NT, {word_weight.shape[1]}), got {tuple(type_weight.shape)}")
    batch, length = input_ids.shape
    num_positions = position_weight.shape[0]
    check_index_tensor(input_ids, "input_ids", word_weight.shape[0], "the word table's vocab size")
    if position_ids is None:
        if length > num_positions:
            raise ValueError(f"sequence length {length} exceeds the position table's {num_positions} rows")
        position_ids = torch.arange(length, device=input_ids.device)
    check_index_tensor(position_ids, "position_ids", num_positions, "the position table's size")
    rows = _expand(position_ids, batch, length, "position_ids")
    if token_type_ids is not None:
        num_types = 1 if type_weight is None else type_weight.shape[0]
        check_index_tensor(token_type_ids, "token_type_ids", num_types, "the token-type table's size")
        rows = rows + _expand(token_type_ids, batch, length, "token_type_ids") * num_positions
    return input_ids.reshape(-1), rows.reshape(-1)


def _check_dtypes(input_ids, position_ids, token_type_ids, word_weight, *tables) -> None:
    """Integer ids as ``int64``/``int32`` and every table in the word table's dtype (the gathers
    write into one buffer); ``TransformerEmbeddings`` sends other inputs to its eager path."""
    for name, ids in (("input_ids", input_ids), ("position_ids", position_ids), ("token_type_ids", token_type_ids)):
        if ids is not None and ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"fused_embedding takes int64 or int32 {name}, got {ids.dtype}")
    for table in tables:
        if table is not None and table.dtype != word_weight.dtype:
            raise TypeError(
                f"fused_embedding needs every table in one dtype: word {word_weight.dtype}, another {table.dtype}"
            )


def _expand(index: Tensor, batch: int, length: int, name: str) -> Tensor:
    if index.shape == (length,) or index.shape == (1, length):
        return index.reshape(1, length).expand(batch, length)
    if index.shape != (batch, length):
        raise ValueError(f"{name} has shape {tuple(index.shape)}; expected ({length},) or ({batch}, {length})")
    return index


def _chunks(num_rows: int, width: int) -> list[tuple[int, int]]:
    step = max(1, CHUNK_ELEMENTS // max(width, 1))
    return [(start, min(start + step, num_rows)) for start in range(0, num_rows, step)]


class _Scratch:
    """Per-thread row-chunk buffers, reused call after call (a few hundred KiB each).

    The gathered rows and the dropout bits live here, so the loops make no large allocation:
    no call depends on where glibc's (dynamic) mmap threshold happens to stand, and the
    chunk's working set stays in the core's cache from the gather to the write-back.
    """

    def __init__(self) -> None:
        self.buffers: dict[str, Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], like: Tensor, dtype: torch.dtype | None = None) -> Tensor:
        dtype = like.dtype if dtype is None else dtype
        numel = math.prod(shape)
        buffer = self.buffers.get(name)
        if buffer is None or buffer.numel() < numel or buffer.dtype != dtype or buffer.device != like.device:
            buffer = torch.empty(numel, dtype=dtype, device=like.device)
            self.buffers[name] = buffer
        return buffer[:numel].view(shape)


def _scratch() -> _Scratch:
    scratch = getattr(_local, "scratch", None)
    if scratch is None:
        scratch = _local.scratch = _Scratch()
    return scratch


def clear_workspace() -> None:
    """Free this thread's cached chunk buffers."""
    _local.scratch = None


class _FusedEmbedding(torch.autograd.Function):
    """Chunked gather + add + LayerNorm + dropout with a recomputing backward."""

    @staticmethod
    def forward(ctx, ids, rows, word, table, weight, bias, eps, p, padding_idx, parts):
        num_rows, width = ids.shape[0], word.shape[1]
        scratch = _scratch()
        out = torch.empty(num_rows, width, dtype=word.dtype, device=word.device)  # (B * T, C)
        advise_huge_pages(out)  # fault the fresh output in 2 MiB pages, not 4 KiB ones
        mean = torch.empty(num_rows, 1, dtype=word.dtype, device=word.device)
        rstd = torch.empty_like(mean)
        keep = torch.empty(num_rows, width, dtype=torch.bool, device=word.device) if p > 0 else None
        drops = None
        if keep is not None:
            advise_huge_pages(keep)
            drops = KeepMask(p, word.device)
        ctx.scale = 1.0 / (1.0 - p)  # exactly nn.Dropout's scale
        additions = _row_additions(table, rows, parts)
        for start, stop in _chunks(num_rows, width):
            chunk = out[start:stop]
            torch.index_select(word, 0, ids[start:stop], out=chunk)
            _add_rows(chunk, additions, start, stop, scratch)
            # the functional op: its ``out=`` variant is generated as "compute, then copy" in ATen
            normed, mean[start:stop], rstd[start:stop] = torch.native_layer_norm(chunk, (width,), weight, bias, eps)
            if drops is None:
                chunk.copy_(normed)
            else:
                drops.fill(keep[start:stop], scratch)
                # multiplying by the mask's bytes as uint8 is ~3x faster than by bool
                torch.mul(normed, keep[start:stop].view(torch.uint8), out=chunk).mul_(ctx.scale)
        ctx.save_for_backward(ids, rows, word, table, weight, bias, mean, rstd, keep)
        ctx.padding_idx, ctx.parts, ctx.eps = padding_idx, parts, eps
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        ids, rows, word, table, weight, bias, mean, rstd, keep = ctx.saved_tensors
        need = ctx.needs_input_grad
        num_rows, width = ids.shape[0], word.shape[1]
        scratch = _scratch()
        grad_out = grad_out.contiguous()
        # the word-table gradient starts as fresh zero pages (only the batch's rows are touched)
        grad_word = _lazy_zeros(word) if need[2] else None
        grad_table = torch.zeros_like(table) if need[3] else None
        grad_weight = torch.zeros(width, dtype=mean.dtype, device=word.device) if need[4] else None
        grad_bias = torch.zeros(width, dtype=mean.dtype, device=word.device) if need[5] else None
        mask = [grad_word is not None or grad_table is not None, need[4], need[5]]
        additions = _row_additions(table, rows, ctx.parts)
        for start, stop in _chunks(num_rows, width):
            grad = grad_out[start:stop]
            if keep is not None:
                grad = torch.mul(
                    grad, keep[start:stop].view(torch.uint8), out=scratch.get("grad", grad.shape, grad)
                ).mul_(ctx.scale)
            summed = scratch.get("summed", grad.shape, word)
            torch.index_select(word, 0, ids[start:stop], out=summed)
            _add_rows(summed, additions, start, stop, scratch)
            dx, dw, db = layer_norm_backward(
                grad, summed, width, mean[start:stop], rstd[start:stop], weight, bias, mask, ctx.eps
            )
            # scatter the chunk's rows while they are still in cache
            if grad_word is not None:
                grad_word.index_add_(0, ids[start:stop], dx)
            if grad_table is not None:
                grad_table.index_add_(0, rows[start:stop], dx)
            if grad_weight is not None:
                grad_weight += dw
            if grad_bias is not None:
                grad_bias += db
        if grad_word is not None and ctx.padding_idx is not None:
            grad_word[ctx.padding_idx].zero_()
        grad_weight = None if grad_weight is None else grad_weight.to(weight.dtype)
        grad_bias = None if grad_bias is None else grad_bias.to(bias.dtype)
        return None, None, grad_word, grad_table, grad_weight, grad_bias, None, None, None, None


def _row_additions(table: Tensor, rows: Tensor, parts: tuple[Tensor, Tensor] | None) -> list[tuple[Tensor, Tensor]]:
    """The ``(table, row ids)`` pairs whose rows are added to each token's word row.

    With the separate ``(type, position)`` tables the two are added one after the other, as
    Hugging Face does, so the sum is bit-identical to ``BertEmbeddings``; otherwise one gather
    from the combined table. Shape: ``rows`` ``(B * T,)`` combined-table rows ``t * P + p``.
    """
    if parts is None:
        return [(table, rows)]
    type_weight, position_weight = parts
    num_positions = position_weight.shape[0]
    return [(type_weight, rows // num_positions), (position_weight, rows % num_positions)]


def _add_rows(chunk: Tensor, additions: list[tuple[Tensor, Tensor]], start: int, stop: int, scratch: _Scratch) -> None:
    """``chunk += source[index[start:stop]]`` for every addition, in place, via a scratch buffer."""
    gathered = scratch.get("rows", chunk.shape, chunk)
    for source, index in additions:
        torch.index_select(source, 0, index[start:stop], out=gathered)
        chunk += gathered


def _lazy_zeros(like: Tensor) -> Tensor:
    """Zeros shaped like ``like`` whose pages the OS zero-fills on first touch (``calloc``).

    ``torch.zeros`` writes every byte: for a (30522, 768) word gradient that is 94 MB of
    page faults and stores each step, although a batch touches only the rows of its tokens.
    ``numpy.zeros`` allocates with ``calloc``, which hands out fresh zero pages untouched.
    """
    if like.device.type == "cpu" and like.dtype in _NUMPY_DTYPES:
        return torch.from_numpy(np.zeros(tuple(like.shape), dtype=_NUMPY_DTYPES[like.dtype]))
    return torch.zeros_like(like)
