"""What every attention backend reads: the inputs of one forward, the scheme's bias and the mask.

:class:`AttentionInputs` is built once per forward by :class:`~posembed.nn.attention.layer.SelfAttention`
and handed to the backend :func:`posembed.nn.attention.backends.choose_backend` picks. The terms
here are shared by the backends that materialise scores (:mod:`posembed.nn.attention.kernels`) and
by FlexAttention: the scheme's bias (declared by the scheme class, never probed), the allowed
(query, key) pairs (the masking rule of :mod:`posembed.kernels.masks`) and both merged into one
additive term.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from posembed.kernels.masks import visible_keys
from posembed.schemes.base import BiasScheme

__all__ = ["AttentionInputs", "adds_bias", "allowed_mask", "logit_mask", "mask_keyword", "needs_grad"]


@dataclass(frozen=True)
class AttentionInputs:
    """What every backend needs; built once per forward, never changed afterwards.

    Shape:
        - q: ``(B, H, T, Dk)``, k: ``(B, H, T, Dk)``, v: ``(B, H, T, Dv)``.
        - positions: ``(T,)`` or ``(B, T)`` (read only by a bias scheme).
        - key_mask: ``(B, T)`` bool, True for real tokens, or ``None``; also handed to a
          ``needs_key_mask`` bias scheme (``key_mask=``).
        - qk: the ``(q, k)`` handed to a ``needs_qk`` bias scheme (before any TUPE extension).
        - scale: the factor on ``q k^T`` before the bias is added.
    """

    q: Tensor
    k: Tensor
    v: Tensor
    scale: float
    causal: bool
    positions: Tensor
    key_mask: Tensor | None = None
    scheme: BiasScheme | None = None
    qk: tuple[Tensor, Tensor] | None = None
    dropout: float = 0.0


def adds_bias(scheme: BiasScheme | None) -> bool:
    """Whether ``scheme`` adds a bias to the logits, as the scheme class declares (``adds_bias``).

    Declared, never probed: NoPE declares ``False``; a bias scheme that declares nothing adds one.
    """
    return scheme is not None and getattr(type(scheme), "adds_bias", True)


def mask_keyword(inp: AttentionInputs) -> dict:
    """``{"key_mask": (B, T) or None}`` for a scheme that declares ``needs_key_mask``, else ``{}``."""
    return {"key_mask": inp.key_mask} if inp.scheme.needs_key_mask else {}


def _scheme_bias(inp: AttentionInputs, rows: slice | None = None) -> Tensor | None:
    """The scheme's materialised bias for query ``rows`` (all rows when ``None``)."""
    if not adds_bias(inp.scheme):
        return None
    rows = rows if rows is not None else slice(None)
    q, k = inp.qk if inp.qk is not None else (None, None)
    q = q[:, :, rows] if q is not None else None
    return inp.scheme.bias(inp.positions[..., rows], inp.positions, q, k, **mask_keyword(inp))


def allowed_mask(inp: AttentionInputs, rows: slice | None = None) -> Tensor | None:
    """Boolean ``(B|1, 1, Tq, T)`` mask of allowed (query, key) pairs, or ``None`` if all are allowed."""
    if not inp.causal and inp.key_mask is None:
        return None
    length = inp.k.shape[-2]
    q_idx = torch.arange(length, device=inp.q.device)[rows if rows is not None else slice(None)]
    return visible_keys(q_idx, length, inp.causal, inp.key_mask)


def logit_mask(inp: AttentionInputs, rows: slice | None = None) -> Tensor | None:
    """Additive ``(B|1, H|1, Tq, T)`` term: the scheme's bias plus ``-inf`` where masked."""
    bias = _scheme_bias(inp, rows)
    if bias is not None:
        bias = bias.to(inp.q.dtype)
    allowed = allowed_mask(inp, rows)
    if allowed is None:
        return bias
    if bias is None:
        bias = torch.zeros((), dtype=inp.q.dtype, device=inp.q.device)
    return torch.where(allowed, bias, float("-inf"))


def needs_grad(inp: AttentionInputs) -> bool:
    """Whether autograd will need a backward through ``inp`` (q, k, v or the scheme's parameters)."""
    if not torch.is_grad_enabled():
        return False
    tensors = (inp.q, inp.k, inp.v, *(p for p in (inp.scheme.parameters() if inp.scheme is not None else ())))
    return any(t.requires_grad for t in tensors)
