"""The two fast paths of :class:`~posembed.nn.embedding.block.TransformerEmbeddings`, run on its tables.

:meth:`TransformerEmbeddings._fused_path <posembed.nn.embedding.block.TransformerEmbeddings._fused_path>`
is the one dispatch point that picks a path (a :class:`FusedPath`, run by :func:`run_fused_path`
through one table); these functions only hand the block's token,
position, segment and LayerNorm tables to the kernel it picked:

- :func:`chunked_forward`: :func:`posembed.kernels.embedding.fused_embedding` (the CPU);
- :func:`compiled_forward`: :func:`posembed.kernels.embedding_compiled.compiled_embedding`, one
  compiled kernel (CUDA), the ids checked against the tables on the device first.

Both return ``LayerNorm((tok + seg) + pos)``, shape ``(B, T, C)``; the block applies its own
``dropout`` module after them.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from torch import Tensor, nn

from posembed.kernels.embedding import fused_embedding
from posembed.kernels.embedding_compiled import compiled_embedding
from posembed.nn.embedding.checks import check_ids

__all__ = ["FusedPath", "run_fused_path", "chunked_forward", "compiled_forward"]


class FusedPath(str, Enum):
    """A fast path of the embedding block (``str``-valued: ``FusedPath.CHUNKED == "chunked"``).

    Example:
        >>> FusedPath("compiled") is FusedPath.COMPILED, f"{FusedPath.CHUNKED}"
        (True, 'chunked')
    """

    CHUNKED = "chunked"  #: :func:`chunked_forward`, the CPU kernel
    COMPILED = "compiled"  #: :func:`compiled_forward`, one compiled kernel (CUDA)

    def __str__(self) -> str:  # the name, in f-strings too (StrEnum from Python 3.11)
        return self.value


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


#: the function that runs each path: ``(block, input_ids, token_type_ids, position_ids, default) -> (B, T, C)``
_PATHS: dict[FusedPath, Callable[[nn.Module, Tensor, Tensor | None, Tensor, bool], Tensor]] = {
    FusedPath.CHUNKED: lambda block, ids, types, positions, default: chunked_forward(block, ids, types, positions),
    FusedPath.COMPILED: compiled_forward,
}


def run_fused_path(
    path: FusedPath,
    block: nn.Module,
    input_ids: Tensor,
    token_type_ids: Tensor | None,
    position_ids: Tensor,
    default: bool,
) -> Tensor:
    """Run ``path`` on ``block``'s tables: ``LayerNorm((tok + seg) + pos)``, before the block's dropout.

    ``default`` says ``position_ids`` is the block's default ``arange(T)`` (:func:`compiled_forward`).
    """
    return _PATHS[FusedPath(path)](block, input_ids, token_type_ids, position_ids, default)
