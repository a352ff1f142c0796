"""Context extension without retraining: swap a trained RoPE model's rotary scheme for a scaled one.

A RoPE model trained at context ``L`` is evaluated at ``N = s L`` with each method's scheme
built for the factor ``s = N / L`` (``s <= 1`` keeps plain RoPE, as the methods do at or below
their original length):

============ ======================== ===================================================
method       scheme                   what changes
============ ======================== ===================================================
extrapolate  ``RotaryEmbedding``      nothing (positions past L never seen in training)
linear       ``LinearScalingRotary``  positions ``m / s`` (Chen et al. 2023, PI)
ntk          ``NTKAwareRotary``       base ``b s^(D/(D-2))`` (bloc97 2023)
dynamic_ntk  ``DynamicNTKRotary``     NTK base from each call's length (emozilla 2023)
yarn         ``YaRNRotary``           NTK-by-parts ramp + ``0.1 ln s + 1`` (Peng et al. 2023)
llama3       ``Llama3Rotary``         low frequencies / s, high kept (Meta 2024)
longrope     ``LongRoPERotary``       per-pair factors, see :func:`longrope_factors`
============ ======================== ===================================================

LongRoPE's factors come from an evolutionary search over perplexity (Ding et al. 2024), which
is out of reach here; :func:`longrope_factors` sets them from YaRN's per-pair interpolation
(``long_factor_i = theta_i / theta_i^YaRN``: 1 for the fast pairs, ``s`` for the slow ones, a
ramp between) and ``short_factor = 1``, so it differs from YaRN by its attention factor
``sqrt(1 + ln s / ln L)`` and by keeping plain RoPE for calls no longer than L.

>>> scheme = method_scheme("yarn", head_dim=16, factor=4.0, original_len=64)
>>> type(scheme).__name__, scheme.factor, scheme.original_max_len
('YaRNRotary', 4.0, 64)
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from posembed.schemes.base import Kind, PositionScheme
from posembed.schemes.rotary import RotaryEmbedding
from posembed.schemes.rotary_longrope import LongRoPERotary
from posembed.schemes.rotary_scaling import DynamicNTKRotary, LinearScalingRotary, Llama3Rotary, NTKAwareRotary
from posembed.schemes.rotary_yarn import YaRNRotary

__all__ = ["METHODS", "method_scheme", "longrope_factors", "swap_scheme", "rope_base", "rotary_head_dim"]

#: every extension method, in the order tables and plots list them
METHODS = ("extrapolate", "linear", "ntk", "dynamic_ntk", "yarn", "llama3", "longrope")


def longrope_factors(head_dim: int, base: float, factor: float, original_len: int) -> list[float]:
    """Per-pair LongRoPE ``long_factor``: plain over YaRN frequencies (1 = kept, ``factor`` = interpolated).

    >>> f = longrope_factors(16, 10000.0, 4.0, 64)
    >>> len(f), f[0] < f[-1] <= 4.0 + 1e-6
    (8, True)
    """
    plain = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (D/2,)
    yarn = YaRNRotary(head_dim, factor=factor, original_max_len=original_len, base=base).inv_freq.double()
    return [float(x) for x in (plain / yarn)]


def method_scheme(method: str, *, head_dim: int, factor: float, original_len: int, base: float = 10000.0) -> PositionScheme:
    """The rotary scheme of ``method`` for extension ratio ``factor`` (``factor <= 1``: plain RoPE,
    except ``dynamic_ntk``, which is plain by itself up to ``original_len``).

    Built without a cos/sin cache (``max_len=None``), so any length runs.
    """
    if method not in METHODS:
        raise ValueError(f"unknown context-extension method {method!r}; known: {', '.join(METHODS)}")
    if not factor > 0:
        raise ValueError(f"factor must be > 0, got {factor!r}")
    rope = dict(base=base, max_len=None)
    scaled = dict(factor=max(1.0, float(factor)), **rope)
    with_len = dict(scaled, original_max_len=original_len)
    if method == "extrapolate" or (factor <= 1.0 and method != "dynamic_ntk"):
        return RotaryEmbedding(head_dim, **rope)
    if method == "linear":
        return LinearScalingRotary(head_dim, **scaled)
    if method == "ntk":
        return NTKAwareRotary(head_dim, **scaled)
    if method == "dynamic_ntk":
        return DynamicNTKRotary(head_dim, **with_len)
    if method == "yarn":
        return YaRNRotary(head_dim, **with_len)
    if method == "llama3":
        return Llama3Rotary(head_dim, **with_len)
    long = longrope_factors(head_dim, base, scaled["factor"], original_len)
    return LongRoPERotary(
        head_dim, short_factor=[1.0] * len(long), long_factor=long, original_max_len=original_len,
        factor=scaled["factor"], **rope,
    )


def rope_base(model: nn.Module) -> float:
    """The RoPE base of ``model``'s rotary scheme; ``ValueError`` if it has none."""
    return float(_rotary(model).base)


def rotary_head_dim(model: nn.Module) -> int:
    """The head dim D the model's rotary scheme rotates."""
    return int(_rotary(model).head_dim)


def _rotary(model: nn.Module) -> RotaryEmbedding:
    scheme = getattr(model, "scheme", None)
    if not isinstance(scheme, RotaryEmbedding):
        what = "no scheme (NoPE)" if scheme is None else type(scheme).__name__
        raise ValueError(f"context extension needs a RoPE model, this one has {what}")
    return scheme


def swap_scheme(model: nn.Module, new_scheme: PositionScheme) -> nn.Module:
    """A copy of ``model`` (a :mod:`posembed.model` Encoder/Decoder) with the same weights and
    ``new_scheme`` in every attention layer; ``model`` itself is left as it was.

    ``new_scheme`` must act in attention (rotary or bias kind) and hold no parameters or saved
    buffers, so the state dict is unchanged: the copy equals a model built with ``new_scheme``
    and loaded with ``model``'s state dict. The model's own scheme must not be absolute (its
    table is part of the embeddings and the weights).

    Example:
        >>> from posembed.model import Decoder
        >>> model = Decoder(11, dim=16, depth=2, num_heads=2, scheme=RotaryEmbedding(8))
        >>> longer = swap_scheme(model, LinearScalingRotary(8, factor=2.0))
        >>> type(longer.blocks[1].attn.scheme).__name__, type(model.scheme).__name__
        ('LinearScalingRotary', 'RotaryEmbedding')
    """
    if not isinstance(new_scheme, PositionScheme) or new_scheme.kind not in (Kind.ROTARY, Kind.BIAS):
        raise TypeError(f"new_scheme must be a rotary or bias PositionScheme, got {type(new_scheme).__name__}")
    old = getattr(model, "scheme", None)
    if old is not None and old.kind == Kind.ABSOLUTE:
        raise ValueError(f"cannot swap the scheme of a model with an absolute scheme ({type(old).__name__})")
    if any(True for _ in new_scheme.parameters()) or new_scheme.state_dict():
        raise ValueError(f"{type(new_scheme).__name__} has parameters or saved buffers: the weights would change")
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        raise TypeError(f"swap_scheme needs a posembed Encoder or Decoder, got {type(model).__name__}")
    first = blocks[0].attn
    new_scheme.check_attention(num_heads=first.num_heads, head_dim=first.head_dim, causal=first.causal)
    device = next(model.parameters()).device
    swapped = copy.deepcopy(model)
    new_scheme = new_scheme.to(device)
    swapped.scheme = new_scheme
    for block in swapped.blocks:
        block.attn.scheme = new_scheme
    return swapped
