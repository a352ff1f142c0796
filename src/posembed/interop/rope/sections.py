"""M-RoPE's sections as the model's own rotary embedding places them: :func:`model_sections`.

transformers' M-RoPE classes (Qwen2-VL and ~20 more) take ``rope_parameters["mrope_section"]`` or a default of their
own and deal the sections to the frequencies their own way (blocks, round robin, ERNIE's h/w pairs). Rather than a
table of families, the reader gives the module three tokens (token ``a`` at 1 on axis ``a``), reads which token turns
each pair, and keeps the :class:`~posembed.schemes.rotary.mrope.MRoPE` arrangement and section order that deal them
the same.

Example:
    >>> from posembed.interop.rope.model import transformers_config
    >>> config = transformers_config({"model_type": "qwen3_vl_text", "head_dim": 16, "num_attention_heads": 4,
    ...                               "rope_parameters": {"rope_type": "default", "mrope_section": [4, 2, 2]}})
    >>> model_sections(config)
    MRopeSections(section=(4, 2, 2), arrangement='interleaved', section_axes=(0, 1, 2))
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import Iterable
from typing import Any, NamedTuple

import torch

from posembed.interop.rope.axial import pair_form
from posembed.interop.rope.model import ALL_LAYERS, REFUSED, model_rotary_class
from posembed.schemes.rotary.mrope import MROPE_ARRANGEMENTS, mrope_pairs

__all__ = ["MRopeSections", "model_sections", "axes_of_pairs"]

logger = logging.getLogger(__name__)


class MRopeSections(NamedTuple):
    """How an M-RoPE module deals its frequencies to the axes: :class:`~posembed.schemes.rotary.mrope.MRoPE`'s
    ``mrope_section``, ``arrangement`` and ``section_axes``."""

    section: tuple[int, int, int]
    arrangement: str
    section_axes: tuple[int, int, int]


def axes_of_pairs(sin: torch.Tensor) -> list[int] | None:
    """The axis each pair follows, from ``sin`` ``(3, W)`` of the three one-hot tokens (each pair twice, as halves or
    side by side): the token whose sine is not zero; ``None``: another layout, or a pair no single token turns."""
    form = pair_form(sin, sin.shape[-1])
    moved = None if form is None else form[0] != 0
    if moved is None or not bool((moved.sum(0) == 1).all()):
        return None
    return moved.float().argmax(0).tolist()


def _probe_sin(embedding: Any, layer: str) -> torch.Tensor:
    positions = torch.eye(3, dtype=torch.long)[:, None, :]  # (3 axes, 1, 3 tokens): token a at 1 on axis a
    extra = () if layer == ALL_LAYERS else (layer,)
    with torch.no_grad():
        _, sin = embedding(torch.zeros(1, 3, 8), positions, *extra)
    while sin.dim() > 2:
        sin = sin[0]
    return sin.float()


def _triple(values: Iterable[int]) -> tuple[int, int, int]:
    first, second, third = values
    return first, second, third


def _section_of(embedding: Any, layer: str) -> tuple[int, int, int] | None:
    section = getattr(embedding, "mrope_section", None)
    if isinstance(section, dict):
        section = section.get(layer)
    if not isinstance(section, (list, tuple)) or len(section) != 3:
        return None
    return _triple(int(size) for size in section)


def model_sections(config: Any, layer: str = ALL_LAYERS) -> MRopeSections | None:
    """The :class:`MRopeSections` of the config's M-RoPE rotary embedding, read from what its forward does; ``None``:
    not M-RoPE, not three sections, or an arrangement :class:`~posembed.schemes.rotary.mrope.MRoPE` does not have."""
    cls = model_rotary_class(config)
    if cls is None:  # no rotary class: no sections to read
        return None
    try:
        embedding = cls(copy.deepcopy(config))
        section = _section_of(embedding, layer)
        if section is None:
            return None
        axes = axes_of_pairs(_probe_sin(embedding, layer))
    except REFUSED as error:  # a module that cannot be probed is read without sections
        logger.debug("the M-RoPE sections of %s cannot be read: %s", type(config).__name__, error)
        return None
    if axes is None:
        return None
    for arrangement, order in itertools.product(MROPE_ARRANGEMENTS, map(_triple, itertools.permutations(range(3)))):
        # its own sections, else (a class default wider than the head, which its forward clips: Qwen3-Omni's talker)
        # the sections it deals in effect: the pairs each axis turns
        for sizes in (section, _triple(axes.count(axis) for axis in order)):
            try:
                if sum(sizes) == len(axes) and mrope_pairs(sizes, arrangement, order)[1] == axes:
                    return MRopeSections(sizes, arrangement, order)
            except ValueError:  # zipped needs equal first sections
                continue
    logger.debug("%s deals its M-RoPE axes as %s, which no MRoPE arrangement does", type(config).__name__, axes)
    return None
