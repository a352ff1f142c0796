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
from collections.abc import Sequence

import torch
from torch import nn

from posembed._checks import did_you_mean
from posembed.schemes.base import Kind, PositionScheme
from posembed.schemes.config import scheme_config
from posembed.schemes.rotary import RotaryEmbedding
from posembed.schemes.rotary_longrope import LongRoPERotary
from posembed.schemes.factory import FACTORY, METHOD_SCHEMES, build_from_kwargs
from posembed.schemes.rotary_yarn import YaRNRotary

__all__ = ["METHODS", "method_scheme", "longrope_factors", "swap_scheme", "rope_base", "rotary_head_dim"]

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
    yarn = YaRNRotary(head_dim, factor=factor, original_max_len=original_len, base=base).inv_freq.double()
    return [float(x) for x in (plain / yarn)]


def method_scheme(method: str, *, head_dim: int, factor: float, original_len: int, base: float = 10000.0) -> PositionScheme:
    """The rotary scheme of ``method`` for extension ratio ``factor`` (``factor <= 1``: plain RoPE,
    except ``dynamic_ntk``, which is plain by itself up to ``original_len``).

    Built without a cos/sin cache (``max_len=None``), so any length runs.
    """
    if method not in METHODS:
        raise ValueError(
            f"unknown context-extension method {method!r}{did_you_mean(method, METHODS)}; known: {', '.join(METHODS)}"
        )
    if not factor > 0:
        raise ValueError(f"factor must be > 0, got {factor!r}")
    rope = dict(base=base, max_len=None)
    if method == "extrapolate" or (factor <= 1.0 and method != "dynamic_ntk"):
        return RotaryEmbedding(head_dim, **rope)
    scaled = max(1.0, float(factor))
    if method == "longrope":
        long = longrope_factors(head_dim, base, scaled, original_len)
        return LongRoPERotary(
            head_dim, short_factor=[1.0] * len(long), long_factor=long, original_max_len=original_len, factor=scaled,
            **rope,
        )
    name = METHOD_SCHEMES[method]
    given = dict(head_dim=head_dim, factor=scaled, original_max_len=original_len, **rope)
    return build_from_kwargs(name, {key: value for key, value in given.items() if key in FACTORY[name].accepted})


def rope_base(model: nn.Module) -> float:
    """The RoPE base of ``model``'s rotary layers; ``ValueError`` if it has none, or if its rotary
    layers use different bases (a model with one scheme per layer, e.g. local and global θ)."""
    return float(_agreed(model, "base"))


def rotary_head_dim(model: nn.Module) -> int:
    """The head dim D the model's rotary layers rotate (all of them must agree)."""
    return int(_agreed(model, "head_dim"))


def _layer_schemes(model: nn.Module) -> list[PositionScheme | None]:
    layers = getattr(model, "layer_schemes", None)
    if layers is None:
        raise TypeError(f"context extension needs a posembed Encoder or Decoder, got {type(model).__name__}")
    return layers


def _rotary_layers(model: nn.Module) -> dict[int, RotaryEmbedding]:
    """``{layer index: its rotary scheme}``; ``ValueError`` naming what the model has when none is rotary."""
    layers = _layer_schemes(model)
    rotary = {index: layer for index, layer in enumerate(layers) if isinstance(layer, RotaryEmbedding)}
    if not rotary:
        absolute = getattr(model, "scheme", None)
        absolute = absolute if absolute is not None and absolute.kind == Kind.ABSOLUTE else None
        names = sorted({"no scheme (NoPE)" if layer is None else type(layer).__name__
                        for layer in layers if layer is not None or absolute is None})
        names = ([f"an absolute {type(absolute).__name__}"] if absolute is not None else []) + names
        raise ValueError(f"context extension needs a RoPE model, this one has {' and '.join(names)}")
    return rotary


def _agreed(model: nn.Module, attribute: str):
    """``attribute`` of the model's rotary layers (the first one's), checked equal across all of them."""
    values: dict[object, list[int]] = {}
    for index, layer in _rotary_layers(model).items():
        values.setdefault(getattr(layer, attribute), []).append(index)
    if len(values) > 1:
        found = "; ".join(f"{value:g} in layers {', '.join(map(str, where))}" for value, where in values.items())
        raise ValueError(
            f"the rotary layers disagree on their {attribute} ({found}): one extension scheme cannot stand for "
            f"them all; build one per rotary layer and pass the list to swap_scheme"
        )
    return next(iter(values))


