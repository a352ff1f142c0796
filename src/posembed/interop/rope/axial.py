"""The settings of an axial (2-D / 3-D vision) rotary embedding, read from the model's own module: :func:`model_axial`.

transformers 5.24's vision towers with ``rope_type == "axial"`` (Qwen2-VL's and ~25 more) split each head into one
RoPE per coordinate axis, ``inv_freq`` of ``axis_dim / 2`` frequencies shared by the axes, and place the axes' pairs
in their own ``recomposition_frequencies``: ``cat(h, w)`` twice (NeoX halves), ``repeat_interleave(2)`` (adjacent
pairs: SAM 2 video, SAM 3), ``[h, h, w, w]`` (each axis rotated on its own: Gemma 4), the width first (Step3p7,
Inkling2), the axes dealt round robin (Kimi-K2.5), three axes (MiniMax-M3-VL). Rather than a table of classes, the
reader asks the module: it gives it ``A + 1`` tokens, token ``a`` at 1 on axis ``a`` and the last at the origin, reads
from the cos / sin it returns how each pair is laid out and which axis and frequency turns it, and keeps the
:class:`~posembed.schemes.axial_rope.AxialRotary` settings that give the same sines.
"""

from __future__ import annotations

import copy
import itertools
import logging
from typing import Any, NamedTuple

import torch

from posembed.interop.rope.model import config_value, model_rotation, own_position_class, rotary_class, rotary_classes
from posembed.positions import CLS_PLACES, patch_grid_positions

__all__ = ["AxialSettings", "axial_class", "model_axial", "model_grid_axial", "own_grid_table", "pair_form"]

logger = logging.getLogger(__name__)


class AxialSettings(NamedTuple):
    """:class:`~posembed.schemes.axial_rope.AxialRotary`'s arguments that a vision tower's module decides."""

    num_axes: int
    axis_dim: int
    layout: str
    axis_order: tuple[int, ...]
    frequency_order: str
    layout_span: str
    head_dim: int  # the head width its frequencies are computed from
    grid: tuple[int, int] | None = None  # a module that rotates its own patch grid (Llama 4's vision tower): its size,
    grid_offset: int = 0  # the offset of its patch coordinates,
    cls_token: str | None = None  # and where its class token, at (0, 0), sits: "first", "last" (None: none)
    scheme: str = "rope_axial"  # Pixtral's even / odd frequencies: "rope_pixtral"

    def positions(self, device: torch.device | str | None = None) -> torch.Tensor | None:
        """``(T, 2)``: the ``(row, column)`` coordinates the model rotates its tokens at, where its module computes
        them (:func:`~posembed.positions.patch_grid_positions` of its grid); ``None``: the caller passes them."""
        if self.grid is None:
            return None
        return patch_grid_positions(*self.grid, offset=self.grid_offset, cls_token=self.cls_token, device=device)


def _squeeze(t: torch.Tensor) -> torch.Tensor:
    while t.dim() > 2 and t.shape[0] == 1:
        t = t[0]
    return t


def _sines(embedding: Any, coords: torch.Tensor, width: int) -> torch.Tensor | None:
    """``(N, width)`` sines of the module at coordinates ``(N, A)``, in the first form its forward takes (``(A, N)``,
    ``(N, A)``, ``(1, N, A)``, ``(A, 1, N)``) that gives one row of ``width`` per token."""
    for form in (coords.T, coords, coords[None], coords.T[:, None]):
        try:
            with torch.no_grad():
                out = embedding(torch.zeros(1, coords.shape[0], 8), form)
        except Exception:  # noqa: BLE001 - the wrong form: the next one
            continue
        sin = _squeeze(out.imag if isinstance(out, torch.Tensor) else out[1]).float()
        if sin.dim() == 2 and sin.shape == (coords.shape[0], width):
            return sin
    return None


