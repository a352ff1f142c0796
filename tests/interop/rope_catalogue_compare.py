"""Compare one catalogue pair with posembed: transformers' module and rotation against posembed's scheme.

For a :class:`~tests.interop.rope_catalogue.Pair` and a variant (``default``, ``linear``, ``dynamic``,
``yarn``, ``llama3``, ``longrope``, ``partial``, ``mrope3``, ``top-level``) :func:`verdict` builds the
model type's default config, edits the sub-config's ``rope_parameters`` for the variant (with the fields a
scaled type's forward may read: :data:`FORWARD_FIELDS`), builds that sub-config again through its class as a
``config.json`` is loaded (so the class's renames and checks run), builds the rotary class from it as its model
does (``Cls(config)``; M-RoPE sections its model cannot rotate the config's head with get the head they fill:
:func:`fitted`), and for each layer type it builds:

- cos/sin: the module's forward at text positions ``(1, T)`` (``0..47`` and 16 positions up to twice the
  length the model was trained to), M-RoPE positions ``(3, 1, T)`` (``mrope3``, and every scaled variant of an
  M-RoPE module), axial coordinates (``rope_type == "axial"``: rows ``(h, w[, t])`` in the form its forward reads), or,
  for a module that computes its own positions, its forward as its model calls it (Llama 4's vision tower: one image's
  pixels) at the coordinates posembed says it rotates at (:mod:`tests.interop.rope_catalogue_grid`), against
  ``rotary_from_hf_config(config, angles="fp32").cos_sin``, compared as the sorted values of each
  position (the layout is left to the next check), within :data:`~tests.interop.rope_catalogue_rotation.COS_TOL`;
- q·kᵀ: random q and k rotated by the module's own rotation function (the one its attention calls)
  against posembed's ``scheme(q, k, position_ids=...)``, within :data:`QK_TOL` of the largest score.

A variant the config class or the module does not take (its init fails, or it builds the default
frequencies) is not applicable (:func:`verdict` returns ``None``); so is one where the model's own rotation cannot
rotate a head of the model's width with the module's cos/sin (its forward fails there: no reference). The
``top-level`` variant reads the root config for the pair whose sub-config is the language model's
(:func:`language_model_path`). Verdicts: :data:`VERDICTS`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re

import torch

from tests.interop.rope_catalogue import Pair
from tests.interop.rope_catalogue_grid import OwnPositions, own_grid_call
from tests.interop.rope_catalogue_rotation import (
    axial_call,
    cos_first,
    model_head_dim,
    scores,
    sliced_width,
    their_cos_sin,
    their_rotation,
    values_match,
)

EXACT, LAYOUT, VALUES, REFUSED, NO_REFERENCE = "exact", "layout wrong", "values wrong", "refused", "no reference"
#: every verdict, best first (a pair's verdict over its layer types is the worst one)
VERDICTS = (EXACT, LAYOUT, VALUES, REFUSED, NO_REFERENCE)
#: the q·k target, relative to the largest score (cos/sin: :data:`~tests.interop.rope_catalogue_rotation.COS_TOL`)
QK_TOL = 1e-5
SCALED = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    "longrope": {"rope_type": "longrope"},
    "partial": {"partial_rotary_factor": 0.5},
}
VARIANTS = ("default", *SCALED, "mrope3", "top-level")
#: fields a scaled type's forward may read beside its init's (PhiMoE folds these into cos / sin instead of the
#: attention factor); every scaled variant states them, and the classes that do not read them ignore them
FORWARD_FIELDS = {"short_mscale": 1.25, "long_mscale": 1.5}
_HEADS = 3


def sub_config(root, path: str):
    for part in filter(None, path.split(".")):
        root = getattr(root, part)
    return root


def _edit(params: dict, variant: str, freqs: int, length: int) -> dict:
    fields = dict(SCALED[variant]) if variant == "partial" else {**SCALED[variant], **FORWARD_FIELDS}
    if variant in ("yarn", "llama3", "longrope"):
        fields["original_max_position_embeddings"] = max(length // 4, 8)
    if variant == "longrope":
        fields["short_factor"] = [1.0 + 0.01 * i for i in range(freqs)]
        fields["long_factor"] = [1.0 + 0.25 * i for i in range(freqs)]
    if variant == "partial":
        return {**params, **fields}
    keep = {k: v for k, v in params.items() if k in ("rope_theta", "partial_rotary_factor", "mrope_section",
                                                      "mrope_interleaved")}  # fmt: skip
    return {**keep, **fields}


def _length(config) -> int:
    return int(getattr(config, "max_position_embeddings", None) or 4096)


def build_config(pair: Pair, variant: str, freqs: int):
    """``(root config, the sub-config its model passes)`` for the variant; ``None`` if it has no rope parameters."""
    from transformers import CONFIG_MAPPING

    root = CONFIG_MAPPING[pair.model_type]()
    sub = sub_config(root, pair.config_path)
    if variant not in SCALED:
        return root, sub
    params = getattr(sub, "rope_parameters", None)
    if not params:
        return None
    length = _length(sub)
    nested = all(isinstance(v, dict) or v is None for v in params.values())
    if nested:
        sub.rope_parameters = {k: None if v is None else _edit(v, variant, freqs, length) for k, v in params.items()}
    else:
        sub.rope_parameters = _edit(params, variant, freqs, length)
    if variant == "longrope":
        sub.max_position_embeddings = length
    return _reloaded(root, pair.config_path, sub)


def _reloaded(root, path: str, sub):
    """``(root, sub)`` with the edited sub-config built again by its class from its dict, as a ``config.json`` is
    loaded (the class's own renames and checks run: Phi-3 reads ``yarn`` as ``longrope``), put back in place."""
    fresh = type(sub).from_dict(sub.to_dict())
    if not path:
        return fresh, fresh
    *parents, last = path.split(".")
    setattr(sub_config(root, ".".join(parents)), last, fresh)
    return root, fresh


def rotary_module(pair: Pair, config):
    module = importlib.import_module(f"transformers.models.{pair.module}.modeling_{pair.module}")
    return module, getattr(module, pair.rotary_class)(config)


def layer_types(rotary) -> list[str | None]:
    """The layer types the module built frequencies for (``[None]``: one set for every layer)."""
    if "layer_type" not in inspect.signature(rotary.forward).parameters:
        return [None]
    kinds = [k for k in (getattr(rotary, "layer_types", None) or []) if hasattr(rotary, f"{k}_inv_freq")]
    return kinds or [None]


def frequencies(rotary, layer: str | None) -> torch.Tensor | None:
    return getattr(rotary, "inv_freq" if layer is None else f"{layer}_inv_freq", None)


def is_axial(rotary) -> bool:
    return getattr(rotary, "rope_type", None) == "axial"


def text_positions(length: int, variant: str, rows: int = 0) -> torch.Tensor:
    """``(1, T)`` positions (``(rows, 1, T)`` with rows): 0..47 and 16 up to twice ``length``."""
    gen = torch.Generator().manual_seed(0)
    far = torch.randint(48, max(2 * length, 64), (16,), generator=gen).sort().values
    positions = torch.cat([torch.arange(48), far])[None]
    if rows:
        positions = torch.stack([positions + torch.randint(0, 9, (1, 64), generator=gen) * r for r in range(rows)])
    return positions


def reason(error: Exception) -> str:
    """The error's first line (a ``KeyError``'s bare key named as one: ``KeyError: 'full_attention'``)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if isinstance(error, KeyError):
        text = f"KeyError: {text}"
    return re.sub(r"\s+", " ", text)[:200]


def is_mrope(rotary, config) -> bool:
    params = getattr(config, "rope_parameters", None) or {}
    return hasattr(rotary, "mrope_section") or "mrope_section" in params


def _rope_types(rotary) -> set:
    kinds = getattr(rotary, "rope_type", None)
    return set(kinds.values()) if isinstance(kinds, dict) else {kinds}


def accepted(base, rotary, variant: str, default_width: int | None = None) -> bool:
    """Whether the module built the variant (not the default frequencies again); ``default_width``: the number of
    frequencies of the config class's own defaults (the base's head may be :func:`fitted`)."""
    layer = layer_types(base)[0]
    before, after = frequencies(base, layer), frequencies(rotary, layer)
    if variant == "partial":
        width = default_width if default_width is not None else None if before is None else before.numel()
        return width is not None and after is not None and after.numel() != width
    return SCALED[variant]["rope_type"] in _rope_types(rotary)


def _runs(pair: Pair, module, rotary, sub) -> bool:
    """Whether the model's own rotation rotates a head of the config's width with the module's cos / sin."""
    try:
        positions = torch.arange(4)[None].expand(3, 1, 4)
        out, q = cos_first(rotary(torch.zeros(1, 4, 8), positions)), torch.randn(1, 4, model_head_dim(sub))
        their_rotation(
            getattr(module, pair.apply or ""), q, q, out, positions, sliced_width(sub, their_cos_sin(out)[0], out)
        )
    except Exception:  # noqa: BLE001 - its forward or its rotation fails on this head
        return False
    return True


