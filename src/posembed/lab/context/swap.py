"""Swap a trained model's attention schemes for others, keeping its weights: :func:`swap_scheme`,
and what its rotary layers agree on (:func:`rope_base`, :func:`rotary_head_dim`).

>>> from posembed.nn.model.transformer import Decoder
>>> from posembed.schemes.rotary.rope import RotaryEmbedding
>>> model = Decoder(11, dim=16, depth=2, num_heads=2, scheme=RotaryEmbedding(8, base=500.0))
>>> rope_base(model), rotary_head_dim(model)
(500.0, 8)
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from torch import nn

from posembed.schemes.base import Kind, PositionScheme
from posembed.schemes.config import scheme_config
from posembed.schemes.rotary.rope import RotaryEmbedding

__all__ = ["swap_scheme", "rope_base", "rotary_head_dim"]


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
        names = sorted(
            {
                "no scheme (NoPE)" if layer is None else type(layer).__name__
                for layer in layers
                if layer is not None or absolute is None
            }
        )
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
    """A copy of ``model`` (a :mod:`posembed.nn.model.transformer` Encoder/Decoder) with the same weights and other
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
        >>> from posembed.nn.model.transformer import Decoder
        >>> from posembed.schemes.rotary.scaling import LinearScalingRotary
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
        raise TypeError(
            f"new_scheme must be a rotary or bias PositionScheme or a list of them, got {type(new_scheme).__name__}"
        )
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
        raise ValueError(
            "this model has one scheme per layer and none of them is rotary: give a list of one "
            "scheme (or None to keep it) per layer"
        )
    if new_scheme.kind != Kind.ROTARY:
        raise ValueError(
            f"one {type(new_scheme).__name__} ({new_scheme.kind.value}) for a model with one scheme per "
            f"layer would replace its rotary layers: give a list of one scheme (or None) per layer"
        )
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
        raise ValueError(
            f"new_scheme has {len(schemes)} entries but the model has {len(layers)} layers: give one "
            f"scheme (or None to keep that layer's) per layer"
        )
    for index, (old, new) in enumerate(zip(layers, schemes)):
        if new is not None and old is None:
            raise ValueError(
                f"layer {index} has no positions (NoPE) and stays so: its entry must be None, got {type(new).__name__}"
            )
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
