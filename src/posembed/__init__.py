"""posembed: how transformers know where a token is.

Every positional scheme behind one interface (absolute, rotary, bias), the transformer
input-embedding block, an inspector and an experiment lab.

Public names are imported lazily: ``import posembed`` stays cheap, and optional
dependencies (transformers, matplotlib, scikit-learn) load only when used. The parts are
attributes too, imported on first use: ``posembed.schemes``, ``posembed.positions``,
``posembed.interop``, ``posembed.analysis``, ``posembed.lab``, ``posembed.fused``, ...
(:data:`SUBPACKAGES`).

>>> import posembed
>>> posembed.LearnedAbsolute(max_len=8, dim=4).kind.value
'absolute'
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging

try:
    __version__ = importlib.metadata.version("posembed")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "unknown"

logging.getLogger(__name__).addHandler(logging.NullHandler())

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # interface
    "Kind": "posembed.schemes.base",
    "PositionScheme": "posembed.schemes.base",
    "AbsoluteScheme": "posembed.schemes.base",
    "RotaryScheme": "posembed.schemes.base",
    "BiasScheme": "posembed.schemes.base",
    "SCHEMES": "posembed.schemes",
    # absolute
    "LearnedAbsolute": "posembed.schemes.learned",
    "LearnedParameter": "posembed.schemes.learned",
    "Sinusoidal": "posembed.schemes.sinusoidal",
    "ScaledSinusoidal": "posembed.schemes.sinusoidal",
    "Sinusoidal2D": "posembed.schemes.sinusoidal_nd",
    "Sinusoidal3D": "posembed.schemes.sinusoidal_nd",
    # rotary
    "RotaryEmbedding": "posembed.schemes.rotary",
    "LinearScalingRotary": "posembed.schemes.rotary_scaling",
    "NTKAwareRotary": "posembed.schemes.rotary_scaling",
    "DynamicNTKRotary": "posembed.schemes.rotary_scaling",
    "YaRNRotary": "posembed.schemes.rotary_yarn",
    "Llama3Rotary": "posembed.schemes.rotary_scaling",
    "LongRoPERotary": "posembed.schemes.rotary_longrope",
    "ProportionalRotary": "posembed.schemes.rotary_scaling",
    "XPos": "posembed.schemes.xpos",
    "AxialRotary": "posembed.schemes.axial_rope",
    "PixtralRotary": "posembed.schemes.pixtral_rope",
    "MRoPE": "posembed.schemes.mrope",
    "half_to_interleaved_qk_weight": "posembed.schemes.rotary_layout",
    "interleaved_to_half_qk_weight": "posembed.schemes.rotary_layout",
    # bias
    "ALiBi": "posembed.schemes.alibi",
    "T5RelativeBias": "posembed.schemes.t5_bias",
    "ShawRelative": "posembed.schemes.shaw",
    "Kerple": "posembed.schemes.kerple",
    "Sandwich": "posembed.schemes.sandwich",
    "FIRE": "posembed.schemes.fire",
    "DynamicPositionBias": "posembed.schemes.dynamic_bias",
    "ForgettingGate": "posembed.schemes.forgetting",
    "CoPE": "posembed.schemes.cope",
    "DebertaRelative": "posembed.schemes.deberta",
    "NoPE": "posembed.schemes.nope",
    # blocks
    "TransformerEmbeddings": "posembed.embeddings",
    "SelfAttention": "posembed.attention",
    "Encoder": "posembed.model",
    "Decoder": "posembed.model",
    "build_model": "posembed.model",
    "EmbeddingComponents": "posembed.embeddings",
    "encode_texts": "posembed.pairs",
    "EncodedBatch": "posembed.pairs",
    "explain_encoding": "posembed.encode_report",
    # positions
    "default_positions": "posembed.positions",
    "positions_from_mask": "posembed.positions",
    "positions_from_documents": "posembed.positions",
    "positions_with_offset": "posembed.positions",
}

#: the parts README's table names, reached as attributes (``posembed.lab``), each imported on first use
SUBPACKAGES: tuple[str, ...] = (
    "analysis", "attention", "bench", "cli", "devices", "embeddings", "errors", "fused", "interop", "lab",
    "model", "positions", "schemes",
)  # fmt: skip

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in SUBPACKAGES:
        value = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = value
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'posembed' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *SUBPACKAGES})