def fitted(pair: Pair, sub):
    """``(modeling module, rotary module)`` of ``sub``; where the module's M-RoPE sections do not fit the config's head
    (the model's own forward or rotation fails on it), ``sub`` is first given the head the sections fill:
    ``2 * sum(sections) / partial_rotary_factor``, as the checkpoints state it. GLM-4.1V's and GLM-4.5V's config
    classes default to heads (128 at full width, 42 at half) whose frequencies the module's default sections
    ``[8, 12, 12]`` cannot split; Qwen3-Omni's thinker to a 73-channel head (``[24, 20, 20]``: 128)."""
    module, rotary = rotary_module(pair, sub)
    sections = getattr(rotary, "mrope_section", None)
    if not isinstance(sections, (list, tuple)) or model_head_dim(sub) is None or _runs(pair, module, rotary, sub):
        return module, rotary
    factor = (getattr(sub, "rope_parameters", None) or {}).get("partial_rotary_factor", 1.0)
    head = 2 * sum(sections) / factor
    if head != int(head):
        return module, rotary
    sub.head_dim = int(head)
    return rotary_module(pair, sub)


@functools.cache
def default_reference(pair: Pair):
    """``(modeling module, root config, sub-config, rotary module)`` of the default config (built once per pair)."""
    root, sub = build_config(pair, "default", 0)
    module, rotary = fitted(pair, sub)
    return module, root, sub, rotary


