"""Multi-head self-attention that takes a positional scheme of any kind.

- rotary schemes (RoPE, its scaling variants, xPos) rotate the queries and keys;
- bias schemes (ALiBi, T5 bias, Shaw, NoPE) add ``b(h, i, j)`` to the scaled logits;
  the ones that count only real keys (CoPE) also get the key padding mask;
- absolute schemes are refused: they belong to the input embeddings
  (:class:`~posembed.nn.embedding.block.TransformerEmbeddings`).

The attention itself runs on one of several backends chosen at a single dispatch point
(:func:`posembed.nn.attention.backends.choose_backend`): SDPA, FlexAttention, a chunked pure
PyTorch path (memory O(T * chunk) for bias schemes, trains on CPU) and the eager reference.

TUPE-A untied position attention (Ke et al. 2021) is available as an additive term: given
position vectors ``p``, the logits become
``((x W^Q)(x W^K)^T + (p U^Q)(p U^K)^T) / sqrt(2 D)``, computed without a ``T x T`` tensor by
concatenating ``p U^Q`` to the queries and ``p U^K`` to the keys.

The softmax scale of ``q . k`` is decided in one place, :attr:`SelfAttention.softmax_scale`:
an explicit ``scale``, else the scheme's :meth:`~posembed.schemes.base.PositionScheme.attention_scale`
(``1 / sqrt(D)``, or ``1 / sqrt(2 D)`` with TUPE, unless the scheme declares another: DeBERTa's
``1 / sqrt(D (1 + terms))``); every backend applies that one number.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_number, check_positive_int
from posembed.nn.attention.backends import Backend, choose_backend, run_backend
from posembed.nn.attention.inputs import AttentionInputs, adds_bias
from posembed.schemes.base import BiasScheme, Kind, PositionScheme, RotaryScheme, require_kind
from posembed.schemes.positions import default_positions, resolve_positions

__all__ = ["SelfAttention", "ProjectionView", "fuse_legacy_qkv", "fused_qkv_shapes"]

#: state-dict names of the separate projections that checkpoints held before ``qkv_proj``
LEGACY_QKV = ("q_proj", "k_proj", "v_proj")


class SelfAttention(nn.Module):
    """Multi-head self-attention over any rotary or bias scheme (or none).

    Args:
        dim: model width C; must be divisible by ``num_heads``.
        num_heads: number of heads H; head dim ``D = dim // num_heads``.
        scheme: a rotary or bias :class:`~posembed.schemes.base.PositionScheme`, or ``None``
            (no position information inside attention). Absolute schemes raise ``TypeError``.
            ``scheme.check_attention`` is called once here (head-count mismatch, xPos without
            ``causal``, odd head dim for RoPE raise ``ValueError``).
        causal: mask keys after the query (decoder).
        dropout: dropout on the attention probabilities (training only).
        backend: a :class:`~posembed.nn.attention.backends.Backend` or its name: ``"auto"``, ``"sdpa"``,
            ``"flex"``, ``"fused"``, ``"chunked"`` or ``"eager"`` (``ValueError`` otherwise); see
            :func:`posembed.nn.attention.backends.choose_backend` for the ``"auto"`` rule and the
            logged fallbacks.
        bias: whether the q/k/v/output projections have biases.
        untied_dim: width of the position vectors for TUPE-A untied position attention
            (adds per-layer ``U^Q``, ``U^K``); ``None`` turns it off.
        chunk_size: query rows per chunk of the ``"chunked"`` backend.
        compile_flex: run the ``"flex"`` backend through ``torch.compile`` (fused kernel, no
            ``T x T`` scores; compiles once per shape). Off by default: PyTorch's uncompiled
            FlexAttention is a reference implementation that materialises the scores. When
            ``backend="auto"`` picks flex (bias schemes on CUDA) it always runs compiled. Compiled
            off the CPU, heads narrower than 16 channels never reach the kernel (SDPA, or heads
            zero-padded to 16: :func:`~posembed.nn.attention.backends.choose_backend`).
        scale: the factor on ``q . k`` before the softmax, a positive number, on every backend;
            ``None`` (default): ``scheme.attention_scale(width)`` with ``width`` the q/k width (D,
            2D with TUPE), which is ``1 / sqrt(width)`` unless the scheme declares the scale of
            its paper (:class:`~posembed.schemes.bias.deberta.DebertaRelative`: ``1 / sqrt(D (1 + terms))``).
            :attr:`softmax_scale` is the number used.

    The layer owns ``scheme`` as a submodule (``.to()``, ``parameters()`` and ``state_dict()``
    see it); given a ``device``, the layer moves the scheme there (``scheme.to(device=device)``:
    the scheme keeps its own dtype, fp32 position math, as
    :func:`~posembed.nn.model.transformer.build_model`). A model may hand one scheme to all its
    layers: torch counts a shared submodule's parameters once, and
    :class:`~posembed.nn.model.transformer.TransformerModel` saves them once.

    Shape:
        - x: ``(B, T, C)`` in the weights' dtype (a ``TypeError`` otherwise, outside ``torch.autocast``).
        - position_ids: ``(T,)`` or ``(B, T)``; ``None`` means ``arange(T)``. A rotary scheme of
          ``num_axes = A > 1`` (axial, Pixtral, M-RoPE) takes coordinates ``(T, A)`` or ``(B, T, A)``.
        - attention_mask: ``(B, T)`` padding mask, 1/True for real tokens.
        - position_vectors: ``(T, P)`` or ``(B, T, P)`` with ``P = untied_dim`` (TUPE only).
        - output: ``(B, T, C)``.

    Example:
        >>> attn = SelfAttention(16, 4, causal=True)
        >>> attn(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        scheme: PositionScheme | None = None,
        causal: bool = False,
        dropout: float = 0.0,
        backend: Backend | str = "auto",
        bias: bool = True,
        untied_dim: int | None = None,
        chunk_size: int = 256,
        compile_flex: bool = False,
        scale: float | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        _check_arguments(dim, num_heads, scheme, dropout)
        self.scale = None if scale is None else _check_scale(scale)
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        if scheme is not None:
            scheme.check_attention(num_heads=num_heads, head_dim=self.head_dim, causal=causal)
        self.chunk_size = check_positive_int(chunk_size, "chunk_size")
        self.compile_flex = compile_flex
        self.scheme = scheme if scheme is None or device is None else scheme.to(device=device)
        self.causal = causal
        self.dropout = dropout
        self.backend = backend
        self.untied_dim = None if untied_dim is None else check_positive_int(untied_dim, "untied_dim")
        factory = {"device": device, "dtype": dtype}
        #: the query, key and value projections as one ``Linear(C, 3C)`` (rows: q, then k, then v)
        self.qkv_proj = nn.Linear(dim, 3 * dim, bias=bias, **factory)
        self.out_proj = nn.Linear(dim, dim, bias=bias, **factory)
        if self.untied_dim is not None:
            self.pos_q = nn.Linear(self.untied_dim, dim, bias=bias, **factory)
            self.pos_k = nn.Linear(self.untied_dim, dim, bias=bias, **factory)

    @property
    def backend(self) -> Backend:
        """The requested backend (``AUTO`` or one to run); :meth:`backend_for` says which one a call runs.

        Assigning a :class:`~posembed.nn.attention.backends.Backend` or its name checks it (``ValueError``).
        """
        return self._backend

    @backend.setter
    def backend(self, value: Backend | str) -> None:
        self._backend = Backend.parse(value)

    @property
    def q_proj(self) -> ProjectionView:
        """The query projection, a ``Linear(C, C)`` view of rows ``[0, C)`` of :attr:`qkv_proj`."""
        return ProjectionView(self.qkv_proj, 0, self.dim)

    @property
    def k_proj(self) -> ProjectionView:
        """The key projection, a ``Linear(C, C)`` view of rows ``[C, 2C)`` of :attr:`qkv_proj`."""
        return ProjectionView(self.qkv_proj, 1, self.dim)

    @property
    def v_proj(self) -> ProjectionView:
        """The value projection, a ``Linear(C, C)`` view of rows ``[2C, 3C)`` of :attr:`qkv_proj`."""
        return ProjectionView(self.qkv_proj, 2, self.dim)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        fuse_legacy_qkv(state_dict, prefix)  # checkpoints saved before the fused projection
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def softmax_scale(self) -> float:
        """The factor on ``q . k`` before the softmax (see ``scale`` in the class docstring)."""
        if self.scale is not None:
            return self.scale
        width = self.head_dim if self.untied_dim is None else 2 * self.head_dim  # TUPE: q, k doubled
        return 1.0 / math.sqrt(width) if self.scheme is None else self.scheme.attention_scale(width)

    def reset_parameters(self) -> None:
        for module in self.children():
            if isinstance(module, nn.Linear):
                module.reset_parameters()

    def extra_repr(self) -> str:
        untied = f", untied_dim={self.untied_dim}" if self.untied_dim is not None else ""
        scale = f", scale={self.scale:g}" if self.scale is not None else ""
        return (
            f"dim={self.dim}, num_heads={self.num_heads}, causal={self.causal}, "
            f"backend={self.backend.value!r}, dropout={self.dropout}{untied}{scale}"
        )

    def forward(
        self,
        x: Tensor,
        position_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_vectors: Tensor | None = None,
    ) -> Tensor:
        """Attend; see the class docstring for shapes."""
        inp = self._inputs(x, position_ids, attention_mask, position_vectors)
        backend = self._choose(inp)
        compile_flex = self.compile_flex or (self.backend is Backend.AUTO and backend == Backend.FLEX)  # auto: compiled
        out = run_backend(backend, inp, chunk_size=self.chunk_size, compile_flex=compile_flex)  # (B, H, T, D)
        batch, length, _ = x.shape
        out = out.transpose(1, 2).reshape(batch, length, self.dim)  # (B, T, C)
        return self.out_proj(out)

    def backend_for(
        self,
        x: Tensor,
        position_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_vectors: Tensor | None = None,
    ) -> Backend:
        """The :class:`~posembed.nn.attention.backends.Backend` that ``forward`` would run on these
        arguments, in this mode (``training``) and grad mode; writes no state.

        It builds the same inputs as ``forward`` (the projections run) and asks the same
        :func:`~posembed.nn.attention.backends.choose_backend`, so the two cannot disagree; a
        fallback is logged once, as ``forward`` logs it.

        Example:
            >>> from posembed.schemes.bias.alibi import ALiBi
            >>> attn = SelfAttention(16, 4, scheme=ALiBi(4), causal=True, backend="fused").eval()
            >>> attn.backend_for(torch.randn(1, 5, 16))
            <Backend.FUSED: 'fused'>
        """
        return self._choose(self._inputs(x, position_ids, attention_mask, position_vectors))

    def _choose(self, inp: AttentionInputs) -> Backend:
        """The one decision ``forward`` and :meth:`backend_for` share."""
        return choose_backend(self.backend, inp, adds_bias(inp.scheme), self.training, compile_flex=self.compile_flex)

    def _inputs(
        self, x: Tensor, position_ids: Tensor | None, attention_mask: Tensor | None, position_vectors: Tensor | None
    ) -> AttentionInputs:
        """Check the arguments and build what a backend reads: projected, rotated (and untied) q, k, v."""
        self._check_x(x)
        batch, length, _ = x.shape
        if isinstance(self.scheme, RotaryScheme) and self.scheme.num_axes > 1:
            positions = default_positions(length, x.device)  # coordinates are the scheme's to check
        else:
            positions = resolve_positions(position_ids, length, x.device)
        if positions.dim() == 2 and positions.shape[0] not in (1, batch):
            raise ValueError(f"position_ids has batch size {positions.shape[0]} but x has {batch}")
        key_mask = self._key_mask(attention_mask, batch, length)
        qkv = self.qkv_proj(x).view(batch, length, 3, self.num_heads, self.head_dim)  # (B, T, 3, H, D)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, D)
        if isinstance(self.scheme, RotaryScheme):
            q, k = self.scheme(q, k, position_ids)  # None keeps the scheme's cached arange path
        bias_scheme = self.scheme if isinstance(self.scheme, BiasScheme) else None
        qk = (q, k) if bias_scheme is not None and bias_scheme.needs_qk else None
        q, k = self._untie(q, k, position_vectors, batch, length)
        return AttentionInputs(
            q=q,
            k=k,
            v=v,
            scale=self.softmax_scale,
            causal=self.causal,
            positions=positions,
            key_mask=key_mask,
            scheme=bias_scheme,
            qk=qk,
            dropout=self.dropout if self.training else 0.0,
        )

    def _check_x(self, x: Tensor) -> None:
        if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != self.dim:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (B, T, {self.dim}), got {shape}")
        weight = self.qkv_proj.weight.dtype
        if x.dtype != weight and not torch.is_autocast_enabled(x.device.type):
            raise TypeError(
                f"x has dtype {x.dtype} but this layer's weights are {weight}: cast one of them "
                f"(x.to({weight}) or layer.to({x.dtype})), or run under torch.autocast"
            )

    def _heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def _key_mask(self, attention_mask: Tensor | None, batch: int, length: int) -> Tensor | None:
        if attention_mask is None:
            return None
        if not isinstance(attention_mask, Tensor):
            raise TypeError(f"attention_mask must be a tensor, got {type(attention_mask).__name__}")
        if attention_mask.dtype.is_floating_point or attention_mask.dtype.is_complex:
            raise TypeError(f"attention_mask must hold 0/1 integers or booleans, got dtype {attention_mask.dtype}")
        if tuple(attention_mask.shape) != (batch, length):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}; expected (B, T) = ({batch}, {length}), "
                f"1 for real tokens and 0 for padding"
            )
        return attention_mask != 0

    def _untie(
        self, q: Tensor, k: Tensor, position_vectors: Tensor | None, batch: int, length: int
    ) -> tuple[Tensor, Tensor]:
        """``(q, k)``; with TUPE-A, ``p U^Q`` appended to q and ``p U^K`` to k (width 2D)."""
        if self.untied_dim is None:
            if position_vectors is not None:
                raise ValueError("position_vectors were given but this layer has no untied_dim (TUPE is off)")
            return q, k
        if position_vectors is None:
            raise ValueError(f"this layer uses TUPE untied attention: pass position_vectors (T, {self.untied_dim})")
        if position_vectors.shape[-1] != self.untied_dim or position_vectors.shape[-2] != length:
            raise ValueError(
                f"position_vectors has shape {tuple(position_vectors.shape)}; expected ({length}, {self.untied_dim}) "
                f"or (B, {length}, {self.untied_dim})"
            )
        p = position_vectors.expand(batch, length, self.untied_dim)  # (B, T, P)
        q = torch.cat([q, self._heads(self.pos_q(p))], dim=-1)  # (B, H, T, 2D)
        k = torch.cat([k, self._heads(self.pos_k(p))], dim=-1)  # (B, H, T, 2D)
        return q, k


