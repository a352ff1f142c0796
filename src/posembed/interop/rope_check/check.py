"""Check a transformers config's RoPE: per-pair wavelengths, scaling, switch points, traps.

:func:`check_rope_config` builds posembed's scheme of each layer type's
:class:`~posembed.interop.rope.settings.RopeSettings` (as ``rotary_from_hf_config`` does) and reports, per frequency
pair, the wavelength ``2 pi / inv_freq`` against the trained context and what the scaling does to it, the attention
factor, where dynamic NTK and LongRoPE switch, and the lengths side by side (configured, trained, scaled; the
effective context only where the config's numbers agree on one); with transformers, posembed's ``inv_freq`` and
attention factor beside its rope init functions' (or, where the model's rotary ``forward`` does something else, PhiMoE,
beside the cos / sin it gives), and the traps (:mod:`posembed.interop.rope_check.traps`).

Example:
    >>> report = check_rope_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    ...     "max_position_embeddings": 4096, "rope_theta": 10000.0,
    ...     "rope_scaling": {"rope_type": "linear", "factor": 4.0}}, compare=False)
    >>> layer = report.layers[0]  # linear reads no trained length: the configured one is the effective context
    >>> layer.configured_length, layer.trained_context, layer.effective_context, layer.pairs[-1].treatment
    (4096, None, 4096, 'interpolate')
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch import Tensor

from posembed.interop.rope.config import rotary_from_settings
from posembed.interop.rope.model import build_config, model_part, rotary_class, rotary_classes
from posembed.interop.rope.settings import ALL_LAYERS, RopeSettings, load_config_dict, read_rope_settings
from posembed.interop.rope_check.numbers import read_numbers
from posembed.interop.rope_check.stated import Stated, stated_of
from posembed.interop.rope_check.traps import MSCALE_FORWARD, Trap, find_traps, refused_traps
from posembed.schemes.rotary.rope import RotaryEmbedding, rope_inv_freq
from posembed.schemes.rotary.scaling import pair_treatment

__all__ = ["check_rope_config", "RopeReport", "LayerReport", "PairRow", "Comparison", "format_report", "report_json"]

logger = logging.getLogger(__name__)

#: relative tolerance of the comparison with transformers (fp32 frequencies)
RTOL = 1e-5
#: what the comparison is made against, unless said otherwise
_INIT_NOTE = "compared with transformers' rope init functions"
#: what the config wrote (:class:`Stated`), each placed in the JSON report's settings after the setting it is about
_BESIDE = {"theta": "theta_given", "head_dim": "head_dim_given", "original_max_len": "original_given",
           "params": "original_source", "latent": "theta_field"}  # fmt: skip


@dataclass(frozen=True)
class PairRow:
    """One frequency pair: its channels, wavelengths (positions per turn) and treatment."""

    index: int
    channels: tuple[int, int]
    wavelength: float
    scaled_wavelength: float
    ratio: float
    treatment: str


@dataclass(frozen=True)
class Comparison:
    """posembed against transformers' rope init function at one sequence length."""

    seq_len: int | None
    max_inv_freq_rel_diff: float
    attention_factor: float
    transformers_attention_factor: float

    @property
    def equal(self) -> bool:
        close = math.isclose(self.attention_factor, self.transformers_attention_factor, rel_tol=RTOL)
        return self.max_inv_freq_rel_diff <= RTOL and close


@dataclass(frozen=True)
class LayerReport:
    """What one layer type's RoPE does; ``scheme`` is ``None`` when it could not be built.

    The lengths side by side (:func:`_lengths`): ``configured_length`` (``max_position_embeddings``),
    ``trained_context`` (the pre-training length: ``original_max_position_embeddings`` or what transformers takes for
    it; ``None`` where the config states none and the rope type reads none), ``scaled_context`` (factor x trained,
    where the scaling stretches to a length) and ``scaling`` (what it does, in words). ``effective_context`` is the
    configured length only where the config's numbers agree on it (``None`` where the scaling reaches another length,
    a ``context_lengths`` warning, or where dynamic NTK grows with the sequence)."""

    settings: RopeSettings
    scheme: str | None
    attention_factor: float | None
    trained_context: int | None
    effective_context: int | None
    switch_at: int | None
    pairs: tuple[PairRow, ...]
    comparisons: tuple[Comparison, ...]
    comparison_note: str
    stated: Stated  # what the config writes (in the JSON report, among the settings)
    configured_length: int | None = None  # max_position_embeddings: the length the model is configured for
    trained_source: str = ""  # where the trained length comes from, in words
    scaled_context: int | None = None  # the length the scaling stretches the trained one to (factor x trained)
    scaling: str = "none"  # what the scaling does between the trained and the configured length, in words


