"""A vision tower's axial (2-D / 3-D) RoPE, read from the model's own module: :func:`model_axial`.

transformers' vision towers with ``rope_type == "axial"`` (Qwen2-VL's and ~25 more) give each coordinate axis
``axis_dim / 2`` shared frequencies and place the axes' pairs their own way (NeoX halves, adjacent pairs, one axis
after the other, width first, round robin, three axes). Rather than a table of classes, the reader gives the module
``A + 1`` tokens (token ``a`` at 1 on axis ``a``, the last at the origin) and keeps the
:class:`~posembed.schemes.rotary.axial.AxialRotary` settings whose sines are the ones it returns.
"""

from __future__ import annotations

import copy
import itertools
import logging
from typing import Any, NamedTuple

import torch

from posembed.interop.rope.model import (
    REFUSED,
    config_value,
    model_rotary_class,
    model_rotation,
    own_position_class,
    rotary_classes,
)
from posembed.schemes.positions import CLS_PLACES, patch_grid_positions

__all__ = [
    "AxialSettings",
    "axial_class",
    "model_axial_class",
    "model_axial",
    "model_grid_axial",
    "own_grid_table",
    "pair_form",
]

logger = logging.getLogger(__name__)


class AxialSettings(NamedTuple):
    """:class:`~posembed.schemes.rotary.axial.AxialRotary`'s arguments that a vision tower's module decides."""

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
        """``(T, 2)`` ``(row, column)`` coordinates its module rotates its tokens at (``None``: the caller's)."""
        if self.grid is None:
            return None
        return patch_grid_positions(*self.grid, offset=self.grid_offset, cls_token=self.cls_token, device=device)


def _sines(embedding: Any, coords: torch.Tensor, width: int) -> torch.Tensor | None:
    """``(N, width)`` sines of the module at coordinates ``(N, A)``, in the first position form its forward takes."""
    for form in (coords.T, coords, coords[None], coords.T[:, None]):
        try:
            with torch.no_grad():
                out = embedding(torch.zeros(1, coords.shape[0], 8), form)
        except REFUSED:  # the wrong form: the next one
            continue
        sin = (out.imag if isinstance(out, torch.Tensor) else out[1]).float()
        while sin.dim() > 2 and sin.shape[0] == 1:
            sin = sin[0]
        if sin.dim() == 2 and sin.shape == (coords.shape[0], width):
            return sin
    return None


def pair_form(sin: torch.Tensor, axis_dim: int) -> tuple[torch.Tensor, str, str] | None:
    """``(sines per pair (N, P), layout, layout_span)`` of sines ``(N, 2P)`` holding each pair twice: as halves
    (``"half"``, ``"head"``), side by side (``"interleaved"``), or halves per axis block (``"half"``, ``"axis"``)."""
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


def model_axial_class(config: Any) -> type | None:
    """The rotary class of the config's tower with ``compute_axial_rope_parameters``, else its rotary class
    (:func:`~posembed.interop.rope.model.model_rotary_class`); ``None``: neither."""
    try:
        found = rotary_classes(type(config), "compute_axial_rope_parameters")
    except ImportError:  # a config class without a modeling module
        return None
    return found[0] if found else model_rotary_class(config)


def axial_class(config: Any) -> type:
    """:func:`model_axial_class`; ``LookupError``: none."""
    found = model_axial_class(config)
    if found is None:
        raise LookupError(
            f"{type(config).__name__}'s modeling module has no RotaryEmbedding with "
            f"compute_axial_rope_parameters or compute_default_rope_parameters"
        )
    return found


def _head_widths(config: Any) -> list[int]:
    """The head widths a vision config may mean: ``head_dim``, ``embed_dim`` or ``hidden_size`` over the heads."""
    heads = config_value(config, "num_attention_heads") or config_value(config, "num_heads")
    found = [config_value(config, "head_dim")]
    found += [
        int(w) // int(heads)
        for w in (config_value(config, "embed_dim"), config_value(config, "hidden_size"))
        if w and heads
    ]
    return [int(w) for w in found if isinstance(w, int) and w > 0]


