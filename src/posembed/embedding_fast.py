"""The two fast paths of :class:`~posembed.embeddings.TransformerEmbeddings`, run on its tables.

:meth:`TransformerEmbeddings._fused_path <posembed.embeddings.TransformerEmbeddings._fused_path>`
is the one dispatch point that picks a path; these functions only hand the block's token,
position, segment and LayerNorm tables to the kernel it picked:

- :func:`chunked_forward`: :func:`posembed.fused.embedding.fused_embedding` (the CPU);
- :func:`compiled_forward`: :func:`posembed.fused.embedding_compiled.compiled_embedding`, one
  compiled kernel (CUDA), the ids checked against the tables on the device first.

Both return ``LayerNorm((tok + seg) + pos)``, shape ``(B, T, C)``; the block applies its own
``dropout`` module after them.
"""

from __future__ import annotations

from torch import Tensor, nn

from posembed.embedding_checks import check_ids
from posembed.fused.embedding import fused_embedding
from posembed.fused.embedding_compiled import compiled_embedding

__all__ = ["chunked_forward", "compiled_forward"]


def chunked_forward(block: nn.Module, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor) -> Tensor:
    """The block as the chunked CPU kernel; ``block`` is a ``TransformerEmbeddings`` on a lookup table."""
    block.position.check_position_ids(position_ids)
    segments = block.token_type_embeddings
    return fused_embedding(
        input_ids,
        block.token_embeddings.weight,
        block.position.lookup_table,
        position_ids=position_ids,
        token_type_ids=token_type_ids,
        type_weight=None if segments is None else segments.weight,
        norm_weight=block.norm.weight,
        norm_bias=block.norm.bias,
        eps=block.norm.eps,
        padding_idx=block.pad_token_id,
    )


def compiled_forward(
    block: nn.Module, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor, default: bool
) -> Tensor:
    """The block as one compiled kernel. Given position ids are checked against the table on the
    device; the default ``arange(T)`` (``default=True``) by its length, read from the shape (no
    value read)."""
    table = block.position.lookup_table
    rows, scheme = table.shape[0], type(block.position).__name__
    if not default:
        check_ids(position_ids, "position_ids", rows, f"the {scheme} table's rows")
    elif input_ids.shape[1] > rows:
        raise ValueError(
            f"position_ids holds {input_ids.shape[1] - 1}, outside [0, {rows}): input_ids of length "
            f"{input_ids.shape[1]} take positions 0..{input_ids.shape[1] - 1}, and the {scheme} table has {rows} rows"
        )
    segments = block.token_type_embeddings
    return compiled_embedding(
        input_ids, position_ids, token_type_ids, block.token_embeddings.weight, table,
        None if segments is None else segments.weight, block.norm.weight, block.norm.bias,
        eps=block.norm.eps, dropout=0.0, training=False, padding_idx=block.pad_token_id,
    )  # fmt: skip
