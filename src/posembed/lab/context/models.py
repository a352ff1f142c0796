"""Step 1 of the study: the models it trains, each built fresh (:func:`build_context_model`).

- :data:`STUDY_SCHEMES`: RoPE (the factory's plain rotary scheme, what every method extends) and
  the references (:data:`~posembed.lab.context.presets.REFERENCES`: the factory entries with a
  ``reference``, each built by :func:`posembed.schemes.factory.build_from_sizes` with the
  arguments its :class:`~posembed.schemes.factory.StudyReference` takes from L):

  ========= =================================================================================
  alibi     ALiBi, causal slopes (Press et al. 2022)
  nope      no positions (Kazemnejad et al. 2023): a model without a scheme
  fire      FIRE with the paper's reference-code init ``c = 0.1`` and the threshold ``L0 = L / 4``
            (the paper's 512 at its training length 2048): the normaliser ``psi(max(L0, i))``
            follows the query position ``i`` over most of the training window and at every
            longer length, which is the progressive interpolation FIRE evaluates with
  kerple    KERPLE, logarithmic kernel (the paper's best variant)
  sandwich  Sandwich with ``d'`` = the model width
  cope      CoPE with ``npos_max = L`` (every count reached in training has its embedding;
            longer counts clamp to ``L - 1``)
  ========= =================================================================================
"""

from __future__ import annotations

import torch
from torch import nn

from posembed.lab.context.presets import REFERENCES, ContextConfig
from posembed.schemes.base import PositionScheme
from posembed.schemes.bias.nope import NoPE
from posembed.schemes.factory import FACTORY, METHOD_SCHEMES, ModelSizes, build_from_sizes

__all__ = ["STUDY_SCHEMES", "study_scheme", "build_context_model"]

#: every model a study trains from scratch: RoPE and the references
STUDY_SCHEMES = (METHOD_SCHEMES["extrapolate"], *REFERENCES)


def study_scheme(cfg: ContextConfig, scheme: str) -> PositionScheme | None:
    """The scheme of the study's model ``scheme`` (``None``: NoPE, a model without one)."""
    if scheme not in STUDY_SCHEMES:
        raise ValueError(f"unknown study scheme {scheme!r}; known: {', '.join(STUDY_SCHEMES)}")
    entry = FACTORY[scheme]
    if entry.cls is NoPE:  # as the stored NoPE models were built
        return None
    # RoPE (no reference): plain, without a cos/sin cache, as every method builds it, so any length runs
    args = {"max_len": None} if entry.reference is None else entry.reference.args(cfg.context)
    sizes = ModelSizes(
        dim=cfg.dim, num_heads=cfg.heads, head_dim=cfg.dim // cfg.heads, max_len=cfg.context, causal=True
    )
    return build_from_sizes(scheme, sizes, args)


def build_context_model(cfg: ContextConfig, scheme: str, vocab_size: int) -> nn.Module:
    """A fresh decoder (on the CPU) of the study's size with ``scheme`` (one of :data:`STUDY_SCHEMES`,
    built by :func:`study_scheme`); the same seed gives the same weights."""
    from posembed.nn.model.transformer import Decoder

    torch.manual_seed(cfg.seed)  # before the scheme: FIRE's and KERPLE's parameters draw from it too
    position = study_scheme(cfg, scheme)
    return Decoder(vocab_size, dim=cfg.dim, depth=cfg.depth, num_heads=cfg.heads, scheme=position)