@functools.cache
def _default_width(pair: Pair) -> int | None:
    """The number of frequencies the module builds from the config class's defaults, before :func:`fitted`."""
    first = frequencies(rotary_module(pair, build_config(pair, "default", 0)[1])[1], None)
    return None if first is None else first.numel()


def _variant_reference(pair: Pair, variant: str, base):
    """``(root config, sub-config, rotary module)`` of a scaled variant; raises when the class cannot build it."""
    first = frequencies(base, layer_types(base)[0])
    built = build_config(pair, variant, 0 if first is None else first.numel())
    if built is None:
        raise LookupError("no rope parameters")
    root, sub = built
    return (
        root,
        sub,
        (rotary_module if variant == "partial" else fitted)(pair, sub)[1],
    )  # partial: as the class reads it


def language_model_path(root) -> str | None:
    """The path of the ``text_config`` a top-level config's reader takes for the language model: its own, else the
    first sub-config's that holds one (Qwen3-Omni's thinker, not its talker); ``None``: none."""
    from transformers import PreTrainedConfig

    if isinstance(getattr(root, "text_config", None), PreTrainedConfig):
        return "text_config"
    for name, value in root.to_dict().items():
        if isinstance(value, dict) and isinstance(value.get("text_config"), dict):
            return f"{name}.text_config"
    return None


