"""posembed: how transformers know where a token is.

Every positional scheme behind one interface (absolute, rotary, bias), the transformer
input-embedding block, an inspector and an experiment lab.

Public names are imported lazily: ``import posembed`` stays cheap (no torch), and optional
dependencies (transformers, matplotlib, scikit-learn) load only when used. The parts are
attributes too, imported on first use: ``posembed.schemes``, ``posembed.schemes.positions``,
``posembed.interop``, ``posembed.analysis``, ``posembed.lab``, ``posembed.kernels``, ...
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

from posembed._utils import names as _names

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
    "LearnedAbsolute": "posembed.schemes.absolute.learned",
    "LearnedParameter": "posembed.schemes.absolute.learned",
    "Sinusoidal": "posembed.schemes.absolute.sinusoidal",
    "ScaledSinusoidal": "posembed.schemes.absolute.sinusoidal",
    "Sinusoidal2D": "posembed.schemes.absolute.sinusoidal_nd",
    "Sinusoidal3D": "posembed.schemes.absolute.sinusoidal_nd",
    # rotary
    "RotaryEmbedding": "posembed.schemes.rotary.rope",
    "LinearScalingRotary": "posembed.schemes.rotary.scaling",
    "NTKAwareRotary": "posembed.schemes.rotary.scaling",
    "DynamicNTKRotary": "posembed.schemes.rotary.scaling",
    "YaRNRotary": "posembed.schemes.rotary.yarn",
    "Llama3Rotary": "posembed.schemes.rotary.scaling",
    "LongRoPERotary": "posembed.schemes.rotary.longrope",
    "ProportionalRotary": "posembed.schemes.rotary.scaling",
    "XPos": "posembed.schemes.rotary.xpos",
    "AxialRotary": "posembed.schemes.rotary.axial",
    "PixtralRotary": "posembed.schemes.rotary.pixtral",
    "MRoPE": "posembed.schemes.rotary.mrope",
    "half_to_interleaved_qk_weight": "posembed.schemes.rotary.layout",
    "interleaved_to_half_qk_weight": "posembed.schemes.rotary.layout",
    # bias
    "ALiBi": "posembed.schemes.bias.alibi",
    "T5RelativeBias": "posembed.schemes.bias.t5",
    "ShawRelative": "posembed.schemes.bias.shaw",
    "Kerple": "posembed.schemes.bias.kerple",
    "Sandwich": "posembed.schemes.bias.sandwich",
    "FIRE": "posembed.schemes.bias.fire",
    "DynamicPositionBias": "posembed.schemes.bias.dynamic",
    "ForgettingGate": "posembed.schemes.bias.forgetting",
    "CoPE": "posembed.schemes.bias.cope",
    "DebertaRelative": "posembed.schemes.bias.deberta",
    "NoPE": "posembed.schemes.bias.nope",
    # blocks
    "TransformerEmbeddings": "posembed.nn.embedding.block",
    "SelfAttention": "posembed.nn.attention.layer",
    "Encoder": "posembed.nn.model.transformer",
    "Decoder": "posembed.nn.model.transformer",
    "build_model": "posembed.nn.model.transformer",
    "EmbeddingComponents": "posembed.nn.embedding.block",
    "encode_texts": "posembed.encode.pairs",
    "EncodedBatch": "posembed.encode.pairs",
    "explain_encoding": "posembed.encode.report",
    # positions
    "default_positions": "posembed.schemes.positions",
    "positions_from_mask": "posembed.schemes.positions",
    "positions_from_documents": "posembed.schemes.positions",
    "positions_with_offset": "posembed.schemes.positions",
}

#: names people guess from transformers' habits -> the posembed name that does the job (the error suggests it)
_GUESSES: dict[str, str] = {
    **dict.fromkeys(
        ("from_hf", "from_pretrained", "load_pretrained", "load_hf", "load_checkpoint", "load_model", "AutoModel"),
        "posembed.interop.hf.load_embeddings",
    ),
    **dict.fromkeys(("save_pretrained", "to_hf", "save_hf"), "posembed.interop.hf.save_embeddings"),
    **dict.fromkeys(
        ("from_config", "rope_from_config", "from_hf_config"), "posembed.interop.rope.config.rotary_from_hf_config"
    ),
    # the parts' old top-level places (issue 43 moved them into folders)
    "fused": "posembed.kernels",
    "attention": "posembed.nn.attention",
    "embeddings": "posembed.nn.embedding",
    "model": "posembed.nn.model",
    "positions": "posembed.schemes.positions",
    "devices": "posembed._utils.devices",
    "pairs": "posembed.encode.pairs",
    "encode_report": "posembed.encode.report",
    "power": "posembed.stats.power",
}

#: the parts README's table names, reached as attributes (``posembed.lab``), each imported on first use
SUBPACKAGES: tuple[str, ...] = (
    "analysis", "bench", "cli", "encode", "errors", "interop", "kernels", "lab", "nn", "schemes", "stats",
)  # fmt: skip

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports each on first use
    from posembed import analysis, bench, cli, encode, errors, interop, kernels, lab, nn, schemes, stats
    from posembed.encode.pairs import EncodedBatch, encode_texts
    from posembed.encode.report import explain_encoding
    from posembed.nn.attention.layer import SelfAttention
    from posembed.nn.embedding.block import EmbeddingComponents, TransformerEmbeddings
    from posembed.nn.model.transformer import Decoder, Encoder, build_model
    from posembed.schemes import SCHEMES
    from posembed.schemes.absolute.learned import LearnedAbsolute, LearnedParameter
    from posembed.schemes.absolute.sinusoidal import ScaledSinusoidal, Sinusoidal
    from posembed.schemes.absolute.sinusoidal_nd import Sinusoidal2D, Sinusoidal3D
    from posembed.schemes.base import AbsoluteScheme, BiasScheme, Kind, PositionScheme, RotaryScheme
    from posembed.schemes.bias.alibi import ALiBi
    from posembed.schemes.bias.cope import CoPE
    from posembed.schemes.bias.deberta import DebertaRelative
    from posembed.schemes.bias.dynamic import DynamicPositionBias
    from posembed.schemes.bias.fire import FIRE
    from posembed.schemes.bias.forgetting import ForgettingGate
    from posembed.schemes.bias.kerple import Kerple
    from posembed.schemes.bias.nope import NoPE
    from posembed.schemes.bias.sandwich import Sandwich
    from posembed.schemes.bias.shaw import ShawRelative
    from posembed.schemes.bias.t5 import T5RelativeBias
    from posembed.schemes.positions import (
        default_positions,
        positions_from_documents,
        positions_from_mask,
        positions_with_offset,
    )
    from posembed.schemes.rotary.axial import AxialRotary
    from posembed.schemes.rotary.layout import half_to_interleaved_qk_weight, interleaved_to_half_qk_weight
    from posembed.schemes.rotary.longrope import LongRoPERotary
    from posembed.schemes.rotary.mrope import MRoPE
    from posembed.schemes.rotary.pixtral import PixtralRotary
    from posembed.schemes.rotary.rope import RotaryEmbedding
    from posembed.schemes.rotary.scaling import (
        DynamicNTKRotary,
        LinearScalingRotary,
        Llama3Rotary,
        NTKAwareRotary,
        ProportionalRotary,
    )
    from posembed.schemes.rotary.xpos import XPos
    from posembed.schemes.rotary.yarn import YaRNRotary


def __getattr__(
    name: str,
) -> Any:  # Any: a lazily found part (posembed.stats.verdict) is a module type checkers cannot see
    return _names.facade_attribute(__name__, name, _EXPORTS, _GUESSES)


def __dir__() -> list[str]:
    return sorted({*__all__, *SUBPACKAGES})
