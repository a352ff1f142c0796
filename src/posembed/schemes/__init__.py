"""Positional schemes, one per file; each declares its :class:`~posembed.schemes.base.Kind`.

:mod:`posembed.schemes.factory` is the one list of schemes and says how each is built from a
model's sizes; :data:`SCHEMES` (name -> class) and :func:`all_schemes` are read from it. Both
load every scheme module on first use, so ``import posembed.schemes`` stays light.

Files:

=================== ============================================================================
file                what
=================== ============================================================================
``base``            the scheme interface: ``PositionScheme`` and its three kinds
``factory``         the one list of schemes (``SchemeEntry``) and how each is built
``entry``           what an entry is: ``ModelSizes``, ``Arg``, ``SchemeEntry``
``config``          a scheme as a JSON-able dict and back
``catalog``         one row per factory entry (``posembed schemes``)
``phases``          cos and sin of position times frequency, exact in float32
``fp32_buffers``    fp32 tables kept as int32 bits, so dtype casts leave them exact
``rotation``        RoPE's rotation: the formula, its compiled kernel, the dispatch point
``relative``        relative positions shared by the bias schemes
``rotary_checks``   input checks of the rotary schemes
``rotary_layout``   q/k weights between the two RoPE channel layouts
``learned``         absolute: learned table
``sinusoidal``      absolute: fixed sinusoids (Vaswani et al. 2017) and their scaled variant
``sinusoidal_nd``   absolute: sinusoids on 2-D and 3-D grids
``rotary``          rotary: RoPE (Su et al. 2021)
``rotary_scaling``  rotary: context-extension variants (linear, NTK, Llama 3, ...)
``rotary_yarn``     rotary: YaRN
``rotary_longrope`` rotary: LongRoPE
``xpos``            rotary: xPos
``axial_rope``      rotary: RoPE over several position axes
``mrope``           rotary: Qwen2-VL's multimodal RoPE
``mrope_positions`` M-RoPE's position ids for interleaved text, images and videos
``pixtral_rope``    rotary: Pixtral's 2-D RoPE
``rerotate``        moving RoPE-rotated keys to new positions or another scheme
``nope``            bias: no positional encoding (NoPE)
``alibi``           bias: ALiBi
``t5_bias``         bias: T5's bucketed relative bias
``kerple``          bias: KERPLE
``fire``            bias: FIRE
``sandwich``        bias: Sandwich
``dynamic_bias``    bias: an MLP of the distance
``forgetting``      bias: the Forgetting Transformer's gates
``cope``            bias: CoPE, contextual positions
``shaw``            bias: Shaw-style relative embeddings
``deberta``         bias: DeBERTa's disentangled relative attention
=================== ============================================================================
"""

from __future__ import annotations

from posembed._names import import_submodule
from posembed.schemes.base import AbsoluteScheme, BiasScheme, Kind, PositionScheme, RotaryScheme

__all__ = ["SCHEMES", "AbsoluteScheme", "BiasScheme", "Kind", "PositionScheme", "RotaryScheme", "all_schemes"]


def __getattr__(name: str):
    if name in ("SCHEMES", "all_schemes"):  # from the factory, which loads every scheme: on first use only
        from posembed.schemes import factory

        return factory.SCHEME_CLASSES if name == "SCHEMES" else factory.all_schemes
    return import_submodule(__name__, name)  # posembed.schemes.<file>: imported on first use