def applicable(pair: Pair, variant: str, base, sub, root=None) -> bool:
    if variant == "mrope3":
        return is_mrope(base, sub)
    if variant == "top-level":
        return root is not None and pair.config_path == language_model_path(root)
    return variant == "default" or not is_axial(base)


def verdict(pair: Pair, variant: str) -> tuple[str, str] | None:
    """``(verdict, reason)`` of the pair under ``variant`` (the worst over its layer types); ``None``: not
    applicable."""
    torch.manual_seed(0)
    try:
        module, root, sub, base = default_reference(pair)
    except Exception as error:  # noqa: BLE001 - transformers' own init failed
        return (NO_REFERENCE, f"transformers: {reason(error)}") if variant == "default" else None
    if not applicable(pair, variant, base, sub, root):
        return None
    rotary = base
    if variant in SCALED:
        try:
            root, sub, rotary = _variant_reference(pair, variant, base)
        except Exception:  # noqa: BLE001 - the class does not take the variant
            return None
        if not accepted(base, rotary, variant, _default_width(pair) if layer_types(base) == [None] else None):
            return None
    results = [compare_layer(pair, module, root, sub, rotary, variant, layer) for layer in layer_types(rotary)]
    worst = max(results, key=lambda r: VERDICTS.index(r[0]))
    return None if worst[0] == NO_REFERENCE and variant != "default" else worst


def run(pairs, variants=VARIANTS) -> list[tuple[str, str, str, str]]:
    """``(pair key, variant, verdict, reason)`` of every applicable variant of every pair, transformers' logs quiet."""
    import logging
    import warnings

    from transformers.utils import logging as hf_logging

    rows = []
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            for pair in pairs:
                for variant in variants:
                    result = verdict(pair, variant)
                    if result is not None:
                        rows.append((pair.key, variant, *result))
    finally:
        logging.disable(logging.NOTSET)
        hf_logging.set_verbosity(level)
    return rows


def _no_reference(config, layer: str | None, error: Exception) -> tuple[str, str]:
    """No reference; where the module computes its own positions and posembed refuses the (default) config, the
    refusal and its one-line reason (a family posembed does not model, rather than one it reads without a check)."""
    from posembed.interop.rope.config import rotary_from_hf_config

    if isinstance(error, OwnPositions) and config is not None:
        try:
            rotary_from_hf_config(config, layer_type=layer, angles="fp32")
        except Exception as refusal:  # noqa: BLE001 - posembed's reason
            return REFUSED, reason(refusal)
    return NO_REFERENCE, f"transformers: {reason(error)}"


def _their_call(rotary, variant: str, layer: str | None, sub):
    """``(module output, positions given, our positions)``."""
    names = list(inspect.signature(rotary.forward).parameters)
    if "position_ids" not in names:
        return own_grid_call(rotary, sub, names)
    if is_axial(rotary):
        out, form, coords = axial_call(rotary)
        return out, form, coords
    rows = 3 if variant == "mrope3" or (variant in SCALED and is_mrope(rotary, sub)) else 0  # scaled M-RoPE too
    positions = text_positions(_length(sub), variant, rows)
    extra = () if layer is None else (layer,)
    try:
        out = rotary(torch.zeros(1, positions.shape[-1], 8), positions, *extra)
    except IndexError:  # a table of max_position_embeddings rows (GPT-J, CodeGen): the positions it holds
        positions = positions.clamp_max(_length(sub) - 1)
        out = rotary(torch.zeros(1, positions.shape[-1], 8), positions, *extra)
    ours = positions.permute(1, 2, 0) if rows else positions
    return cos_first(out), positions, ours


