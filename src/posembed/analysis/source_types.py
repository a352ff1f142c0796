"""What the inspector knows about one model: :class:`Source` and the first layer it decomposes.

The loaders (:mod:`posembed.analysis.sources` for Hugging Face checkpoints and library schemes,
:mod:`posembed.analysis.lab_source` for lab checkpoints) fill these; the report sections read them.
Tensors and tables here stay on the CPU; ``Source.device`` is where the model and the matrices
computed from it run (the results come back to the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from posembed.analysis.text_model import TextModel
from posembed.schemes.base import PositionScheme

__all__ = ["FirstLayer", "AttentionWeights", "Source"]


@dataclass
class AttentionWeights:
    """One layer's query and key projections in ``nn.Linear`` layout: ``wq (H*D, C)``, ``wk (KV*D, C)``.

    Grouped-query attention: query head ``h`` reads key head ``h // (H // KV)``.
    """

    wq: torch.Tensor
    wk: torch.Tensor
    num_heads: int
    num_kv_heads: int
    head_dim: int


@dataclass
class FirstLayer:
    """First-layer attention projections in ``nn.Linear`` layout plus the LayerNorm feeding them."""

    wq: torch.Tensor
    bq: torch.Tensor | None
    wk: torch.Tensor
    bk: torch.Tensor | None
    ln_weight: torch.Tensor
    ln_bias: torch.Tensor
    ln_eps: float
    num_heads: int
    where: str  # how the LayerNorm sits, for the report

    def to(self, device: torch.device) -> FirstLayer:
        """The same layer with its tensors on ``device`` (itself, tensor for tensor, where they are there)."""

        def move(tensor: torch.Tensor | None) -> torch.Tensor | None:
            return None if tensor is None else tensor.to(device)

        return replace(self, wq=move(self.wq), bq=move(self.bq), wk=move(self.wk), bk=move(self.bk),
                       ln_weight=move(self.ln_weight), ln_bias=move(self.ln_bias))  # fmt: skip


@dataclass
class Source:
    """What the inspector knows about one model (tables are float64 numpy, rows = positions / ids)."""

    name: str
    family: str
    positions: str  # what the model uses for positions, in words
    position_table: np.ndarray | None = None
    token_table: np.ndarray | None = None
    segment_table: np.ndarray | None = None
    first_layer: FirstLayer | None = None
    text_model: TextModel | None = None
    #: (T, T) closeness between positions for models without a table (rotary / bias), and what it is
    closeness: np.ndarray | None = None
    closeness_name: str = ""
    notes: list[str] = field(default_factory=list)
    #: the position scheme itself, where the inspector can build it (lab checkpoints, ``--scheme``,
    #: the RoPE of a Hugging Face config with its scaling); ``None`` for a table-only or NoPE model
    scheme: PositionScheme | None = None
    #: every layer's q/k projections (which rotary pairs the heads use)
    attention: list[AttentionWeights] = field(default_factory=list)
    #: :class:`posembed.interop.rope_check.check.RopeReport` of a Hugging Face RoPE config
    rope_report: Any = None
    #: the context the model was trained on, where known (lab meta, ``original_max_position_embeddings``)
    trained_length: int | None = None
    #: True for a model that has no positional encoding at all (NoPE)
    nope: bool = False
    #: where the text model, the scheme's matrices and the logit decomposition run (``--device``)
    device: torch.device = torch.device("cpu")
