"""DeBERTa's disentangled relative attention (He, Liu, Gao & Chen, ICLR 2021; DeBERTa-v2/v3).

With ``delta(i, j)`` the (log-bucketed) relative position ``i - j`` shifted into a table of
``2k`` relative embeddings ``R`` (row ``clamp(delta + k, 0, 2k - 1)``), DeBERTa adds to ``q_i . k_j``

- content-to-position (``c2p``): ``q_i . K_r[delta(i, j)]`` with ``K_r = R W_{k,r}``;
- position-to-content (``p2c``): ``k_j . Q_r[delta(i, j)]`` with ``Q_r = R W_{q,r}``;

all divided by ``sqrt(D * s)``, ``s = 1 + (number of terms)`` (3 with both), the content term
``q_i . k_j`` included: the scheme declares that scale (:meth:`DebertaRelative.attention_scale`)
and :class:`~posembed.nn.attention.layer.SelfAttention` applies it, so the layer's scores are DeBERTa's.
v2 buckets the distances logarithmically beyond ``position_buckets / 2`` (:func:`log_bucket_position`),
LayerNorms ``R`` (``norm_rel_ebd="layer_norm"``) and, with ``share_att_key``, uses the layer's own
query/key projections as ``W_{q,r}``, ``W_{k,r}``. This follows transformers'
``DisentangledSelfAttention.disentangled_attention_bias`` (both terms index the same row).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_number, check_positive_int
from posembed.schemes.base import BiasScheme, ScoreMod
from posembed.schemes.bias.relative import check_qk, relative_position_fn, relative_positions

__all__ = ["DebertaRelative", "log_bucket_position", "relative_rows", "ATTENTION_TERMS"]

#: the two disentangled terms, by DeBERTa's ``pos_att_type`` names
ATTENTION_TERMS = ("c2p", "p2c")


def log_bucket_position(relative: Tensor, bucket_size: int, max_position: int) -> Tensor:
    """DeBERTa-v2's log buckets: ``|d| <= bucket_size/2`` kept, farther ``sign(d) * (mid + ceil(...))``.

    With ``mid = bucket_size // 2``, a distance ``|d| > mid`` maps to
    ``sign(d) * (mid + ceil(log(|d| / mid) / log((max_position - 1) / mid) * (mid - 1)))``,
    computed in float32 as transformers does (so the ``ceil`` agrees bit for bit).
    Elementwise only (usable inside a FlexAttention ``score_mod``).

    Shape:
        any integer shape -> same shape, long.

    >>> log_bucket_position(torch.tensor([-200, -9, -4, 0, 4, 5, 9, 63, 200]), 8, 64)
    tensor([-9, -5, -4,  0,  4,  5,  5,  7,  9])
    """
    mid = bucket_size // 2
    distance = relative.abs()
    far = distance.clamp(min=mid).to(torch.float32) / mid
    log_ratio = torch.log(far) / torch.log(torch.tensor((max_position - 1) / mid, dtype=torch.float32))
    bucketed = (torch.ceil(log_ratio * (mid - 1)) + mid).long() * torch.sign(relative).long()
    return torch.where(distance <= mid, relative.long(), bucketed)


def relative_rows(relative: Tensor, span: int, bucket_size: int | None, max_position: int) -> Tensor:
    """Row of the ``2 * span`` relative table for each ``i - j``: ``clamp(bucket(i - j) + span, 0, 2 span - 1)``."""
    if bucket_size is not None:
        relative = log_bucket_position(relative, bucket_size, max_position)
    return (relative + span).clamp(0, 2 * span - 1)


class DebertaRelative(BiasScheme):
    """DeBERTa(-v2/v3) disentangled attention as a bias: ``(c2p + p2c) / sqrt(D * s)``.

    Owns the relative embeddings ``rel_embeddings`` (``(2k, C)``, ``k = position_buckets`` or,
    without buckets, ``max_relative_positions``), their LayerNorm (``layer_norm=True``, v2/v3)
    and, unless ``share_att_key``, the position projections ``pos_key_proj`` (c2p) and
    ``pos_query_proj`` (p2c), ``Linear(C, H * D)``. With ``share_att_key=True`` call
    :meth:`share_projections` with the attention layer's query and key projections (they stay
    the layer's parameters; the scheme keeps unregistered references).

    HF DeBERTa shares one ``rel_embeddings`` (+ LayerNorm) across its layers and gives each layer
    its own position projections; here each layer gets a scheme (copy the shared table into
    each, or assign one ``rel_embeddings`` module to all). The content term: DeBERTa divides
    ``q . k`` by ``sqrt(D * s)`` too; :meth:`attention_scale` declares it, and
    :class:`~posembed.nn.attention.layer.SelfAttention` (with ``scale=None``) uses it in place of
    ``1/sqrt(D)``, on every backend: with the same weights, the layer's attention probabilities
    and output are transformers' ``DisentangledSelfAttention``'s. The relative embeddings'
    dropout of HF (``pos_dropout``) is not applied.

    Backends: eager, SDPA, chunked (materialised bias) and FlexAttention: :meth:`score_mod`
    captures ``q . K_r`` and ``k . Q_r`` for the ``2k`` rows, ``(B, H, T, 2k)``, and buckets
    elementwise. Not ``fused`` (it reads q/k). Serves causal and bidirectional attention.

    Args:
        dim: width C of the relative embeddings (DeBERTa's ``hidden_size``).
        num_heads: number of attention heads H.
        head_dim: width D of each head.
        position_buckets: ``k`` of the log buckets (v2/v3: 256), or ``None`` for none (v1).
        max_relative_positions: the bucketing's ``max_position`` (and ``k`` without buckets).
        attention_terms: which of ``"c2p"``, ``"p2c"`` to add (``pos_att_type``).
        share_att_key: use the attention layer's projections (v3) instead of owning some.
        layer_norm: LayerNorm the relative embeddings (``norm_rel_ebd="layer_norm"``).
        layer_norm_eps: its epsilon (DeBERTa-v2: 1e-7).
        init_std: std of the normal init of the relative embeddings.

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``; integers.
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``: required.
        - bias output: ``(B, H, Tq, Tk)`` in ``q.dtype``, already divided by ``sqrt(D * s)``.

    Example:
        >>> deberta = DebertaRelative(16, 2, 8, position_buckets=8, max_relative_positions=32)
        >>> q, k = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
        >>> deberta.bias(torch.arange(5), torch.arange(5), q, k).shape
        torch.Size([1, 2, 5, 5])
    """

    name = "deberta"
    paper = "He et al. 2021 (DeBERTa, ICLR)"
    extrapolates = False
    needs_qk = True
    built_for = ("num_heads", "head_dim")
    head_dim: int

    def __init__(
        self,
        dim: int,
        num_heads: int,
        head_dim: int,
        *,
        position_buckets: int | None = 256,
        max_relative_positions: int = 512,
        attention_terms: tuple[str, ...] = ATTENTION_TERMS,
        share_att_key: bool = False,
        layer_norm: bool = True,
        layer_norm_eps: float = 1e-7,
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_heads, head_dim)
        self.dim = check_positive_int(dim, "dim")
        buckets = None if position_buckets is None else check_positive_int(position_buckets, "position_buckets")
        self.position_buckets = buckets
        self.max_relative_positions = check_positive_int(max_relative_positions, "max_relative_positions")
        if buckets is not None and max_relative_positions <= buckets // 2 + 1:
            raise ValueError(
                f"max_relative_positions={max_relative_positions} must exceed position_buckets // 2 + 1 = "
                f"{buckets // 2 + 1}: the log buckets span the distances between them"
            )
        terms = tuple(attention_terms)
        if not terms or any(t not in ATTENTION_TERMS for t in terms) or len(set(terms)) != len(terms):
            raise ValueError(f"attention_terms={attention_terms!r}: give one or both of {ATTENTION_TERMS}, each once")
        self.attention_terms = tuple(t for t in ATTENTION_TERMS if t in terms)
        self.share_att_key = bool(share_att_key)
        self.init_std = check_number(init_std, "init_std", 0.0)
        self.span = self.position_buckets if self.position_buckets is not None else max_relative_positions
        factory = {"device": device, "dtype": dtype}
        self.rel_embeddings = nn.Embedding(2 * self.span, dim, **factory)
        self.norm = nn.LayerNorm(dim, eps=layer_norm_eps, **factory) if layer_norm else None
        width = num_heads * head_dim
        own = not self.share_att_key
        self.pos_key_proj = nn.Linear(dim, width, **factory) if own and "c2p" in self.attention_terms else None
        self.pos_query_proj = nn.Linear(dim, width, **factory) if own and "p2c" in self.attention_terms else None
        self._shared: tuple[nn.Linear, nn.Linear] | None = None
        self.reset_parameters()

    @property
    def scale(self) -> float:
        """``1 / sqrt(D * s)``, ``s = 1 + len(attention_terms)``: DeBERTa's scale of every term."""
        return self.attention_scale(self.head_dim)

    def attention_scale(self, width: int) -> float:
        """DeBERTa's factor on ``q . k``: ``1 / sqrt(width * s)``, ``s = 1 + len(attention_terms)``.

        For ``width = head_dim`` it is :attr:`scale`, the factor of the c2p and p2c terms.

        >>> DebertaRelative(16, 2, 8).attention_scale(8) == 1 / math.sqrt(8 * 3)
        True
        """
        return 1.0 / math.sqrt(width * (1 + len(self.attention_terms)))

    def reset_parameters(self) -> None:
        nn.init.normal_(self.rel_embeddings.weight, std=self.init_std)
        for module in (self.norm, self.pos_key_proj, self.pos_query_proj):
            if module is not None:
                module.reset_parameters()

    def share_projections(self, query_proj: nn.Linear, key_proj: nn.Linear) -> None:
        """Use the attention layer's ``Linear(C, H * D)`` query/key projections on ``R`` (``share_att_key``)."""
        if not self.share_att_key:
            raise ValueError("share_projections needs DebertaRelative(..., share_att_key=True)")
        for name, proj in (("query_proj", query_proj), ("key_proj", key_proj)):
            if not isinstance(proj, nn.Linear) or (proj.in_features, proj.out_features) != (
                self.dim,
                self.num_heads * self.head_dim,
            ):
                raise ValueError(
                    f"{name} must be nn.Linear({self.dim}, {self.num_heads * self.head_dim}), got {proj!r}"
                )
        self._shared = (query_proj, key_proj)

    def relative_table(self) -> Tensor:
        """``R``: the ``(2k, C)`` relative embeddings, LayerNormed when ``layer_norm``."""
        table = self.rel_embeddings.weight
        return self.norm(table) if self.norm is not None else table

    def _projections(self) -> tuple[nn.Linear | None, nn.Linear | None]:
        if not self.share_att_key:
            return self.pos_query_proj, self.pos_key_proj
        if self._shared is None:
            raise ValueError(
                "DebertaRelative(share_att_key=True) projects R with the attention layer's query/key "
                "projections: call scheme.share_projections(layer.q_proj, layer.k_proj) first"
            )
        query_proj, key_proj = self._shared
        return (query_proj if "p2c" in self.attention_terms else None), (
            key_proj if "c2p" in self.attention_terms else None
        )

    def _check_qk(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None, k: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        return check_qk("DebertaRelative", self.num_heads, self.head_dim, q_positions, k_positions, q, k)

    def row_logits(self, q: Tensor, k: Tensor) -> tuple[Tensor | None, Tensor | None]:
        """``q . K_r`` ``(B, H, Tq, 2k)`` (c2p) and ``k . Q_r`` ``(B, H, Tk, 2k)`` (p2c), scaled."""
        table = self.relative_table()
        query_proj, key_proj = self._projections()
        shape = (2 * self.span, self.num_heads, self.head_dim)
        c2p = p2c = None
        if key_proj is not None:
            pos_key = key_proj(table.to(key_proj.weight.dtype)).view(shape).to(q.dtype)  # (2k, H, D)
            c2p = torch.einsum("bhid,rhd->bhir", q, pos_key) * self.scale
        if query_proj is not None:
            pos_query = query_proj(table.to(query_proj.weight.dtype)).view(shape).to(k.dtype)  # (2k, H, D)
            p2c = torch.einsum("bhjd,rhd->bhjr", k, pos_query) * self.scale
        return c2p, p2c

    def _rows(self, relative: Tensor) -> Tensor:
        return relative_rows(relative, self.span, self.position_buckets, self.max_relative_positions)

    def bias(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> Tensor:
        q, k = self._check_qk(q_positions, k_positions, q, k)
        c2p, p2c = self.row_logits(q, k)
        batch, heads, q_len, k_len = q.shape[0], self.num_heads, q.shape[2], k.shape[2]
        rows = self._rows(-relative_positions(q_positions, k_positions))  # (..., Tq, Tk), from i - j
        rows = rows.unsqueeze(-3).expand(batch, heads, q_len, k_len)  # (B, H, Tq, Tk)
        bias = torch.zeros(batch, heads, q_len, k_len, dtype=q.dtype, device=q.device)
        if c2p is not None:
            bias = bias + torch.gather(c2p, -1, rows)  # q_i . K_r[row(i, j)]
        if p2c is not None:
            bias = bias + torch.gather(p2c.transpose(-1, -2), -2, rows)  # k_j . Q_r[row(i, j)]
        return bias

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod:
        q, k = self._check_qk(q_positions, k_positions, q, k)
        c2p, p2c = self.row_logits(q, k)
        relative = relative_position_fn(q_positions, k_positions)
        rows_of = self._rows

        def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            row = rows_of(-relative(b, q_idx, kv_idx))
            value = torch.zeros_like(score)
            if c2p is not None:
                value = value + c2p[b, h, q_idx, row].to(score.dtype)
            if p2c is not None:
                value = value + p2c[b, h, kv_idx, row].to(score.dtype)
            return score + value

        return score_mod

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
            f"position_buckets={self.position_buckets}, max_relative_positions={self.max_relative_positions}, "
            f"attention_terms={self.attention_terms}, share_att_key={self.share_att_key}"
        )