def _unless_unrunnable(fn, out, positions, sub, verdict: str, why: str) -> tuple[str, str]:
    """``(verdict, why)``, or no reference when the model's own rotation cannot rotate a head of its own width with
    its own cos / sin (Qwen3-Omni's default head_dim 73 against cos / sin 74 wide; GPT-OSS's whole-head halves
    against a partial rotary's narrower cos / sin): transformers' model fails there too."""
    head, cos = model_head_dim(sub), their_cos_sin(out)[0]
    if head is None:
        return verdict, why
    q = torch.randn(_HEADS, cos.shape[0], head)
    try:
        their_rotation(fn, q, q, out, positions, sliced_width(sub, cos, out))
    except ValueError:
        return (
            NO_REFERENCE,
            f"transformers: its {fn.__name__} cannot rotate its {head}-channel heads with cos/sin {cos.shape[-1]} wide",
        )
    return verdict, why


def compare_layer(
    pair: Pair, module, root, sub, rotary, variant: str, layer: str | None, source=None
) -> tuple[str, str]:
    """``(verdict, why)`` of one layer type. ``source``: what posembed reads (a published ``config.json``'s path or
    dict, :mod:`tests.interop.test_published_configs`); default the root (``top-level``) or the sub-config."""
    from posembed.interop.rope.config import rotary_from_hf_config
    from posembed.schemes.rotary.axial import SectionedRotary

    try:
        out, positions, ours_at = _their_call(rotary, variant, layer, sub)
        cos, sin = their_cos_sin(out)
        name = pair.apply
        if pair.interleave_switch and getattr(sub, "rope_interleave", False):
            name = "apply_rotary_pos_emb_interleave"
        fn = getattr(module, name or "", None)
        if fn is None:
            raise LookupError("no rotation function found")
    except Exception as error:  # noqa: BLE001 - no reference to compare with
        return _no_reference(sub if variant == "default" else None, layer, error)
    try:
        read = source if source is not None else root if variant == "top-level" else sub
        scheme = rotary_from_hf_config(read, layer_type=layer, angles="fp32")
    except Exception as error:  # noqa: BLE001 - posembed refused, with its reason
        return _unless_unrunnable(fn, out, positions, sub, REFUSED, reason(error))
    axes = getattr(scheme, "num_axes", 0)
    if is_axial(rotary) and axes > 1 and ours_at.shape[-1] != axes:  # a module that reads any number of axes
        try:
            out, positions, ours_at = axial_call(rotary, axes)
        except ValueError as error:
            return VALUES, f"axes: {reason(error)}"
        cos, sin = their_cos_sin(out)
    if (
        ours_at.dim() == 3
        and ours_at.shape[-1] == 3
        and not (isinstance(scheme, SectionedRotary) and scheme.num_axes == 3)
    ):
        return VALUES, f"posembed builds {type(scheme).__name__}, not 3-axis M-RoPE"
    try:
        at = ours_at  # text positions on a sectioned scheme: every axis at the position, as transformers' expand
        if isinstance(scheme, SectionedRotary) and at.shape[-1] != scheme.num_axes:
            at = at[..., None].expand(*at.shape, scheme.num_axes)
        our_cos, our_sin = scheme.cos_sin(at)
        values = values_match(cos, our_cos) and values_match(sin, our_sin)
        width = sliced_width(sub, cos, out)
        q, k = (torch.randn(_HEADS, cos.shape[0], scheme.head_dim) for _ in range(2))
        tq, tk = their_rotation(fn, q, k, out, positions, width)
        oq, ok = scheme(q[None], k[None], position_ids=ours_at)
    except Exception as error:  # noqa: BLE001 - shapes that cannot meet: the width is wrong, or the model's own
        return _unless_unrunnable(fn, out, positions, sub, VALUES, f"width: {reason(error)}")
    theirs = scores(tq, tk)
    error = float((scores(oq[0], ok[0]) - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30))
    if values and error <= QK_TOL:
        return EXACT, ""
    if values:
        return LAYOUT, f"cos/sin equal, q·k off by {error:.2g} ({scheme.layout!r} layout)"
    return VALUES, f"cos/sin differ (ours {tuple(our_cos.shape)}, theirs {tuple(cos.shape)}), q·k off by {error:.2g}"
