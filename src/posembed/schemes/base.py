"""The scheme interface: every positional scheme is one small module of one of three kinds.

The rest of the library dispatches on :class:`Kind`, never on a scheme's name.

======== ======================================= ==========================================
kind     what it touches                         call
======== ======================================= ==========================================
absolute the input, ``x = tok + pos(positions)`` ``scheme(position_ids) -> (…, C)``
rotary   queries and keys before the dot product ``scheme(q, k, position_ids) -> (q, k)``
bias     the attention logits ``s_ij += b``      ``scheme.bias(q_pos, k_pos, q, k) -> (…, H, Tq, Tk)``
======== ======================================= ==========================================

Shape legend used throughout the library: B batch, T length, H heads, D head dim, C channels.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_positive_int
from posembed.schemes.rotary.checks import check_qk

__all__ = [
    "Kind",
    "PositionScheme",
    "AbsoluteScheme",
    "RotaryScheme",
    "BiasScheme",
    "SCHEMES",
    "ScoreMod",
]

#: FlexAttention score modifier ``(score, b, h, q_idx, kv_idx) -> score``.
ScoreMod = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]

#: Every scheme class with a ``name`` defined so far, by name: ``__init_subclass__`` refuses a
#: name taken twice. The complete list, and how each scheme is built, is
#: :mod:`posembed.schemes.factory` (``posembed.schemes.SCHEMES`` reads it); a test checks that
#: every named class has a factory entry.
SCHEMES: dict[str, type[PositionScheme]] = {}


class Kind(str, enum.Enum):
    """Where a scheme puts position into the transformer."""

    ABSOLUTE = "absolute"
    ROTARY = "rotary"
    BIAS = "bias"


class PositionScheme(nn.Module):
    """Base class of every positional scheme.

    Subclasses set the class attributes below. A subclass with a ``name`` gets an entry in
    :mod:`posembed.schemes.factory`, which builds schemes by name (lab, inspector, configs).
    """

    kind: ClassVar[Kind]
    #: Scheme name (``"sinusoidal"``, ``"rope"``, ``"alibi"``, ...); ``None`` for abstract bases.
    name: ClassVar[str | None] = None
    #: Short citation, e.g. ``"Vaswani et al. 2017"``.
    paper: ClassVar[str] = ""
    #: Whether the published results show it working beyond the training length.
    extrapolates: ClassVar[bool] = False
    #: Whether positions beyond a fixed size are refused (learned tables).
    has_length_limit: ClassVar[bool] = False
    #: The attention layer's sizes (``"num_heads"``, ``"head_dim"``) that must be the scheme's own.
    built_for: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if name is not None:
            if name in SCHEMES and SCHEMES[name] is not cls:
                raise RuntimeError(f"scheme name {name!r} registered twice ({SCHEMES[name]} and {cls})")
            SCHEMES[name] = cls

    @property
    def max_positions(self) -> int | None:
        """Largest position count the scheme can represent, or ``None`` when unlimited."""
        return None

    def check_attention(self, *, num_heads: int, head_dim: int, causal: bool) -> None:
        """Raise a clear ``ValueError`` if this scheme cannot serve such an attention layer.

        Called once by the attention module's constructor: the sizes named in :attr:`built_for`
        must be the scheme's (:func:`check_built_for`), and bidirectional attention is refused
        when :meth:`why_causal_only` says why.
        """
        sizes = {"num_heads": num_heads, "head_dim": head_dim}
        for field in self.built_for:
            check_built_for(self, field, sizes[field])
        reason = None if causal else self.why_causal_only()
        if reason is not None:
            raise ValueError(reason)

    def why_causal_only(self) -> str | None:
        """Why this scheme cannot serve bidirectional attention (the error's text); ``None``: it can."""
        return None

    def attention_scale(self, width: int) -> float:
        """The factor on ``q . k`` that this scheme's attention needs, for queries and keys of ``width``.

        :class:`~posembed.nn.attention.layer.SelfAttention` asks for it when it is given no explicit
        ``scale`` (``width`` is D, or 2D with TUPE). The default is the usual ``1 / sqrt(width)``;
        a scheme whose published attention divides the logits otherwise declares it here
        (DeBERTa: ``1 / sqrt(width * (1 + number of position terms))``).

        >>> PositionScheme().attention_scale(16)
        0.25
        """
        return 1.0 / math.sqrt(width)


class AbsoluteScheme(PositionScheme):
    """A scheme that maps positions to vectors added to (or concatenated with) the input.

    Subclasses implement :meth:`forward` and set ``self.dim``.

    Shape:
        - position_ids: ``(T,)`` or ``(B, T)`` integer positions (``(T, A)`` / ``(B, T, A)``
          coordinates when ``num_axes = A > 1``).
        - output: ``(T, C)`` or ``(B, T, C)`` with ``C = self.dim``.
    """

    kind = Kind.ABSOLUTE
    dim: int
    #: Coordinates per position: 1 for sequences (ids ``(T,)`` / ``(B, T)``); ``A > 1`` for grids
    #: (``Sinusoidal2D`` / ``Sinusoidal3D``), whose ids are ``(T, A)`` or ``(B, T, A)``.
    num_axes: ClassVar[int] = 1

    @property
    def lookup_table(self) -> Tensor | None:
        """The ``(P, C)`` table when ``forward`` is exactly ``table[position_ids]``, else ``None``.

        Fast paths gather from it directly (after :meth:`check_position_ids`).
        """
        return None

    def check_position_ids(self, position_ids: Tensor) -> None:
        """Raise the scheme's clear error for positions it cannot embed (default: accept all)."""

    def forward(self, position_ids: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class RotaryScheme(PositionScheme):
    """A scheme that rotates queries and keys by their positions before the dot product.

    :meth:`forward` checks ``q`` and ``k`` and hands them to ``_rotate_qk``, which subclasses implement.

    Shape:
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``.
        - position_ids: ``(Tq,)`` or ``(B, Tq)``; ``None`` means ``arange(Tq)``.
        - k_position_ids: positions of the keys when they differ from the queries' (a cache);
          ``None`` means the same as ``position_ids`` (requires ``Tq == Tk``).
        - output: ``(q, k)`` of the input shapes and dtypes.
    """

    kind = Kind.ROTARY
    head_dim: int
    built_for: ClassVar[tuple[str, ...]] = ("head_dim",)
    #: Coordinates per position: 1 for sequences; ``A > 1`` for the sectioned schemes (axial,
    #: Pixtral, M-RoPE), whose ids may be coordinates ``(Tq, A)`` / ``(B, Tq, A)``.
    num_axes: int = 1

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        position_ids: Tensor | None = None,
        k_position_ids: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        check_qk(q, k, self.head_dim)
        return self._rotate_qk(q, k, position_ids, k_position_ids)

    def _rotate_qk(
        self, q: Tensor, k: Tensor, position_ids: Tensor | None, k_position_ids: Tensor | None
    ) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        """The scheme's own part of :meth:`forward`, on ``q`` and ``k`` already checked."""
        raise NotImplementedError

    def check_attention(self, *, num_heads: int, head_dim: int, causal: bool) -> None:
        check_positive_int(num_heads, "num_heads")
        super().check_attention(num_heads=num_heads, head_dim=head_dim, causal=causal)


class BiasScheme(PositionScheme):
    """A scheme that adds ``b(h, i, j)`` to the (already scaled) attention logits.

    Two views of the same bias, which must agree:

    - :meth:`bias` materialises it, for SDPA and the eager path;
    - :meth:`score_mod` returns a FlexAttention score modifier (no ``T x T`` tensor).

    Both return ``None`` when the scheme adds nothing (NoPE).

    Shape:
        - q_positions: ``(Tq,)`` or ``(B, Tq)``; k_positions: ``(Tk,)`` or ``(B, Tk)``.
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``: only schemes with ``needs_qk`` read them
          (Shaw relative keys); others accept ``None``.
        - key_mask: ``(B, Tk)`` bool, True for real keys, given as the keyword ``key_mask=`` to
          :meth:`bias` and :meth:`score_mod` only by schemes that declare ``needs_key_mask``
          (``None`` when the batch has no padding); others never receive it.
        - bias output: ``(H, Tq, Tk)`` for 1-D positions, ``(B, H, Tq, Tk)`` for 2-D positions
          or when it depends on q/k. Same dtype as ``q`` when given, else float32.
    """

    kind = Kind.BIAS
    num_heads: int
    built_for: ClassVar[tuple[str, ...]] = ("num_heads",)
    #: True when the bias depends on the queries/keys themselves (Shaw ``relative_key``).
    needs_qk: ClassVar[bool] = False
    #: Whether the scheme adds a bias to the logits (NoPE: False); attention reads it, never probes.
    adds_bias: ClassVar[bool] = True
    #: True when the bias depends on which keys are padding (CoPE counts only real keys): the
    #: attention backends then pass the key padding mask as ``key_mask=``; declared, never probed.
    needs_key_mask: ClassVar[bool] = False
    #: Whether :meth:`score_mod` gives a FlexAttention view (CoPE: False, its positions are a
    #: ``Tq x Tk`` cumulative sum); ``backend="auto"`` then never picks FlexAttention.
    has_score_mod: ClassVar[bool] = True

    def __init__(self, num_heads: int | None = None, head_dim: int | None = None) -> None:
        """Check and keep the sizes a subclass is built for (``None``: not one it has, or sets itself)."""
        super().__init__()
        for field, value in (("num_heads", num_heads), ("head_dim", head_dim)):
            if value is not None:
                setattr(self, field, check_positive_int(value, field))

    def bias(
        self,
        q_positions: Tensor,
        k_positions: Tensor,
        q: Tensor | None = None,
        k: Tensor | None = None,
    ) -> Tensor | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def score_mod(
        self,
        q_positions: Tensor,
        k_positions: Tensor,
        q: Tensor | None = None,
        k: Tensor | None = None,
    ) -> ScoreMod | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(
        self,
        q_positions: Tensor,
        k_positions: Tensor,
        q: Tensor | None = None,
        k: Tensor | None = None,
    ) -> Tensor | None:
        return self.bias(q_positions, k_positions, q, k)


def check_built_for(scheme: PositionScheme, field: str, value: int) -> None:
    """``ValueError`` if the attention layer's ``field`` (``num_heads``, ``head_dim``) is not the
    one ``scheme`` was built for: the one wording every scheme's :meth:`check_attention` uses.

    >>> from posembed.schemes.bias.alibi import ALiBi
    >>> check_built_for(ALiBi(4), "num_heads", 8)
    Traceback (most recent call last):
    ...
    ValueError: ALiBi was built for num_heads=4, but the attention layer has num_heads=8
    """
    built = getattr(scheme, field)
    if value != built:
        raise ValueError(
            f"{type(scheme).__name__} was built for {field}={built}, but the attention layer has {field}={value}"
        )


def require_kind(scheme: PositionScheme | None, allowed: tuple[Kind, ...], where: str) -> None:
    """Raise ``TypeError`` if ``scheme`` is not of one of the ``allowed`` kinds.

    >>> require_kind(None, (Kind.ABSOLUTE,), "TransformerEmbeddings")
    """
    if scheme is None:
        return
    if not isinstance(scheme, PositionScheme):
        raise TypeError(f"{where} expects a posembed PositionScheme, got {type(scheme).__name__}")
    if scheme.kind not in allowed:
        kinds = ", ".join(k.value for k in allowed)
        raise TypeError(
            f"{where} cannot use {type(scheme).__name__} (kind {scheme.kind.value!r}); "
            f"it takes schemes of kind {kinds}. Rotary and bias schemes go to the attention layer, "
            f"absolute schemes to the embeddings."
        )


def as_float_positions(position_ids: Tensor) -> Tensor:
    """Positions as float32 whatever the caller's dtype: position math stays in fp32."""
    return position_ids.to(torch.float32)
