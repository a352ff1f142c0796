"""What the inspector knows about one model: :class:`Source` and the first layer it decomposes.

The loaders (:mod:`posembed.analysis.sources` for Hugging Face checkpoints and library schemes,
:mod:`posembed.analysis.lab_source` for lab checkpoints) fill these; the report sections read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from posembed.analysis.text_model import TextModel

__all__ = ["FirstLayer", "Source"]


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