def _check_scale(scale: object) -> float:
    value = check_number(scale, "scale", 0.0)
    if value == 0.0:
        raise ValueError("scale must be a finite number > 0 (the factor on q . k before the softmax), got 0.0")
    return value


def _check_arguments(dim: int, num_heads: int, scheme: PositionScheme | None, dropout: float) -> None:
    check_positive_int(dim, "dim")
    check_positive_int(num_heads, "num_heads")
    if dim % num_heads:
        raise ValueError(f"dim={dim} is not divisible by num_heads={num_heads}")
    require_kind(scheme, (Kind.ROTARY, Kind.BIAS), "SelfAttention")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")


class ProjectionView(nn.Linear):
    """One of q, k, v of a fused ``Linear(C, 3C)``: an ``nn.Linear(C, C)`` whose weight and bias
    are views of rows ``[index C, (index + 1) C)`` of the fused ones.

    Reads and gradients go through to the fused projection (``view.weight`` is not a leaf: its
    gradient lands in ``fused.weight.grad``). It owns no parameters and is never a submodule,
    so the state dict holds the fused tensors once.

    Example:
        >>> fused = nn.Linear(4, 12)
        >>> k = ProjectionView(fused, 1, 4)
        >>> torch.equal(k(torch.ones(1, 4)), fused(torch.ones(1, 4))[:, 4:8])
        True
    """

    def __init__(self, fused: nn.Linear, index: int, width: int) -> None:
        nn.Module.__init__(self)
        object.__setattr__(self, "_fused", fused)  # not registered: the fused module owns the tensors
        self.index, self.in_features, self.out_features = index, fused.in_features, width

    @property
    def weight(self) -> Tensor:  # (width, C)
        return self._fused.weight[self.index * self.out_features : (self.index + 1) * self.out_features]

    @property
    def bias(self) -> Tensor | None:  # (width,)
        bias = self._fused.bias
        return None if bias is None else bias[self.index * self.out_features : (self.index + 1) * self.out_features]

    def reset_parameters(self) -> None:
        raise TypeError("a ProjectionView owns no parameters: reset the fused projection (qkv_proj) instead")