def _head_of(widths: list[int], axes: int, axis_dim: int) -> int | None:
    """The first width whose ``axes`` axes are ``axis_dim`` wide (``(head // axes)`` rounded down to even)."""
    return next((w for w in widths if (w // axes) // 2 * 2 == axis_dim), None)


def _placement(
    axes: int, axis_dim: int, base: float, coords: torch.Tensor, sin: torch.Tensor, blocks: bool = False
) -> tuple[tuple[int, ...], str] | None:
    """``(axis_order, frequency_order)`` of the :class:`~posembed.schemes.rotary.axial.AxialRotary` whose sines at
    ``coords`` are ``sin`` (``blocks``: frequencies in blocks only), or ``None``."""
    from posembed.schemes.rotary.axial import AxialRotary

    for order, frequencies in itertools.product(
        itertools.permutations(range(axes)), ("blocks",) if blocks else ("blocks", "interleaved")
    ):
        ours = AxialRotary(axes * axis_dim, num_axes=axes, axis_dim=axis_dim, base=base, angles="fp32",
                           axis_order=order, frequency_order=frequencies)  # fmt: skip
        if torch.allclose(ours.cos_sin(coords)[1], sin, rtol=0, atol=1e-6):
            return order, frequencies
    return None


def model_axial(config: Any) -> AxialSettings | None:
    """The :class:`AxialSettings` of the config's axial rotary module (``rope_type == "axial"``), read from what it
    computes (Pixtral's even / odd frequencies: ``scheme="rope_pixtral"``); ``None``: not axial, or unknown."""
    params = getattr(config, "rope_parameters", None) or {}
    if not isinstance(params, dict) or params.get("rope_type") != "axial":
        return None
    cls = model_axial_class(config)
    if cls is None:  # no axial rotary class to read
        return None
    try:
        embedding = cls(copy.deepcopy(config))
        axis_dim = 2 * embedding.inv_freq.numel()
        base = float(params.get("rope_theta", 10000.0))
    except REFUSED as error:  # a module that cannot be built is read without axial settings
        logger.debug("the axial rotary module of %s cannot be built: %s", type(config).__name__, error)
        return None
    widths = _head_widths(
        config
    )  # the axes the module splits its head into: axis_dim = (head_dim // A) rounded to even
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
        found = _placement(axes, axis_dim, base, coords, pairs, blocks=span == "axis")
        if found is not None:
            return AxialSettings(
                axes, axis_dim, layout, *found, span, _head_of(widths, axes, axis_dim) or axes * axis_dim
            )
    pixtral = _pixtral(embedding, next((w for w in widths if w == 2 * embedding.inv_freq.numel()), None), base)
    if pixtral is None:
        logger.debug("the axial rotary module of %s places its pairs as no AxialRotary does", type(config).__name__)
    return pixtral


def _pixtral(embedding: Any, head: int | None, base: float) -> AxialSettings | None:
    """Pixtral's placement (:class:`~posembed.schemes.rotary.pixtral.PixtralRotary`), if the module's sines are its."""
    from posembed.schemes.rotary.pixtral import PixtralRotary

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
    """The ``(T, P)`` complex table a module returns whatever pixels it gets (a grid fixed by its config), or
    ``None``."""
    size, channels = int(config_value(config, "image_size")), int(config_value(config, "num_channels", 3) or 3)
    with torch.no_grad():
        out, other = (embedding(torch.zeros(1, channels, s, s)) for s in (size, size // 2))
    if not isinstance(out, torch.Tensor) or not out.is_complex() or not torch.equal(out, other):
        return None
    return out.reshape(-1, out.shape[-1])  # Llama 4's (T, 1, P)


def own_grid_table(config: Any) -> torch.Tensor | None:
    """The ``(T, P)`` complex table of the config's rotary module that computes its own positions, or ``None``."""
    cls = own_position_class(type(config))
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
    """The :class:`AxialSettings` of a rotary module that computes its own positions (one complex table whatever
    pixels it gets: Llama 4's vision tower), with the square patch grid it rotates at (:meth:`AxialSettings.positions`:
    an offset, a class token first or last), read from the table; ``None``: no such module, or no grid's table."""
    try:
        table = own_grid_table(config)
        base = float((getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
    except REFUSED as error:  # a module that cannot be built or called is not read
        logger.debug("the rotary module of %s cannot be read at its own grid: %s", type(config).__name__, error)
        return None
    if table is None or table.shape[-1] % 2:
        return None
    rotation = model_rotation(config)
    if rotation is None:
        return None
    sin, pairs = table.imag.float(), table.shape[-1]  # (T, P): two axes of P / 2 frequencies each
    for (side, place), offset in itertools.product(_grids(table.shape[0]), (0, 1)):
        found = _placement(2, pairs, base, patch_grid_positions(side, side, offset=offset, cls_token=place), sin)
        if found is not None:
            return AxialSettings(2, pairs, rotation[0], *found, "head", 2 * pairs, (side, side), offset, place)
    logger.debug("the table of %s's rotary module is no grid's AxialRotary", type(config).__name__)
    return None
