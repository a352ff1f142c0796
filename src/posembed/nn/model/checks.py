"""Argument and input checks of :class:`~posembed.nn.model.transformer.TransformerModel` (Encoder and Decoder).

Pure functions, each refusing a bad value with a message naming it and the limit: the padding
mask's shape, and which ``combine`` / ``inject`` / ``untied`` options a scheme's kind allows
(re-injection and untied attention need an absolute scheme).
"""

from __future__ import annotations

from torch import Tensor

from posembed.nn.embedding.checks import COMBINES
from posembed.schemes.base import Kind, PositionScheme

__all__ = ["INJECTS", "check_mask", "check_options"]

#: how absolute position vectors enter: once at the input, or re-added before every block
INJECTS = ("once", "every_layer")


def check_mask(input_ids: Tensor, attention_mask: Tensor | None) -> None:
    """The padding mask must be ``(B, T)`` like ``input_ids``: a clear error naming both shapes."""
    if attention_mask is None:
        return
    if not isinstance(attention_mask, Tensor):
        raise TypeError(f"attention_mask must be a tensor, got {type(attention_mask).__name__}")
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)} but input_ids has shape "
            f"{tuple(input_ids.shape)}; they must match (B, T), 1 for real tokens and 0 for padding"
        )


def check_options(scheme: PositionScheme | None, combine: str, inject: str, untied: bool) -> None:
    if scheme is not None and not isinstance(scheme, PositionScheme):
        raise TypeError(f"scheme must be a posembed PositionScheme or None, got {type(scheme).__name__}")
    if combine not in COMBINES:
        raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
    if inject not in INJECTS:
        raise ValueError(f"inject must be one of {INJECTS}, got {inject!r}")
    absolute = scheme is not None and scheme.kind == Kind.ABSOLUTE
    what = "None" if scheme is None else f"{type(scheme).__name__} (kind {scheme.kind.value!r})"
    options = {
        "combine='concat'": combine == "concat",
        "inject='every_layer'": inject == "every_layer",
        "untied=True": untied,
    }
    for option, used in options.items():
        if used and not absolute:
            raise ValueError(f"{option} needs an absolute position scheme, got scheme={what}")
    if untied and (combine != "add" or inject != "once"):
        raise ValueError("untied=True keeps positions out of the input: use it with combine='add', inject='once'")
