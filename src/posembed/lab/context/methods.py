"""The context-extension methods: the rotary scheme each builds for an extension ratio, through the factory.

A RoPE model trained at context ``L`` is evaluated at ``N = s L`` with each method's scheme
built for the factor ``s = N / L`` (``s <= 1`` keeps plain RoPE, as the methods do at or below
their original length). Each is the factory entry whose ``method`` is that name
(:data:`posembed.schemes.factory.METHOD_SCHEMES`), built and checked by
:func:`~posembed.schemes.factory.build_from_kwargs`:

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

:func:`extended` is a RoPE model with a method's scheme swapped in (same weights).

>>> scheme = method_scheme("yarn", head_dim=16, factor=4.0, original_len=64)
>>> type(scheme).__name__, scheme.factor, scheme.original_max_len
('YaRNRotary', 4.0, 64)
"""

from __future__ import annotations

import torch
from torch import nn

from posembed._utils.checks import did_you_mean
from posembed.lab.context.swap import rope_base, rotary_head_dim, swap_scheme
from posembed.schemes.base import PositionScheme
from posembed.schemes.factory import FACTORY, METHOD_SCHEMES, build_from_kwargs

__all__ = ["METHODS", "method_scheme", "longrope_factors", "extended"]

#: every extension method, in the order tables and plots list them: the factory entries' method
#: names (:data:`posembed.schemes.factory.METHOD_SCHEMES`), the one table of them
METHODS: tuple[str, ...] = tuple(METHOD_SCHEMES)


def longrope_factors(head_dim: int, base: float, factor: float, original_len: int) -> list[float]:
    """Per-pair LongRoPE ``long_factor``: plain over YaRN frequencies (1 = kept, ``factor`` = interpolated).

    >>> f = longrope_factors(16, 10000.0, 4.0, 64)
    >>> len(f), f[0] < f[-1] <= 4.0 + 1e-6
    (8, True)
    """
    plain = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (D/2,)
    yarn_kwargs = dict(head_dim=head_dim, factor=factor, original_max_len=original_len, base=base)
    yarn = build_from_kwargs(METHOD_SCHEMES["yarn"], yarn_kwargs).inv_freq.double()
    return [float(x) for x in (plain / yarn)]


def method_scheme(
    method: str, *, head_dim: int, factor: float, original_len: int, base: float = 10000.0
) -> PositionScheme:
    """The rotary scheme of ``method`` for extension ratio ``factor`` (``factor <= 1``: plain RoPE,
    except ``dynamic_ntk``, which is plain by itself up to ``original_len``).

    Built by the factory (its argument checks included) without a cos/sin cache (``max_len=None``),
    so any length runs.
    """
    if method not in METHODS:
        raise ValueError(
            f"unknown context-extension method {method!r}{did_you_mean(method, METHODS)}; known: {', '.join(METHODS)}"
        )
    if not factor > 0:
        raise ValueError(f"factor must be > 0, got {factor!r}")
    plain = method == "extrapolate" or (factor <= 1.0 and method != "dynamic_ntk")
    name = METHOD_SCHEMES["extrapolate" if plain else method]
    scaled = max(1.0, float(factor))
    given = dict(head_dim=head_dim, factor=scaled, original_max_len=original_len, base=base, max_len=None)
    if name == METHOD_SCHEMES["longrope"]:
        long = longrope_factors(head_dim, base, scaled, original_len)
        given.update(short_factor=[1.0] * len(long), long_factor=long)
    return build_from_kwargs(name, {key: value for key, value in given.items() if key in FACTORY[name].accepted})


def extended(model: nn.Module, method: str, factor: float, original_len: int) -> nn.Module:
    """A copy of the RoPE ``model`` with ``method``'s scheme for ``factor`` (:func:`method_scheme`, at
    the head dim and base of its rotary layers) swapped in (:func:`~posembed.lab.context.swap.swap_scheme`)."""
    head_dim, base = rotary_head_dim(model), rope_base(model)
    scheme = method_scheme(method, head_dim=head_dim, factor=factor, original_len=original_len, base=base)
    return swap_scheme(model, scheme)
