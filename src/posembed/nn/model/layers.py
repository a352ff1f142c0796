"""Layer-wise scheme mixes: one rotary or bias scheme (or none) per attention layer.

Recent models mix positions across depth: Llama 4 drops RoPE every fourth layer (NoPE),
ModernBERT and Gemma 3 give local (sliding-window) layers their own RoPE base beside the global
ones, and RoPE layers can sit beside ALiBi ones. :class:`~posembed.nn.model.transformer.Decoder` /
:class:`~posembed.nn.model.transformer.Encoder` take such a mix as ``schemes=[s_0, ..., s_{depth-1}]``; this
module checks the list and turns it into a JSON-able list and back.

Layers handed the *same* scheme object share it (saved once in a checkpoint file, by
``safetensors.torch.save_model``). The config list keeps that sharing: a layer whose scheme is the same
object as an earlier layer's is written ``{"same_as": j}`` (``j`` the first layer holding it),
so that a rebuilt model has the same modules, hence the same state-dict keys, as the saved one.
``None`` is a layer without positions.

Example:
    >>> from posembed.schemes.bias.nope import NoPE
    >>> nope = NoPE()
    >>> layer_schemes_config([nope, None, nope])
    [{'name': 'nope'}, None, {'same_as': 0}]
    >>> built = build_layer_schemes(layer_schemes_config([nope, None, nope]))
    >>> built[0] is built[2], built[1]
    (True, None)
"""

from __future__ import annotations

from collections.abc import Sequence

from posembed.schemes.base import Kind, PositionScheme
from posembed.schemes.config import build_scheme, scheme_config

__all__ = ["check_layer_schemes", "layer_schemes_config", "build_layer_schemes"]

SAME_AS = "same_as"


def check_layer_schemes(
    schemes: Sequence[PositionScheme | None], depth: int, scheme: PositionScheme | None
) -> list[PositionScheme | None]:
    """``schemes`` as a list of ``depth`` rotary / bias schemes or ``None``; clear errors otherwise.

    ``scheme`` is the model's ``scheme=`` argument: it may only be an absolute scheme (or
    ``None``) beside a per-layer list, since a rotary or bias one would say the same thing twice.
    """
    if isinstance(schemes, (PositionScheme, str, dict)) or not isinstance(schemes, Sequence):
        raise TypeError(f"schemes must be a list of one scheme (or None) per layer, got {type(schemes).__name__}")
    if scheme is not None and scheme.kind != Kind.ABSOLUTE:
        raise ValueError(
            f"give either scheme={type(scheme).__name__} (one {scheme.kind.value} scheme for every layer) or "
            f"schemes=[...] (one per layer), not both; only an absolute scheme goes in scheme= beside schemes="
        )
    if len(schemes) != depth:
        raise ValueError(f"schemes has {len(schemes)} entries but depth={depth}: give one scheme (or None) per layer")
    for index, layer in enumerate(schemes):
        if layer is None:
            continue
        if not isinstance(layer, PositionScheme):
            raise TypeError(f"schemes[{index}] must be a posembed PositionScheme or None, got {type(layer).__name__}")
        if layer.kind == Kind.ABSOLUTE:
            raise ValueError(
                f"schemes[{index}] is {type(layer).__name__}, an absolute scheme: it acts on the embeddings, "
                f"not per layer; pass it as scheme= (beside schemes=) instead"
            )
    return list(schemes)


def layer_schemes_config(schemes: Sequence[PositionScheme | None]) -> list[dict | None]:
    """One entry per layer: the scheme's config, ``None``, or ``{"same_as": j}`` for a shared object."""
    first: dict[int, int] = {}
    configs: list[dict | None] = []
    for index, layer in enumerate(schemes):
        if layer is None:
            configs.append(None)
        elif id(layer) in first:
            configs.append({SAME_AS: first[id(layer)]})
        else:
            first[id(layer)] = index
            configs.append(scheme_config(layer))
    return configs


def build_layer_schemes(configs: Sequence[dict | None]) -> list[PositionScheme | None]:
    """The schemes of :func:`layer_schemes_config`'s list (``{"same_as": j}`` entries share layer ``j``'s)."""
    if not isinstance(configs, (list, tuple)):
        raise ValueError(f"layer_schemes must be a list of scheme configs or null, got {type(configs).__name__}")
    built: list[PositionScheme | None] = []
    for index, config in enumerate(configs):
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"layer_schemes[{index}] must be a scheme config (an object) or null, got {config!r}")
        if config is None:
            built.append(None)
        elif SAME_AS in config:
            built.append(_shared(built, config, index))
        else:
            built.append(build_scheme(config))
    return built


def _shared(built: list[PositionScheme | None], config: dict, index: int) -> PositionScheme:
    target = config[SAME_AS]
    valid = isinstance(target, int) and not isinstance(target, bool) and 0 <= target < index
    if len(config) != 1 or not valid or built[target] is None:
        raise ValueError(
            f"layer_schemes[{index}]={config!r}: a shared entry is {{'same_as': j}} with j an earlier layer "
            f"that has a scheme"
        )
    return built[target]
