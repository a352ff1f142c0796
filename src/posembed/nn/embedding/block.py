"""The transformer input-embedding block: token + position + segment, LayerNorm, dropout.

This is BERT's ``BertEmbeddings`` block (Devlin et al. 2019) with the position table replaced by
any *absolute* posembed scheme. Rotary and bias schemes act inside attention and are refused here
with a ``TypeError`` that says so.

Two ways to put the position in:

- ``combine="add"`` (BERT, Vaswani et al. 2017): ``x = (tok + seg) + pos``, in exactly the order
  Hugging Face uses, so with a :class:`~posembed.LearnedAbsolute` table the block is numerically
  the same as ``transformers``' ``BertEmbeddings``.
- ``combine="concat"``: ``x = [tok | pos] + seg``. The token width is ``hidden_size - pos.dim``;
  or give ``token_dim`` and a ``Linear(token_dim + pos.dim -> hidden_size)`` projects
  ``[tok | pos]`` back to the hidden width. Segment embeddings are ``hidden_size`` wide and are
  added after the concatenation (and projection).

Every part can also be read in the hidden width (:meth:`TransformerEmbeddings.components`), and
:meth:`TransformerEmbeddings.position_embeddings` gives the position vectors a model re-injects at
every layer: for all three variants, ``combined == token + position + segment`` (up to float
rounding), since the projection is linear.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from posembed._utils.checks import check_number, check_pad_token, check_positive_int, check_table_size
from posembed._utils.devices import cpu_tuned
from posembed._utils.torch_private import has_hooks
from posembed.kernels.embedding_compiled import compiled_applies
from posembed.nn.embedding.checks import (
    COMBINES,
    INDEX_DTYPES,
    as_index,
    check_embedding_ids,
    check_norm_and_dropout,
    check_type_vocab,
    token_width,
)
from posembed.nn.embedding.fast import FusedPath, run_fused_path
from posembed.schemes.base import AbsoluteScheme, Kind, require_kind

__all__ = ["TransformerEmbeddings", "EmbeddingComponents", "COMBINES"]

logger = logging.getLogger(__name__)


class EmbeddingComponents(NamedTuple):
    """The parts of one forward pass, each ``(B, T, C)`` in the hidden width C.

    ``token + position + segment`` equals ``combined`` up to float rounding; ``output`` is
    ``LayerNorm(combined)`` (before dropout).
    """

    token: Tensor
    position: Tensor
    segment: Tensor
    combined: Tensor
    output: Tensor


class TransformerEmbeddings(nn.Module):
    """Token + absolute position + segment embeddings, then LayerNorm and dropout (BERT).

    Args:
        vocab_size: number of token ids.
        hidden_size: output width C.
        position: an absolute scheme (``LearnedAbsolute``, ``Sinusoidal``, ...) or ``None`` for no
            absolute position (NoPE, or positions handled in attention). A scheme of coordinates
            (``Sinusoidal2D`` / ``Sinusoidal3D``: class attribute ``num_axes`` A > 1) needs
            explicit ``position_ids`` holding each token's coordinates.
        type_vocab_size: number of segment (token type) ids; 0 = no segment table.
        pad_token_id: the token id whose embedding is zero and gets no gradient (``padding_idx``).
        combine: ``"add"`` or ``"concat"`` (see the module docstring).
        token_dim: token width for ``concat`` with a projection back to ``hidden_size``.
        layer_norm_eps: LayerNorm epsilon (1e-12 in BERT).
        dropout: dropout probability after the LayerNorm.
        token_scale: factor on the token vectors before combining. 1 as BERT; Vaswani et al. use
            ``sqrt(C)`` with a fixed sinusoidal table, so that tokens (initialised at std
            ``C**-0.5``) and the unit-amplitude sinusoids start on the same scale.
        fused: run a fast path where one applies (see :meth:`_fused_path`; the default): on the
            CPU the chunked :func:`~posembed.kernels.embedding.fused_embedding`, on CUDA one
            compiled kernel (:func:`~posembed.kernels.embedding_compiled.compiled_embedding`; the
            first call per shape compiles). They compute ``LayerNorm(tok + seg + pos)`` with far
            less memory traffic; the block's own ``dropout`` module then runs on it, so its hooks
            fire and its mask is ``nn.Dropout``'s for the same seed. A replaced or hooked
            ``norm`` (or token tables, or position scheme) turns the fast path off.
            ``False`` always runs the eager ``nn.LayerNorm`` + ``nn.Dropout`` path.
        device, dtype: where the block's own tables are made and their dtype. A ``position``
            scheme passed in is moved to ``device`` (``position.to(device=device)``) and keeps
            its dtype; the fast paths need every table in one dtype (build it with ``dtype=``).

    Shape:
        - input_ids: ``(B, T)`` integers in ``[0, vocab_size)``.
        - token_type_ids: ``(B, T)``, ``(1, T)`` or ``(T,)`` in ``[0, type_vocab_size)``; ``None`` = all 0.
        - position_ids: ``(B, T)``, ``(1, T)`` or ``(T,)``; ``None`` = ``arange(T)``. For a scheme of
          A-D coordinates: ``(B, T, A)``, ``(1, T, A)`` or ``(T, A)``, required.
        - output: ``(B, T, C)``.

    Example:
        >>> from posembed import LearnedAbsolute
        >>> emb = TransformerEmbeddings(100, 8, position=LearnedAbsolute(16, 8))
        >>> emb(torch.tensor([[2, 5, 7]]), token_type_ids=torch.tensor([[0, 0, 1]])).shape
        torch.Size([1, 3, 8])
        >>> cat = TransformerEmbeddings(100, 8, position=LearnedAbsolute(16, 3), combine="concat")
        >>> cat.token_embeddings.embedding_dim, cat.position_embeddings(torch.arange(2)).shape
        (5, torch.Size([2, 8]))
        >>> from posembed import Sinusoidal2D
        >>> from posembed.schemes.absolute.sinusoidal_nd import grid_coordinates
        >>> patches = TransformerEmbeddings(100, 8, position=Sinusoidal2D(8))
        >>> patches(torch.tensor([[4, 9, 2, 7]]), position_ids=grid_coordinates(2, 2)).shape  # a 2 x 2 grid
        torch.Size([1, 4, 8])
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        *,
        position: AbsoluteScheme | None,
        type_vocab_size: int = 2,
        pad_token_id: int | None = 0,
        combine: str = "add",
        token_dim: int | None = None,
        layer_norm_eps: float = 1e-12,
        dropout: float = 0.1,
        token_scale: float = 1.0,
        fused: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        require_kind(position, (Kind.ABSOLUTE,), "TransformerEmbeddings")
        self.vocab_size = check_positive_int(vocab_size, "vocab_size")
        self.hidden_size = check_positive_int(hidden_size, "hidden_size")
        self.type_vocab_size = check_type_vocab(type_vocab_size)
        self.pad_token_id = check_pad_token(pad_token_id, vocab_size)
        self.combine_mode = combine
        self.token_scale = check_number(token_scale, "token_scale", -float("inf"))
        self.fused = bool(fused)
        self.token_dim = token_width(hidden_size, position, combine, token_dim)
        check_norm_and_dropout(layer_norm_eps, dropout)
        check_table_size(vocab_size, self.token_dim, "the token table (vocab_size, token_dim)", device, dtype)
        check_table_size(
            type_vocab_size, hidden_size, "the segment table (type_vocab_size, hidden_size)", device, dtype
        )
        factory = {"device": device, "dtype": dtype}
        self.token_embeddings = nn.Embedding(vocab_size, self.token_dim, padding_idx=pad_token_id, **factory)
        # the scheme passed in joins the block's device; it keeps its dtype (as build_model does)
        self.position = position if position is None or device is None else position.to(device=device)
        #: coordinates per position id: 1 for sequence schemes, A for ``Sinusoidal2D`` / ``3D``
        self.num_axes: int = 1 if position is None else position.num_axes
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size, **factory) if type_vocab_size else None
        self.projection = (
            nn.Linear(self.token_dim + position.dim, hidden_size, **factory)
            if combine == "concat" and token_dim is not None
            else None
        )
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps, **factory)
        self.dropout = nn.Dropout(dropout)
        self._reset_own_parameters()  # a position scheme passed in keeps its (maybe pretrained) values

    # ------------------------------------------------------------------ set-up

    def reset_parameters(self, init_std: float = 0.02) -> None:
        """BERT's init of every part, the position scheme's included (its own ``reset_parameters``)."""
        self._reset_own_parameters(init_std)
        if self.position is not None and hasattr(self.position, "reset_parameters"):
            self.position.reset_parameters()

    def _reset_own_parameters(self, init_std: float = 0.02) -> None:
        """normal(0, ``init_std``) token/segment tables, zero padding row, identity LayerNorm.

        With a ``token_scale`` other than 1 the token table starts at std ``1 / token_scale``, so
        scaled tokens start at unit std (Vaswani et al.: std ``C**-0.5`` times ``sqrt(C)``).
        """
        token_std = init_std if self.token_scale == 1.0 else 1.0 / self.token_scale
        nn.init.normal_(self.token_embeddings.weight, std=token_std)
        if self.pad_token_id is not None:
            with torch.no_grad():
                self.token_embeddings.weight[self.pad_token_id].zero_()
        if self.token_type_embeddings is not None:
            nn.init.normal_(self.token_type_embeddings.weight, std=init_std)
        if self.projection is not None:
            self.projection.reset_parameters()
        self.norm.reset_parameters()

    @property
    def max_positions(self) -> int | None:
        """Largest number of positions the block can embed (``None`` = unlimited)."""
        return None if self.position is None else self.position.max_positions

    # ------------------------------------------------------------------ forward

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> Tensor:
        """Embed ``input_ids``: ``dropout(LayerNorm(combine(tok, pos, seg)))``, shape ``(B, T, C)``."""
        default = position_ids is None
        position_ids = self._check_inputs(input_ids, token_type_ids, position_ids)
        path = self._fused_path(position_ids, input_ids, token_type_ids)
        if path is not None:  # LayerNorm(tok + seg + pos) fused; the block's own dropout module after it
            return self.dropout(run_fused_path(path, self, input_ids, token_type_ids, position_ids, default))
        positions = None if self.position is None else self.position(position_ids)
        combined = self.combine(self.token_vectors(input_ids), positions, token_type_ids)
        return self.dropout(self.norm(combined))

    # ------------------------------------------------------------------ fast path

    def _fused_applies(
        self, position_ids: Tensor, input_ids: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> bool:
        """Whether a fast path runs (:meth:`_fused_path` names it)."""
        return self._fused_path(position_ids, input_ids, token_type_ids) is not None

    def _fused_path(
        self, position_ids: Tensor, input_ids: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> FusedPath | None:
        """The one dispatch point of the fast paths: a :class:`~posembed.nn.embedding.fast.FusedPath`
        (``CHUNKED``, ``COMPILED``) or ``None`` (eager).

        Both compute the same block with far less memory traffic, for ``add`` of a lookup table
        (learned positions), BERT's token scale, 1-D/2-D position ids, ``int64``/``int32`` ids,
        every table in one dtype, not under ``torch.compile`` (the compiler fuses the eager path
        itself), ``fused=True``, and submodules the kernels stand for (:meth:`_plain_submodules`:
        plain ``nn.Embedding``/``nn.LayerNorm``, no hooks). They add in Hugging Face's order, so
        the result equals the eager path; ``self.dropout`` runs after either. Which one runs is the device's:

        - ``"chunked"``: tables on the CPU, where it was tuned and measured to win
          (:func:`posembed.kernels.embedding.fused_embedding`, :func:`posembed._utils.devices.cpu_tuned`);
        - ``"compiled"``: tables on CUDA (:func:`posembed.kernels.embedding_compiled.compiled_applies`),
          one compiled kernel (:func:`~posembed.kernels.embedding_compiled.compiled_embedding`);
        - ``None`` elsewhere (``meta``) and for what the fast paths do not cover.
        """
        if not (self.fused and self.combine_mode == "add" and self.token_scale == 1.0 and self.position is not None):
            return None
        if not self._plain_submodules():
            return None
        table = self.position.lookup_table
        ids = (input_ids, position_ids, token_type_ids)
        tables = (
            table,
            self.norm.weight,
            None if self.token_type_embeddings is None else self.token_type_embeddings.weight,
        )
        dtype = self.token_embeddings.weight.dtype
        covered = (
            table is not None
            and position_ids.dim() in (1, 2)
            and all(i is None or i.dtype in INDEX_DTYPES for i in ids)
            and all(t is None or t.dtype == dtype for t in tables)
            and not torch.compiler.is_compiling()
        )
        if not covered:
            return None
        device = self.token_embeddings.weight.device
        if cpu_tuned(device):
            return FusedPath.CHUNKED
        return FusedPath.COMPILED if compiled_applies(device) else None

    def _plain_submodules(self) -> bool:
        """Whether the fused kernels compute what the submodules would: ``token_embeddings`` (and
        ``token_type_embeddings``) plain ``nn.Embedding``, ``norm`` a plain ``nn.LayerNorm`` over the
        last dimension with weight and bias, and no hook on them, on ``position`` or registered
        globally (``dropout`` always runs as the module). Replaced or hooked, they run themselves."""
        segments = self.token_type_embeddings
        norm = self.norm
        parts = [self.token_embeddings, norm, self.position] + ([] if segments is None else [segments])
        return (
            type(self.token_embeddings) is nn.Embedding
            and (segments is None or type(segments) is nn.Embedding)
            and type(norm) is nn.LayerNorm
            and len(norm.normalized_shape) == 1
            and norm.weight is not None
            and norm.bias is not None
            and not has_hooks(*parts)
        )

    def token_vectors(self, input_ids: Tensor) -> Tensor:
        """The token table's rows times ``token_scale``, shape ``(B, T, token_dim)``."""
        tokens = self.token_embeddings(as_index(input_ids))
        return tokens if self.token_scale == 1.0 else tokens.mul_(self.token_scale)

    def combine(self, tokens: Tensor, positions: Tensor | None, token_type_ids: Tensor | None) -> Tensor:
        """The combine step, in one place: raw token and position vectors plus segments.

        ``add``: ``(tok + seg) + pos`` (Hugging Face's order). ``concat``: ``proj([tok | pos]) + seg``.
        Position math may be fp32; it is cast to the token dtype here.

        Shape:
            tokens ``(B, T, token_dim)``; positions ``(T, P)`` / ``(B, T, P)`` or ``None``;
            token_type_ids ``(B, T)`` / ``(T,)`` or ``None`` -> ``(B, T, C)``.
        """
        if positions is not None:
            positions = positions.type_as(tokens)
        if self.combine_mode == "add":
            if self.token_type_embeddings is None:
                return tokens if positions is None else tokens + positions
            x = tokens + self._segment_vectors(token_type_ids)
            return x if positions is None else x.add_(positions)
        positions = positions.expand(*tokens.shape[:-1], positions.shape[-1])  # (B, T, P)
        x = torch.cat((tokens, positions), dim=-1)  # (B, T, token_dim + P)
        if self.projection is not None:
            x = self.projection(x)  # (B, T, C)
        if self.token_type_embeddings is not None:
            x = x.add_(self._segment_vectors(token_type_ids))
        return x

    # ------------------------------------------------------------------ parts in hidden width

    def position_embeddings(self, position_ids: Tensor) -> Tensor:
        """Position vectors in the hidden width, as the block adds them (for re-injection).

        ``add``: the scheme's vectors; ``concat``: ``[0 | pos]``; ``concat`` with a projection:
        ``W_pos @ pos`` (the projection's position columns, no bias).

        Shape:
            position_ids ``(T,)`` or ``(B, T)`` (coordinates ``(T, A)`` or ``(B, T, A)``) ->
            ``(T, C)`` or ``(B, T, C)``.
        """
        if self.position is None:
            raise ValueError("this TransformerEmbeddings has no position scheme (position=None)")
        positions = self.position(position_ids)
        dtype = self.norm.weight.dtype
        if self.combine_mode == "add":
            return positions.to(dtype)
        if self.projection is None:
            return F.pad(positions.to(dtype), (self.token_dim, 0))
        return F.linear(positions.to(dtype), self.projection.weight[:, self.token_dim :])

    def components(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> EmbeddingComponents:
        """Every part of the forward pass in the hidden width (no dropout), for analysis.

        Example:
            >>> from posembed import LearnedAbsolute
            >>> emb = TransformerEmbeddings(50, 4, position=LearnedAbsolute(8, 4)).eval()
            >>> parts = emb.components(torch.tensor([[1, 2, 3]]))
            >>> torch.allclose(parts.output, emb(torch.tensor([[1, 2, 3]])))
            True
        """
        position_ids = self._check_inputs(input_ids, token_type_ids, position_ids)
        raw_tokens = self.token_vectors(input_ids)
        raw_positions = None if self.position is None else self.position(position_ids)
        combined = self.combine(raw_tokens, raw_positions, token_type_ids)
        shape = combined.shape
        token = self._token_in_hidden(raw_tokens)
        position = (
            combined.new_zeros(shape) if self.position is None else self.position_embeddings(position_ids).expand(shape)
        )
        segment = (
            combined.new_zeros(shape)
            if self.token_type_embeddings is None
            else self._segment_vectors(token_type_ids).expand(shape)
        )
        return EmbeddingComponents(token, position, segment, combined, self.norm(combined))

    def _token_in_hidden(self, tokens: Tensor) -> Tensor:
        if self.combine_mode == "add":
            return tokens
        if self.projection is None:
            return F.pad(tokens, (0, self.hidden_size - self.token_dim))
        weight = self.projection.weight[:, : self.token_dim]
        return F.linear(tokens, weight, self.projection.bias)

    def _segment_vectors(self, token_type_ids: Tensor | None) -> Tensor:
        """Segment vectors ``(B, T, C)``; with no ids, segment 0's row ``(C,)`` (as BERT)."""
        if token_type_ids is None:
            return self.token_type_embeddings.weight[0]
        return self.token_type_embeddings(as_index(token_type_ids))

    # ------------------------------------------------------------------ checks

    def _check_inputs(self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None) -> Tensor:
        """Validate the three id tensors; return the position ids (or coordinates) to use."""
        if token_type_ids is not None and self.token_type_embeddings is None:
            raise ValueError("token_type_ids given, but this block has no segment table (type_vocab_size=0)")
        scheme = None if self.position is None else type(self.position).__name__
        return check_embedding_ids(
            input_ids,
            token_type_ids,
            position_ids,
            vocab_size=self.vocab_size,
            type_vocab_size=self.type_vocab_size,
            num_axes=self.num_axes,
            scheme=scheme,
        )

    def extra_repr(self) -> str:
        return (
            f"vocab_size={self.vocab_size}, hidden_size={self.hidden_size}, combine={self.combine_mode!r}, "
            f"token_scale={self.token_scale:g}, type_vocab_size={self.type_vocab_size}, "
            f"pad_token_id={self.pad_token_id}, fused={self.fused}"
        )