@dataclass(frozen=True)
class RopeReport:
    """The whole check: where the config came from, its spelling, per-layer reports, the traps."""

    source: str
    model_type: str | None
    spelling: str
    target_length: int | None
    layers: tuple[LayerReport, ...]
    traps: tuple[Trap, ...]

    @property
    def ok(self) -> bool:
        """No error or warning trap, and posembed equal to transformers wherever compared."""
        clean = all(trap.severity == "note" for trap in self.traps)
        return clean and all(c.equal for layer in self.layers for c in layer.comparisons)


def _frequencies(scheme: RotaryEmbedding, length: int) -> tuple[Tensor, float]:
    """``(inv_freq, attention factor)`` the scheme uses for a call of ``length`` positions."""
    scheme = getattr(scheme, "dealt", None) or scheme  # a scaled M-RoPE: the scaled type's, dealt to its sections
    if not getattr(scheme, "dynamic", False):
        return scheme.inv_freq, float(getattr(scheme, "attention_scaling", 1.0))
    cos, sin = scheme.cos_sin(torch.tensor([1, max(length, 2) - 1]))
    cos, sin = cos[0].double(), sin[0].double()
    return torch.atan2(sin, cos).float(), float(torch.hypot(cos, sin).mean())


def _pairs(s: RopeSettings, scheme: RotaryEmbedding, inv_freq: Tensor) -> tuple[PairRow, ...]:
    """One row per pair of ``scheme``, whose ``inv_freq`` at the target length (:func:`_frequencies`) is given."""
    scaled = inv_freq.double()
    plain = (
        scaled if s.rope_type == "axial" else rope_inv_freq(scheme.rotary_dim, s.theta).double()
    )  # unscaled per axis
    rows, half = [], scheme.rotary_dim // 2
    for i, (p, q) in enumerate(zip(plain.tolist(), scaled.tolist())):
        ratio, channels = p / q if q else math.inf, (i, i + half) if scheme.layout == "half" else (2 * i, 2 * i + 1)
        rows.append(
            PairRow(
                i, channels, 2 * math.pi / p, 2 * math.pi / q if q else math.inf, ratio, pair_treatment(p, q, s.factor)
            )
        )
    return tuple(rows)


#: where the trained length comes from (:attr:`Stated.original_source`), in words
_TRAINED_FROM = {"parameters": "original_max_position_embeddings in the RoPE parameters",
                 "top level": "top-level original_max_position_embeddings",
                 "class default": "the default of transformers' config class",
                 "max_position_embeddings":
                     "max_position_embeddings: no original_max_position_embeddings is stated"}  # fmt: skip


@dataclass(frozen=True)
class _Lengths:
    configured: int | None
    trained: int | None
    trained_source: str
    scaled: int | None
    effective: int | None
    switch: int | None
    scaling: str


def _lengths(s: RopeSettings, w: Stated) -> _Lengths:
    """The configured, trained and scaled lengths of one layer type and what the scaling does between them."""
    configured, factor, kind = s.max_position_embeddings, s.factor, s.rope_type
    trained, source = s.original_max_len, _TRAINED_FROM.get(w.original_source, w.original_source)
    if kind == "linear" and not w.original_given:  # linear reads no length: the config names no trained one
        return _Lengths(
            configured,
            None,
            "not stated: linear scaling reads none",
            None,
            configured,
            None,
            f"linear x{factor:g}: every position divided by {factor:g} (every wavelength x{factor:g})",
        )
    if kind == "dynamic":
        scaled = int(configured * factor) if configured else None
        return _Lengths(configured, configured, "max_position_embeddings, dynamic NTK's switch point", scaled, None,
                        configured, f"dynamic NTK x{factor:g}: plain up to {configured}, theta grows with the sequence "
                        f"length beyond it (by {factor:g} at {scaled})")  # fmt: skip
    if kind == "longrope":
        return _Lengths(
            configured,
            trained,
            source,
            configured,
            configured,
            trained,
            f"LongRoPE: short_factor up to {trained}, long_factor beyond it, to {configured}",
        )
    if kind in ("linear", "yarn", "llama3") and trained:
        scaled = int(round(trained * factor))
        band = "a ramp between" if kind == "yarn" else "a smooth band between"
        what = (
            f"every position divided by {factor:g}"
            if kind == "linear"
            else f"long wavelengths interpolated, short ones kept, {band}"
        )
        effective = configured if scaled == configured or configured is None else None
        return _Lengths(
            configured,
            trained,
            source,
            scaled,
            effective,
            None,
            f"{kind} x{factor:g} ({what}): stretches the trained {trained} to {scaled}",
        )
    return _Lengths(configured, configured, "max_position_embeddings, no scaling", None, configured, None, "none")