def swap_scheme(model: nn.Module, new_scheme: PositionScheme | Sequence[PositionScheme | None]) -> nn.Module:
    """A copy of ``model`` (a :mod:`posembed.model` Encoder/Decoder) with the same weights and other
    attention schemes; ``model`` itself is left as it was.

    ``new_scheme`` is one scheme, or a list with one entry per layer:

    - one scheme, for a model with one scheme for every layer: every layer gets it (it becomes
      ``scheme`` of the copy);
    - one scheme, for a model with one scheme per layer (``schemes=[...]``): every rotary layer
      gets it, NoPE and bias layers keep theirs. It must be rotary, and the rotary layers must
      agree (the same configuration): layers with different bases (local and global θ) need a list;
    - a list: layer ``i`` gets ``new_scheme[i]``, or keeps its scheme where the entry is ``None``.
      A NoPE layer stays NoPE (its entry must be ``None``); the copy has one scheme per layer
      unless every layer gets the same object.

    Each scheme put in must act in attention (rotary or bias kind) and hold no parameters or
    saved buffers, so the state dict is unchanged: the copy equals a model built with the new
    schemes and loaded with ``model``'s state dict. Layers handed the same object share it. A
    model with an absolute scheme (and no per-layer schemes) cannot be swapped: its table is
    part of the embeddings and the weights.

    Example:
        >>> from posembed.model import Decoder
        >>> from posembed.schemes.rotary_scaling import LinearScalingRotary
        >>> model = Decoder(11, dim=16, depth=2, num_heads=2, scheme=RotaryEmbedding(8))
        >>> longer = swap_scheme(model, LinearScalingRotary(8, factor=2.0))
        >>> type(longer.blocks[1].attn.scheme).__name__, type(model.scheme).__name__
        ('LinearScalingRotary', 'RotaryEmbedding')
        >>> mixed = Decoder(11, dim=16, depth=2, num_heads=2, schemes=[RotaryEmbedding(8), None])
        >>> [type(s).__name__ for s in swap_scheme(mixed, LinearScalingRotary(8, factor=2.0)).layer_schemes]
        ['LinearScalingRotary', 'NoneType']
    """
    layers = _layer_schemes(model)
    if isinstance(new_scheme, PositionScheme):
        _check_kind(new_scheme, "new_scheme")
        plan = _single_plan(model, layers, new_scheme)
    elif isinstance(new_scheme, Sequence) and not isinstance(new_scheme, (str, bytes)):
        plan = _list_plan(layers, list(new_scheme))
    else:
        raise TypeError(f"new_scheme must be a rotary or bias PositionScheme or a list of them, got "
                        f"{type(new_scheme).__name__}")
    for index, scheme in enumerate(plan):
        if scheme is not None:
            _check_swappable(scheme, model.blocks[index].attn, index)
    device = next(model.parameters()).device
    moved = {id(s): s.to(device) for s in plan if s is not None}  # one object per scheme: sharing is kept
    swapped = copy.deepcopy(model)
    for block, scheme in zip(swapped.blocks, plan):
        if scheme is not None:
            block.attn.scheme = moved[id(scheme)]
    if not model.per_layer:  # one scheme for every layer: kept so when every layer got the same object
        final = [block.attn.scheme for block in swapped.blocks]
        swapped.scheme = final[0] if all(layer is final[0] for layer in final) else None
    return swapped


def _single_plan(model: nn.Module, layers: list, new_scheme: PositionScheme) -> list[PositionScheme | None]:
    """Which layer gets ``new_scheme`` (``None``: kept)."""
    if not model.per_layer:
        old = getattr(model, "scheme", None)
        if old is not None and old.kind == Kind.ABSOLUTE:
            raise ValueError(f"cannot swap the scheme of a model with an absolute scheme ({type(old).__name__})")
        return [new_scheme] * len(layers)
    rotary = {index: layer for index, layer in enumerate(layers) if layer is not None and layer.kind == Kind.ROTARY}
    if not rotary:
        raise ValueError("this model has one scheme per layer and none of them is rotary: give a list of one "
                         "scheme (or None to keep it) per layer")
    if new_scheme.kind != Kind.ROTARY:
        raise ValueError(f"one {type(new_scheme).__name__} ({new_scheme.kind.value}) for a model with one scheme per "
                         f"layer would replace its rotary layers: give a list of one scheme (or None) per layer")
    configs = {index: _rotation(layer) for index, layer in rotary.items()}
    if any(config != configs[min(configs)] for config in configs.values()):
        differ = [index for index, config in configs.items() if config != configs[min(configs)]]
        raise ValueError(
            f"the rotary layers of this model differ (layer {min(configs)} vs layers {', '.join(map(str, differ))}, "
            f"e.g. local and global bases): one {type(new_scheme).__name__} would erase the difference; give a list "
            f"of one scheme (or None) per layer"
        )
    return [new_scheme if index in rotary else None for index in range(len(layers))]


def _rotation(scheme: PositionScheme) -> dict:
    """What a rotary scheme computes: its config less the cache size and the compile switch."""
    return {k: v for k, v in scheme_config(scheme).items() if k not in ("max_len", "compiled")}


def _list_plan(layers: list, schemes: list) -> list[PositionScheme | None]:
    if len(schemes) != len(layers):
        raise ValueError(f"new_scheme has {len(schemes)} entries but the model has {len(layers)} layers: give one "
                         f"scheme (or None to keep that layer's) per layer")
    for index, (old, new) in enumerate(zip(layers, schemes)):
        if new is not None and old is None:
            raise ValueError(f"layer {index} has no positions (NoPE) and stays so: its entry must be None, got "
                             f"{type(new).__name__}")
    if all(new is None for new in schemes):
        raise ValueError("new_scheme holds only None: nothing to swap")
    return schemes


def _check_kind(scheme: object, what: str) -> None:
    if not isinstance(scheme, PositionScheme) or scheme.kind not in (Kind.ROTARY, Kind.BIAS):
        raise TypeError(f"{what} must be a rotary or bias PositionScheme, got {type(scheme).__name__}")


def _check_swappable(scheme: object, attn: nn.Module, index: int) -> None:
    _check_kind(scheme, f"the scheme for layer {index}")
    if any(True for _ in scheme.parameters()) or scheme.state_dict():
        raise ValueError(f"{type(scheme).__name__} has parameters or saved buffers: the weights would change")
    scheme.check_attention(num_heads=attn.num_heads, head_dim=attn.head_dim, causal=attn.causal)
