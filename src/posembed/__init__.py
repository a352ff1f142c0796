"""posembed: how transformers know where a token is.

Every positional scheme behind one interface (absolute, rotary, bias), the transformer
input-embedding block, an inspector and an experiment lab.

Public names are imported lazily: ``import posembed`` stays cheap (no torch), and optional
dependencies (transformers, matplotlib, scikit-learn) load only when used. The parts are
attributes too, imported on first use: ``posembed.schemes``, ``posembed.positions``,
``posembed.interop``, ``posembed.analysis``, ``posembed.lab``, ``posembed.fused``, ...
(:data:`SUBPACKAGES`), and so are theirs, at any depth (``posembed.interop.hf.load_embeddings``).
A name guessed from transformers' habits (``posembed.from_hf``) says which one does the job.

>>> import posembed
>>> posembed.LearnedAbsolute(max_len=8, dim=4).kind.value
'absolute'
"""

from __future__ import annotations

import importlib.metadata
import logging
from typing import TYPE_CHECKING, Any

from posembed import _names

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

#: names people guess from transformers' habits -> the posembed name that does the job (the error suggests it)
_GUESSES: dict[str, str] = {
    **dict.fromkeys(
        ("from_hf", "from_pretrained", "load_pretrained", "load_hf", "load_checkpoint", "load_model", "AutoModel"),
        "posembed.interop.hf.load_embeddings",
    ),
    **dict.fromkeys(("save_pretrained", "to_hf", "save_hf"), "posembed.interop.hf.save_embeddings"),
    **dict.fromkeys(("from_config", "rope_from_config", "from_hf_config"), "posembed.interop.rope.config.rotary_from_hf_config"),
}

#: the parts README's table names, reached as attributes (``posembed.lab``), each imported on first use
SUBPACKAGES: tuple[str, ...] = (
    "analysis", "attention", "bench", "cli", "devices", "embeddings", "errors", "fused", "interop", "lab",
    "model", "positions", "schemes",
)  # fmt: skip

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports each on first use
    from posembed import analysis, attention, bench, cli, devices, embeddings, errors, fused, interop, lab
    from posembed import model, positions, schemes
    from posembed.attention import SelfAttention
    from posembed.embeddings import EmbeddingComponents, TransformerEmbeddings
    from posembed.encode_report import explain_encoding
    from posembed.model import Decoder, Encoder, build_model
    from posembed.pairs import EncodedBatch, encode_texts
    from posembed.positions import default_positions, positions_from_documents, positions_from_mask
    from posembed.positions import positions_with_offset
    from posembed.schemes import SCHEMES
    from posembed.schemes.alibi import ALiBi
    from posembed.schemes.axial_rope import AxialRotary
    from posembed.schemes.base import AbsoluteScheme, BiasScheme, Kind, PositionScheme, RotaryScheme
    from posembed.schemes.cope import CoPE
    from posembed.schemes.deberta import DebertaRelative
    from posembed.schemes.dynamic_bias import DynamicPositionBias
    from posembed.schemes.fire import FIRE
    from posembed.schemes.forgetting import ForgettingGate
    from posembed.schemes.kerple import Kerple
    from posembed.schemes.learned import LearnedAbsolute, LearnedParameter
    from posembed.schemes.rotary_longrope import LongRoPERotary
    from posembed.schemes.mrope import MRoPE
    from posembed.schemes.nope import NoPE
    from posembed.schemes.pixtral_rope import PixtralRotary
    from posembed.schemes.rotary import RotaryEmbedding
    from posembed.schemes.rotary_layout import half_to_interleaved_qk_weight, interleaved_to_half_qk_weight
    from posembed.schemes.rotary_scaling import DynamicNTKRotary, Llama3Rotary, LinearScalingRotary
    from posembed.schemes.rotary_scaling import NTKAwareRotary, ProportionalRotary
    from posembed.schemes.rotary_yarn import YaRNRotary
    from posembed.schemes.sandwich import Sandwich
    from posembed.schemes.shaw import ShawRelative
    from posembed.schemes.sinusoidal import ScaledSinusoidal, Sinusoidal
    from posembed.schemes.sinusoidal_nd import Sinusoidal2D, Sinusoidal3D
    from posembed.schemes.t5_bias import T5RelativeBias
    from posembed.schemes.xpos import XPos


def __getattr__(name: str) -> Any:  # Any: a lazily found part (posembed.stats) is a module type checkers cannot see
    return _names.facade_attribute(__name__, name, _EXPORTS, _GUESSES)


def __dir__() -> list[str]:
    return sorted({*__all__, *SUBPACKAGES})