def pair_form(sin: torch.Tensor, axis_dim: int) -> tuple[torch.Tensor, str, str] | None:
    """``(sines per pair (N, P), layout, layout_span)`` of sines ``(N, 2P)`` that hold each pair twice: as halves
    (``"half"``, ``"head"``), side by side (``"interleaved"``), or halves within each axis' block of ``axis_dim``
    channels (``"half"``, ``"axis"``); ``None``: none of these."""
    width = sin.shape[-1]
    if torch.equal(sin[:, : width // 2], sin[:, width // 2 :]):
        return sin[:, : width // 2], "half", "head"
    if torch.equal(sin[:, 0::2], sin[:, 1::2]):
        return sin[:, 0::2], "interleaved", "head"
    blocks = sin.split(axis_dim, -1)
    half = axis_dim // 2
    if width % axis_dim == 0 and all(torch.equal(b[:, :half], b[:, half:]) for b in blocks):
        return torch.cat([b[:, :half] for b in blocks], -1), "half", "axis"
    return None


def axial_class(config: Any) -> type:
    """The rotary class of the config's tower that builds axial frequencies (``compute_axial_rope_parameters``), else
    :func:`~posembed.interop.rope.model.rotary_class`."""
    found = rotary_classes(config, "compute_axial_rope_parameters")
    return found[0] if found else rotary_class(config)


def _head_widths(config: Any) -> list[int]:
    """The head widths a vision config may mean: ``head_dim``, ``embed_dim`` or ``hidden_size`` over the heads
    (Qwen2-VL's vision ``hidden_size`` is its merger's; its heads are ``embed_dim`` wide)."""
    heads = config_value(config, "num_attention_heads") or config_value(config, "num_heads")
    found = [config_value(config, "head_dim")]
    found += [int(w) // int(heads) for w in (config_value(config, "embed_dim"), config_value(config, "hidden_size")) if w and heads]
    return [int(w) for w in found if isinstance(w, int) and w > 0]


def _head_of(widths: list[int], axes: int, axis_dim: int) -> int | None:
    """The first width whose ``axes`` axes are ``axis_dim`` wide (``(head // axes)`` rounded down to even)."""
    return next((w for w in widths if (w // axes) // 2 * 2 == axis_dim), None)


def model_axial(config: Any) -> AxialSettings | None:
    """The :class:`AxialSettings` of the config's axial rotary module (``rope_type == "axial"``), read from what it
    computes; ``None``: not axial, or a placement :class:`~posembed.schemes.axial_rope.AxialRotary` does not have
    (Pixtral's even / odd frequencies: :class:`~posembed.schemes.pixtral_rope.PixtralRotary`)."""
    from posembed.schemes.axial_rope import AxialRotary

    params = getattr(config, "rope_parameters", None) or {}
    if not isinstance(params, dict) or params.get("rope_type") != "axial":
        return None
    try:
        embedding = axial_class(config)(copy.deepcopy(config))
        axis_dim = 2 * embedding.inv_freq.numel()
        base = float(params.get("rope_theta", 10000.0))
    except Exception as error:  # noqa: BLE001 - a module that cannot be built is read without axial settings
        logger.debug("the axial rotary module of %s cannot be built: %s", type(config).__name__, error)
        return None
    widths = _head_widths(config)  # the axes the module splits its head into: axis_dim = (head_dim // A) rounded to even
    fits = [axes for axes in (2, 3) if _head_of(widths, axes, axis_dim)]
    for axes in fits or (2, 3):
        coords = torch.cat([torch.eye(axes, dtype=torch.long), torch.zeros(1, axes, dtype=torch.long)])  # (A + 1, A)
        sin = _sines(embedding, coords, axes * axis_dim)  # each pair twice
        if sin is None:
            continue
        form = pair_form(sin, axis_dim)
        if form is None:
            continue
        pairs, layout, span = form
        for order, frequencies in itertools.product(itertools.permutations(range(axes)), ("blocks", "interleaved")):
            if span == "axis" and frequencies == "interleaved":
                continue
            ours = AxialRotary(axes * axis_dim, num_axes=axes, axis_dim=axis_dim, base=base, angles="fp32",
                               axis_order=order, frequency_order=frequencies)  # fmt: skip
            if torch.allclose(ours.cos_sin(coords)[1], pairs, rtol=0, atol=1e-6):
                head = _head_of(widths, axes, axis_dim) or axes * axis_dim
                return AxialSettings(axes, axis_dim, layout, order, frequencies, span, head)
    pixtral = _pixtral(embedding, next((w for w in widths if w == 2 * embedding.inv_freq.numel()), None), base)
    if pixtral is None:
        logger.debug("the axial rotary module of %s places its pairs as no AxialRotary does", type(config).__name__)
    return pixtral


def _pixtral(embedding: Any, head: int | None, base: float) -> AxialSettings | None:
    """Pixtral's placement (:class:`~posembed.schemes.pixtral_rope.PixtralRotary`: all ``head / 2`` frequencies, the
    even ones to the rows, the odd ones to the columns), if the module's sines are its."""
    from posembed.schemes.pixtral_rope import PixtralRotary

    if not head or head % 2 or 2 * embedding.inv_freq.numel() != head:
        return None
    coords = torch.tensor([[1, 0], [0, 1], [0, 0]])
    sin = _sines(embedding, coords, head)
    form = None if sin is None else pair_form(sin, head)
    if form is None:
        return None
    ours = PixtralRotary(head, base=base, angles="fp32").cos_sin(coords)[1]
    if ours.shape != form[0].shape or not torch.allclose(ours, form[0], rtol=0, atol=1e-6):
        return None
    return AxialSettings(2, head // 2, form[1], (0, 1), "blocks", form[2], head, scheme="rope_pixtral")


def _own_table(embedding: Any, config: Any) -> torch.Tensor | None:
    """The ``(T, P)`` complex table (``cos + i sin``, one entry per pair) a module returns for the pixels its model
    gives it, where it returns the same for other pixels (a grid fixed by its config); ``None`` otherwise."""
    size, channels = int(config_value(config, "image_size")), int(config_value(config, "num_channels", 3) or 3)
    with torch.no_grad():
        out, other = (embedding(torch.zeros(1, channels, s, s)) for s in (size, size // 2))
    if not isinstance(out, torch.Tensor) or not out.is_complex() or not torch.equal(out, other):
        return None
    return out.reshape(-1, out.shape[-1])  # Llama 4's (T, 1, P)


def own_grid_table(config: Any) -> torch.Tensor | None:
    """The ``(T, P)`` complex table of the config's rotary module that computes its own positions (what
    :func:`model_grid_axial` reads), or ``None``."""
    cls = own_position_class(config)
    return None if cls is None else _own_table(cls(copy.deepcopy(config)), config)


def _grids(tokens: int) -> list[tuple[int, str | None]]:
    """``(side, class token place)`` of the square grids ``tokens`` can be: with one class token, or none."""
    found = []
    for place, patches in [*((place, tokens - 1) for place in CLS_PLACES), (None, tokens)]:
        side = int(round(patches**0.5)) if patches > 0 else 0
        if side and side * side == patches:
            found.append((side, place))
    return found


def model_grid_axial(config: Any) -> AxialSettings | None:
    """The :class:`AxialSettings` of a rotary module that computes its own positions (its forward takes none and
    returns one complex table whatever pixels it gets: Llama 4's vision tower), with the coordinates it rotates its
    tokens at: a square grid of patches at ``(row + offset, column + offset)``, row-major, a class token at ``(0, 0)``
    before or after them (:meth:`AxialSettings.positions`). Read from the table itself: the two axes, their order and
    the offset and class-token place whose :class:`~posembed.schemes.axial_rope.AxialRotary` sines are the table's;
    ``None``: no such module, or a table no grid gives (EfficientLoFTR's feature map, EoMT-DINOv3's pixel centres)."""
    from posembed.schemes.axial_rope import AxialRotary

    try:
        table = own_grid_table(config)
        base = float((getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
    except Exception as error:  # noqa: BLE001 - a module that cannot be built or called is not read
        logger.debug("the rotary module of %s cannot be read at its own grid: %s", type(config).__name__, error)
        return None
    rotation = None if table is None or table.shape[-1] % 2 else model_rotation(config)
    if rotation is None:
        return None
    sin, pairs = table.imag.float(), table.shape[-1]  # (T, P): two axes of P / 2 frequencies each
    for (side, place), offset in itertools.product(_grids(table.shape[0]), (0, 1)):
        coords = patch_grid_positions(side, side, offset=offset, cls_token=place)
        for order, frequencies in itertools.product(itertools.permutations(range(2)), ("blocks", "interleaved")):
            ours = AxialRotary(2 * pairs, num_axes=2, axis_dim=pairs, base=base, angles="fp32",
                               axis_order=order, frequency_order=frequencies)  # fmt: skip
            if torch.allclose(ours.cos_sin(coords)[1], sin, rtol=0, atol=1e-6):
                return AxialSettings(2, pairs, rotation[0], order, frequencies, "head", 2 * pairs, (side, side), offset, place)
    logger.debug("the table of %s's rotary module is no grid's AxialRotary", type(config).__name__)
    return None