def fuse_legacy_qkv(state_dict: dict, prefix: str = "") -> dict:
    """Replace ``{prefix}q_proj``/``k_proj``/``v_proj`` tensors by one ``{prefix}qkv_proj`` (in place).

    Checkpoints written before :class:`SelfAttention` fused its projections hold the three
    ``(C, C)`` weights (and ``(C,)`` biases) separately; concatenated in q, k, v order they are
    exactly the fused ``(3C, C)`` weight. A state dict that already holds ``qkv_proj``, or only
    some of the three, is left as it is (the load then reports the missing keys). Returns
    ``state_dict``.

    Example:
        >>> old = {f"attn.{p}.weight": torch.full((2, 2), float(i)) for i, p in enumerate(LEGACY_QKV)}
        >>> new = fuse_legacy_qkv(old, "attn.")
        >>> sorted(new), new["attn.qkv_proj.weight"][:, 0].tolist()
        (['attn.qkv_proj.weight'], [0.0, 0.0, 1.0, 1.0, 2.0, 2.0])
    """
    for suffix in ("weight", "bias"):
        names = [f"{prefix}{proj}.{suffix}" for proj in LEGACY_QKV]
        fused = f"{prefix}qkv_proj.{suffix}"
        if fused in state_dict or not all(name in state_dict for name in names):
            continue
        state_dict[fused] = torch.cat([state_dict.pop(name) for name in names], dim=0)  # (3C, ...)
    return state_dict


def fused_qkv_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The shapes a checkpoint's tensors will have once :func:`fuse_legacy_qkv` has run on them.

    For checkers that compare a file's shapes with a model's before loading it.

    Example:
        >>> fused_qkv_shapes({"blocks.0.attn.q_proj.weight": (8, 8), "blocks.0.attn.k_proj.weight": (8, 8),
        ...                   "blocks.0.attn.v_proj.weight": (8, 8), "head.weight": (5, 8)})
        {'head.weight': (5, 8), 'blocks.0.attn.qkv_proj.weight': (24, 8)}
    """
    out = dict(shapes)
    for name in shapes:
        for suffix in (".weight", ".bias"):
            if name.endswith(f"q_proj{suffix}"):
                prefix = name[: -len(f"q_proj{suffix}")]
                parts = [out.get(f"{prefix}{proj}{suffix}") for proj in LEGACY_QKV]
                if all(part is not None for part in parts) and f"{prefix}qkv_proj{suffix}" not in out:
                    for proj in LEGACY_QKV:
                        del out[f"{prefix}{proj}{suffix}"]
                    out[f"{prefix}qkv_proj{suffix}"] = (sum(p[0] for p in parts), *parts[0][1:])
    return out
