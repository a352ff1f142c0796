"""How wide and in which layout a config rotates: :func:`rotary_width`.

Where transformers knows the model type its own code answers the widths, sections and axes
(:mod:`posembed.interop.rope.model`; a rotary that computes its own positions is its patch grid's axial RoPE, Llama 4's
vision tower, or refused); otherwise the dict: ``head_dim``, else ``qk_rope_head_dim``, else
``hidden_size // num_attention_heads``. The rotation (layout, direction, channels) is the shipped table's for the
config class or model type, with or without transformers (:mod:`posembed.interop.rope.table`); a type it does not
know is read from its ``rope_interleave``, else halves after one warning naming the type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from posembed.interop.rope.axial import AxialSettings, model_axial, model_grid_axial
from posembed.interop.rope.model import (
    config_value,
    model_forward_mscale,
    model_own_positions,
    model_rotation,
    model_widths,
    transformers_config,
)
from posembed.interop.rope.sections import MRopeSections, model_sections
from posembed.interop.rope.table import declared_rotation, type_rotation

__all__ = ["RotaryWidth", "rotary_width"]


@dataclass(frozen=True)
class RotaryWidth:
    """The rotary channels of a config, as the model's own code decides them (the fields of
    :class:`~posembed.interop.rope.settings.RopeSettings` of the same names); ``model``: ``{layer type: (head_dim,
    rotary_dim)}`` as its rotary embedding builds them (``None``: not known)."""

    head_dim: int
    hidden_size: int | None
    num_heads: int | None
    layout: str
    max_position_embeddings: int | None = None
    model: dict[str, tuple[int, int]] | None = None
    direction: str = "forward"
    channels: str = "first"
    mrope: MRopeSections | None = None
    axial: AxialSettings | None = None
    forward_mscale: tuple[float, float, int] | None = None

    def of(self, layer: str) -> tuple[int, int] | None:
        """``(head_dim, rotary_dim)`` of a layer type as the model's rotary embedding builds it, if known."""
        widths = set((self.model or {}).values())
        return self.model[layer] if self.model and layer in self.model else widths.pop() if len(widths) == 1 else None


def rotary_width(raw: Mapping) -> RotaryWidth:
    """The :class:`RotaryWidth` of a config dict.

    Raises ``ValueError`` when the head size cannot be placed (no ``head_dim``, ``hidden_size`` or
    ``num_attention_heads``, and no model code that says it).

    >>> raw = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128}
    >>> width = rotary_width(raw)
    >>> width.head_dim, width.layout, width.model
    (64, 'interleaved', {'all': (64, 64)})
    """
    hidden = raw.get("hidden_size", raw.get("n_embd", raw.get("d_model")))
    heads = raw.get("num_attention_heads", raw.get("n_head"))
    max_pos = raw.get("max_position_embeddings", raw.get("n_positions"))
    hf = transformers_config(raw)
    if hf is None:  # the dict as written
        head_dim = raw.get("head_dim") or raw.get("qk_rope_head_dim")
        interleave = raw.get("rope_interleave")
        rotation = type_rotation(raw.get("model_type"), interleave) or declared_rotation(
            raw.get("model_type"), interleave
        )
        model, mrope, axial, mscale = None, None, None, None
    else:  # the model's own code: its aliases, class defaults, rotary widths and rotation function
        own, grid = model_own_positions(hf), None
        if own is not None and (grid := model_grid_axial(hf)) is None:
            raise ValueError(f"{type(hf).__name__}: its rotary embedding computes its own positions ({own}); "
                             "posembed does not model it")  # fmt: skip
        hidden, heads = config_value(hf, "hidden_size", hidden), config_value(hf, "num_attention_heads", heads)
        max_pos, model = config_value(hf, "max_position_embeddings", max_pos), model_widths(hf)
        head_dim, mrope, axial = config_value(hf, "head_dim"), model_sections(hf), grid or model_axial(hf)
        mscale = model_forward_mscale(hf) if axial is None and mrope is None else None
        if axial is not None:  # the pairs its forward lays out (the rotation function takes its cos / sin as given)
            rotation = (axial.layout, "forward", "first")
            head_dim = axial.head_dim  # Qwen2-VL's vision embed_dim / heads; SAM 2 video's memory attention
        else:
            model_type = config_value(hf, "model_type", raw.get("model_type"))
            rotation = model_rotation(hf) or declared_rotation(model_type, config_value(hf, "rope_interleave"))
    if not head_dim and model:
        head_dim = next(iter(model.values()))[0]
    if not head_dim:
        if not hidden or not heads:
            raise ValueError("the config needs head_dim, or hidden_size and num_attention_heads, to place RoPE")
        head_dim = int(hidden) // int(heads)
    return RotaryWidth(int(head_dim), hidden, heads, rotation[0], max_pos, model, *rotation[1:], mrope, axial, mscale)