def _length_traps(s: RopeSettings, w: Stated, n: _Lengths) -> list[Trap]:
    """A warning where the stated numbers disagree: the scaling stretches the stated trained length to a length
    other than ``max_position_embeddings`` (a note for llama3, whose band interpolation the factor does not bound)."""
    if (
        n.scaled is None
        or n.configured is None
        or n.scaled == n.configured
        or s.rope_type not in ("linear", "yarn", "llama3")
    ):
        return []
    if not (w.original_given or w.original_source == "class default"):
        return []  # no trained length stated: the original_* traps say so
    # llama3 interpolates only its longest wavelengths by the factor (Llama 3.1 is served at its 131072, 16x its
    # trained 8192, with factor 8): the numbers differ by design there, a note; linear and YaRN stretch by it, a warning
    severity = "note" if s.rope_type == "llama3" else "warning"
    return [Trap("context_lengths", severity, s.layer_type,
                 f"the numbers disagree: {s.rope_type} x{s.factor:g} stretches the trained {n.trained} to {n.scaled}, "
                 f"but max_position_embeddings is {n.configured}; the config states no effective context, so check "
                 f"the model card for the length it was evaluated at")]  # fmt: skip


def _transformers_frequencies(
    hf_config: Any, s: RopeSettings, seq_len: int | None, forward: bool
) -> tuple[Tensor, float]:
    """``(inv_freq, attention factor)`` of transformers' rope init function at ``seq_len``. ``forward``: the ones the
    model's rotary embedding ``forward`` applies to a sequence of ``seq_len`` (positions 1 and ``seq_len - 1``): the
    angle at position 1 and the length of (cos, sin). A module that rotates at its own patch grid (Llama 4's vision
    tower): the angles of its own table at the token its grid places at ``(1, 1)``, where every pair turns once."""
    layer = None if s.layer_type == ALL_LAYERS else s.layer_type
    config = copy.deepcopy(hf_config)  # the init functions standardise the config in place
    if forward:
        cos, sin = rotary_class(config)(config)(torch.zeros(1, 1, s.head_dim), torch.tensor([[1, max(seq_len, 2) - 1]]))
        cos, sin = cos[0, 0, : s.rotary_dim // 2].double(), sin[0, 0, : s.rotary_dim // 2].double()
        return torch.atan2(sin, cos).float(), float(torch.hypot(cos, sin).mean())
    if s.axial is not None and s.axial.grid is not None:
        from posembed.interop.rope.axial import own_grid_table

        row = own_grid_table(config)[int((s.axial.positions() == 1).all(-1).nonzero()[0])]
        return torch.angle(row).float(), float(row.abs().double().mean())
    if s.rope_type == "axial":  # a vision tower's own init: one set of frequencies every axis shares
        from posembed.interop.rope.axial import axial_class

        inv_freq, factor = axial_class(config).compute_axial_rope_parameters(config)
    elif s.rope_type == "default" and not rotary_classes(type(config)):  # GPT-J, CodeGen: a table, no init function
        return _table_frequencies(config, s)[:2]
    elif s.rope_type == "default":
        init = rotary_class(config).compute_default_rope_parameters
        inv_freq, factor = init(config, layer_type=layer) if layer else init(config)
    else:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        inv_freq, factor = ROPE_INIT_FUNCTIONS[s.rope_type](config, None, seq_len=seq_len, layer_type=layer)
    return inv_freq.float(), float(factor)


def _table_frequencies(config: Any, s: RopeSettings) -> tuple[Tensor, float, str]:
    """``(inv_freq, attention factor, class name)`` of a rotary embedding that holds a sin / cos table and has no rope
    init function (GPT-J's, CodeGen's): the angles its ``forward`` returns at position 1. Its forward returns
    ``(sin, cos)``; the sine is told from the cosine as the one that is zero at position 0. ``LookupError``: the model
    has no rotary embedding class."""
    found = rotary_classes(type(config), "forward")
    if not found:
        raise LookupError(f"{type(config).__name__}'s modeling module has no RotaryEmbedding class")
    out = found[0](config)(torch.zeros(1, 2, s.head_dim), torch.tensor([[0, 1]]))  # positions 0 and 1
    first, second = (part[0].double() for part in out)
    cos, sin = (second, first) if bool((first[0] == 0).all()) and not bool((second[0] == 0).all()) else (first, second)
    cos, sin = cos[1, : s.rotary_dim // 2], sin[1, : s.rotary_dim // 2]
    return torch.atan2(sin, cos).float(), float(torch.hypot(cos, sin).mean()), found[0].__name__


def _compare(
    raw: dict, given: Any, s: RopeSettings, scheme: RotaryEmbedding, length: int
) -> tuple[tuple[Comparison, ...], str]:
    try:  # the config object given, else the one transformers builds
        hf_config = given if given is not None and hasattr(given, "standardize_rope_params") else build_config(raw)
        if hf_config is None:  # no transformers (ModuleNotFoundError), or its error for a model type it does not know
            from transformers import AutoConfig

            AutoConfig.for_model(raw["model_type"])
    except ModuleNotFoundError:
        return (), "transformers is not installed: not compared"
    except Exception as error:  # noqa: BLE001 - a config transformers refuses (its strict type checks too) is reported
        first = (
            str(error).split(". ")[0].splitlines()[0] if str(error) else ""
        )  # its first sentence: not the list of every type
        return (), f"transformers cannot build this config ({type(error).__name__}: {first}): not compared"
    forward = (
        raw.get("model_type") in MSCALE_FORWARD and s.rope_type != "default"
    )  # the model ignores the init's choice
    switch = s.max_position_embeddings if s.rope_type == "dynamic" and not forward else s.original_max_len
    lengths = (
        [switch, max(length, switch + 1)] if (s.rope_type in ("dynamic", "longrope") or forward) and switch else [None]
    )
    comparisons = []
    for seq_len in lengths:
        try:
            theirs, their_factor = _transformers_frequencies(
                hf_config, s, (seq_len or length) if forward else seq_len, forward
            )
        except Exception as error:  # noqa: BLE001 - any failure inside transformers is reported, not raised
            where = "model's rotary embedding" if forward else "rope init"
            return tuple(comparisons), f"transformers' {where} failed ({type(error).__name__}: {error})"
        ours, our_factor = _frequencies(scheme, seq_len or length)
        if s.rope_type == "axial":  # the frequencies, each once, whichever axis and pair they turn
            ours, theirs = (t.unique().flip(0) for t in (ours, theirs))
        if theirs.shape != ours.shape:
            return tuple(comparisons), f"transformers gives {theirs.numel()} frequencies, posembed {ours.numel()}"
        rel = ((ours.double() - theirs.double()).abs() / theirs.double().abs().clamp_min(1e-30)).max()
        comparisons.append(Comparison(seq_len, float(rel), our_factor, their_factor))
    note = (
        f"compared with the cos / sin that transformers' {rotary_class(hf_config).__name__} applies"
        if forward
        else _INIT_NOTE
    )
    if not forward and s.rope_type == "default" and not rotary_classes(type(hf_config)):
        name = _table_frequencies(hf_config, s)[2]
        note = f"compared with the sin / cos table of transformers' {name} (it has no rope init function)"
    return tuple(comparisons), note


def _layer(
    raw: dict, given: Any, s: RopeSettings, w: Stated, length: int | None, compare: bool
) -> tuple[LayerReport, list[Trap]]:
    n = _lengths(s, w)
    trained, effective, switch = n.trained, n.effective, n.switch
    target = length or effective or n.scaled or n.configured or trained or 2
    extra = (n.configured, n.trained_source, n.scaled, n.scaling)
    try:
        scheme = rotary_from_settings(s, layout=s.layout)
    except (ValueError, TypeError) as error:
        trap = Trap("unbuildable", "error", s.layer_type, f"posembed cannot build this RoPE: {error}")
        return LayerReport(s, None, None, trained, effective, switch, (), (), "not built", w, *extra), [
            trap,
            *_length_traps(s, w, n),
        ]
    comparisons, note = _compare(raw, given, s, scheme, target) if compare else ((), "not compared")
    traps = _length_traps(s, w, n)
    if s.rope_type == "dynamic" and trained:  # dynamic NTK keeps the trained frequencies up to the trained length
        plain = RotaryEmbedding(s.head_dim, rotary_dim=scheme.rotary_dim, base=s.theta)
        if not torch.equal(*(rope.cos_sin(torch.arange(trained))[0] for rope in (scheme, plain))):
            traps.append(
                Trap(
                    "dynamic_below_trained",
                    "error",
                    s.layer_type,
                    "dynamic NTK changed frequencies below the trained length",
                )
            )
    inv_freq, attention = _frequencies(scheme, target)
    report = LayerReport(s, type(scheme).__name__, attention, trained, effective, switch, _pairs(s, scheme, inv_freq),
                         comparisons, note, w, *extra)  # fmt: skip
    return report, traps


def check_rope_config(
    config: Any, length: int | None = None, *, compare: bool = True, part: str = "text"
) -> RopeReport:
    """Check the RoPE of a transformers config.

    Args:
        config: a transformers config object, a ``config.json`` dict, a checkpoint folder or the path of its
            ``config.json``.
        length: the target context (default: the effective context where the config states one, else the length
            its scaling reaches, else ``max_position_embeddings``); the per-pair table of
            dynamic NTK / LongRoPE is computed at this length.
        compare: compare with transformers' rope init functions (when it is installed).
        part: the part of a multimodal config to check (``"text"``: its language model; ``"vision"``), as
            :func:`~posembed.interop.rope.model.model_part` finds it.

    Raises:
        ValueError: the config has no RoPE, or no head size; a file that is not UTF-8 JSON (naming the file); a
            numeric RoPE field no number can be read from (``"four"``; a readable string, ``"1e4"``, is an error trap
            instead); a folder with no ``config.json``.
        FileNotFoundError: a path that does not exist.
    """
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 2):
        raise ValueError(f"length must be an int >= 2 (a context length), got {length!r}")
    whole, given, source = load_config_dict(config)  # a file that is not UTF-8: read_config's error names it
    raw = model_part(whole, part)
    given = given if raw == whole else None  # a part: transformers' config is built from its dict
    numbers, strings = read_numbers(raw)  # a number written as a string is read, and an error trap
    try:
        settings = read_rope_settings(numbers)
    except ValueError as error:  # remote code whose config states no RoPE field (ChatGLM's rotation is in its code)
        refused = [t for t in refused_traps(whole) if t.message.startswith("transformers does not know")]
        if not refused or not str(error).startswith("the config has no RoPE"):
            raise
        said = refused[0].message.split(": posembed reads")[0]
        trap = replace(refused[0], message=f"{said}: {error}, so posembed builds none; the rotation is in that code")
        logger.info("checked RoPE of %s: refused, %s", source, trap.message)
        return RopeReport(source, raw.get("model_type"), "no RoPE field", length, (), (trap,))
    stated = [stated_of(numbers, s) for s in settings]
    traps = find_traps(numbers, strings, settings, stated)
    if whole.get("model_type") != raw.get(
        "model_type"
    ):  # a part: transformers refuses the file if it does not know the whole
        traps = [*(t for t in refused_traps(whole) if t.message.startswith("transformers does not know")), *traps]
    built = [_layer(raw, given, s, w, length, compare) for s, w in zip(settings, stated)]
    layers, traps = [layer for layer, _ in built], [trap for _, extra in reversed(built) for trap in extra] + traps
    logger.info("checked RoPE of %s: %d layer type(s), %d trap(s)", source, len(layers), len(traps))
    spelling = (
        "rope_parameters (transformers 5.x)"
        if raw.get("rope_parameters")
        else "rope_scaling + rope_theta (transformers 4.x)"
    )
    return RopeReport(source, raw.get("model_type"), spelling, length, tuple(layers), tuple(traps))


def report_json(report: RopeReport) -> dict:
    """The report as JSON-ready data (``ok`` and each comparison's ``equal`` included)."""
    data = asdict(report)
    data["ok"] = report.ok
    for layer, layer_data in zip(report.layers, data["layers"]):
        settings, layer_data["settings"] = layer_data["settings"], {}
        for key, value in settings.items():
            layer_data["settings"][key] = value
            if key in _BESIDE:
                layer_data["settings"][_BESIDE[key]] = getattr(layer.stated, _BESIDE[key])
        del layer_data["stated"]
        for comparison, comparison_data in zip(layer.comparisons, layer_data["comparisons"]):
            comparison_data["equal"] = comparison.equal
    return _finite(data)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _length_lines(layer: LayerReport) -> Iterator[str]:
    """The lengths side by side: configured, trained, what the scaling does; the effective context where stated."""
    yield f"  configured length {layer.configured_length} (max_position_embeddings)"
    yield (
        f"  trained length    {layer.trained_context} ({layer.trained_source})"
        if layer.trained_context is not None
        else f"  trained length    {layer.trained_source}"
    )
    yield f"  scaling           {layer.scaling}"
    if layer.effective_context is not None:
        yield (
            f"  effective context {layer.effective_context} (max_position_embeddings; the scaling agrees)"
            if layer.scaled_context
            else (f"  effective context {layer.effective_context} (max_position_embeddings)")
        )
    elif layer.settings.rope_type == "dynamic":
        yield "  effective context not stated: dynamic NTK grows with the sequence beyond the configured length"
    else:
        yield (f"  effective context not stated: the scaling reaches {layer.scaled_context}, the config says "
               f"{layer.configured_length} (see the context_lengths trap)")  # fmt: skip


def _layer_lines(layer: LayerReport) -> Iterator[str]:
    s = layer.settings
    yield (f"[{s.layer_type}] rope_type={s.rope_type} theta={s.theta:g} head_dim={s.head_dim} "
           f"rotary_dim={s.rotary_dim} layout={s.layout} -> {layer.scheme}")  # fmt: skip
    if layer.scheme is None:
        return
    yield from _length_lines(layer)
    yield f"  attention factor {layer.attention_factor:.6g} (logits x {layer.attention_factor**2:.6g})"
    if layer.switch_at:
        yield f"  switches at sequence length > {layer.switch_at}"
    if s.axial is not None and s.axial.grid is not None:  # the coordinates the model itself rotates at
        cls = f"the class token at (0, 0), {s.axial.cls_token}" if s.axial.cls_token else "no class token"
        yield (f"  rotates a {s.axial.grid[0]} x {s.axial.grid[1]} patch grid at (row + {s.axial.grid_offset}, "
               f"column + {s.axial.grid_offset}), {cls} (posembed.schemes.positions.patch_grid_positions)")  # fmt: skip
    for c in layer.comparisons:
        yield (f"  vs transformers (seq_len {c.seq_len}): {'equal' if c.equal else 'DIFFERENT'}, inv_freq max rel diff "
               f"{c.max_inv_freq_rel_diff:.2e}, attention factor {c.attention_factor:.6g} "
               f"vs {c.transformers_attention_factor:.6g}")  # fmt: skip
    if not layer.comparisons or layer.comparison_note != _INIT_NOTE:
        yield f"  vs transformers: {layer.comparison_note}"
    yield "   pair  channels      wavelength  scaled wavelength   /trained  treatment"
    for row in layer.pairs:
        horizon = layer.trained_context or layer.configured_length
        share = row.scaled_wavelength / horizon if horizon else math.nan
        yield (f"  {row.index:5d}  {str(row.channels):12s} {row.wavelength:11.4g} {row.scaled_wavelength:18.4g} "
               f"{share:10.3g}  {row.treatment}"
               f"{'' if row.treatment in ('keep', 'no rotation') else f' x{row.ratio:.4g}'}")  # fmt: skip


def format_report(report: RopeReport) -> str:
    """A plain-text report: header, one section per layer type, then the traps."""
    return "\n".join([
        f"config: {report.source} (model_type {report.model_type}; {report.spelling})",
        *(line for layer in report.layers for line in _layer_lines(layer)),
        "traps:" if report.traps else "traps: none",
        *(f"  {t.severity.upper():7s} {t.code} [{t.layer_type}]: {t.message}" for t in report.traps),
        "result: OK" if report.ok else "result: CHECK THE WARNINGS ABOVE",
    ])  # fmt: skip
