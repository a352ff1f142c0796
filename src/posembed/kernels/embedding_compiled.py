"""The embedding block as one compiled kernel: gather, add, LayerNorm and dropout (CUDA's fast path).

:func:`embedding_formula` states the block in plain torch ops, in Hugging Face ``BertEmbeddings``'
order (Devlin et al. 2019): ``dropout(LayerNorm((word[ids] + type[tt]) + pos[pids]))``.
:func:`compiled_embedding` runs it through ``torch.compile``: on CUDA Inductor fuses the three
gathers, the sums, the LayerNorm and the dropout into one Triton kernel per row (and the backward
into the LayerNorm backward plus atomic scatter-adds into the tables' gradients), so the
activations make one round trip through memory instead of five, and nothing reads a value back
to the host.

It equals the eager block in eval (up to float rounding: the compiled reductions sum in another
order) and drops each element with the same probability ``p`` in training, kept values scaled by
``1 / (1 - p)``; its dropout masks come from Inductor's random stream (for the same seed they
differ from ``nn.Dropout``'s). The first call per shape (and per train/eval, grad/no-grad) compiles
for seconds.

:func:`compiled_applies` is the device policy: CUDA with Triton at hand. On the CPU the chunked
:func:`posembed.kernels.embedding.fused_embedding` stays the fast path (tuned and measured there).

Example:
    >>> word, pos, typ = torch.randn(10, 4), torch.randn(8, 4), torch.randn(2, 4)
    >>> ids = torch.tensor([[1, 2, 3]])
    >>> out = embedding_formula(ids, torch.arange(3), None, word, pos, typ, None, None, eps=1e-12)
    >>> ref = torch.nn.functional.layer_norm(word[ids] + typ[0] + pos[:3], (4,), eps=1e-12)
    >>> bool(torch.allclose(out, ref, atol=1e-6))
    True
"""

from __future__ import annotations

import functools
import logging

import torch
from torch import Tensor
from torch.nn import functional as F

__all__ = ["embedding_formula", "compiled_embedding", "compiled_applies"]

log = logging.getLogger(__name__)


def embedding_formula(
    input_ids: Tensor,
    position_ids: Tensor,
    token_type_ids: Tensor | None,
    word_weight: Tensor,
    position_weight: Tensor,
    type_weight: Tensor | None,
    norm_weight: Tensor | None,
    norm_bias: Tensor | None,
    *,
    eps: float,
    dropout: float = 0.0,
    training: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """``dropout(LayerNorm((word[ids] + type[tt]) + pos[pids]))`` in plain torch ops.

    ``token_type_ids=None`` adds type row 0 to every token (as BERT); ``type_weight=None`` adds
    no type row. ``padding_idx``: the token row that gets no gradient.

    Shape:
        input_ids ``(B, T)``; position_ids ``(T,)`` or ``(B, T)``; token_type_ids ``(B, T)``,
        ``(T,)`` or ``None``; tables ``(rows, C)``; norm parameters ``(C,)`` -> ``(B, T, C)``.
    """
    x = F.embedding(input_ids, word_weight, padding_idx)  # (B, T, C)
    if type_weight is not None:
        x = x + (type_weight[0] if token_type_ids is None else F.embedding(token_type_ids, type_weight))
    x = x + F.embedding(position_ids, position_weight)  # (T, C) or (B, T, C) broadcast
    x = F.layer_norm(x, (word_weight.shape[1],), norm_weight, norm_bias, eps)
    return F.dropout(x, dropout, training)


@functools.cache
def _compiled():
    return torch.compile(embedding_formula)


def compiled_embedding(*args, **kwargs) -> Tensor:
    """:func:`embedding_formula` compiled (one cached ``torch.compile``; Triton on CUDA).

    The caller checks the ids (:class:`~posembed.nn.embedding.block.TransformerEmbeddings` asserts their
    range on the device, see :func:`posembed.nn.embedding.checks.check_ids`). Same arguments and
    shapes as :func:`embedding_formula`.
    """
    return _compiled()(*args, **kwargs)


def compiled_applies(device: torch.device) -> bool:
    """Whether :func:`compiled_embedding` is the fast path on ``device``: CUDA, with Triton to compile to,
    and deterministic algorithms not requested (its backward scatter-adds with atomics).

    A CUDA machine without Triton keeps the eager block, logged once.

    >>> compiled_applies(torch.device("cpu"))
    False
    """
    return device.type == "cuda" and not torch.are_deterministic_algorithms_enabled() and _triton_available()


@functools.cache
def _triton_available() -> bool:
    from torch.utils._triton import has_triton

    available = has_triton()
    if not available:
        log.info("no Triton for torch.compile: the embedding block runs its eager path on CUDA")
    return available
