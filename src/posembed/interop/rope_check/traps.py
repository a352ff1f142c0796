"""The RoPE config traps inference stacks keep falling into, each a pure check on the settings.

Each ``_check_*`` takes the config dict (its numeric fields as numbers), one layer type's
:class:`~posembed.interop.rope.settings.RopeSettings` and what the config wrote for it
(:class:`~posembed.interop.rope_check.stated.Stated`), and yields :class:`Trap` records: ``"error"`` (the config
cannot be used as written), ``"warning"`` (it loads, but probably not as intended) or ``"note"`` (how the setting
must be applied). :func:`find_traps` runs them all, plus the checks across layer types.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from posembed.interop.rope.config import built_types
from posembed.interop.rope.model import build_config
from posembed.interop.rope.parameters import DEFAULT_THETA, stated, stated_layer, states_rope, why_ignored
from posembed.interop.rope.settings import ALL_LAYERS, ORIGINAL_USERS, RopeSettings
from posembed.interop.rope_check.stated import Stated, ignored_parameters
from posembed.interop.rope_check.traps_scaling import (
    MSCALE_FORWARD,
    Trap,
    check_mscale_forward,
    check_of_type,
    yarn_default_attention,
)

__all__ = ["Trap", "find_traps", "refused_traps", "FAMILY_THETA", "MSCALE_FORWARD", "yarn_default_attention"]

#: published rope_theta values per family (a model_type, or "llama3"), per layer type where they differ
FAMILY_THETA: dict[str, dict[str, tuple[float, ...]]] = {
    "llama": {ALL_LAYERS: (10000.0, 500000.0)},
    "llama3": {ALL_LAYERS: (500000.0,)},
    "mistral": {ALL_LAYERS: (10000.0, 1000000.0)},
    "mixtral": {ALL_LAYERS: (1000000.0,)},
    **{family: {ALL_LAYERS: (1000000.0,)} for family in ("qwen2", "qwen2_moe", "qwen3")},
    **{family: {ALL_LAYERS: (10000.0,)} for family in ("gemma", "gemma2", "phi3", "gpt_neox")},
    "gemma3_text": {"full_attention": (1000000.0,), "sliding_attention": (10000.0,)},
    "modernbert": {"full_attention": (160000.0,), "sliding_attention": (10000.0,)},
}
#: vocabulary size of Llama 3 (its tokenizer), which tells Llama 3 from Llama 2 in a "llama" config
LLAMA3_VOCAB = 128256
#: scaled rope types whose factor stretches the pre-training length they are given (a stated one for linear);
#: dynamic NTK is the one that scales from max_position_embeddings itself
SCALED_FROM_ORIGINAL = ORIGINAL_USERS | {"linear"}
#: the old names of LongRoPE that Phi-3's config classes rename
OLD_LONGROPE = ("su", "yarn")


def _check_theta(raw: dict, s: RopeSettings, w: Stated) -> Iterator[Trap]:
    family = raw.get("model_type")
    if family == "llama" and (s.rope_type == "llama3" or raw.get("vocab_size") == LLAMA3_VOCAB):
        family = "llama3"
    thetas = FAMILY_THETA.get(family, {})
    expected = thetas.get(s.layer_type) or thetas.get(ALL_LAYERS)
    shown = " or ".join(f"{v:g}" for v in expected) if expected else ""
    if not w.theta_given:
        missing = _theta_missing(raw, s, w)
        if expected and s.theta not in expected:
            yield Trap(
                "theta_missing",
                "warning",
                s.layer_type,
                f"{missing}, but {family} checkpoints are trained with {shown}; every frequency would be wrong",
            )
        else:
            yield Trap("theta_missing", "note", s.layer_type, missing)
    elif expected and s.theta not in expected:
        yield Trap("theta_family", "warning", s.layer_type,
                   f"rope_theta={s.theta:g} but {family} checkpoints use {shown}: was it lost in a conversion "
                   f"(a loader default filled in)?")  # fmt: skip


def _theta_missing(raw: dict, s: RopeSettings, w: Stated) -> str:
    """What fills in the theta of a config that names none: the value the reader took, from the model's config class."""
    model_type, top = raw.get("model_type"), raw.get("rope_theta")
    where = f" for {s.layer_type}" if s.layer_type != ALL_LAYERS else ""
    if not s.known:
        return (f"rope_theta is absent: the default {s.theta:g} applies, unless the model's own config class fills "
                f"in another")  # fmt: skip
    if top is not None and w.theta_field is None:
        return (f"rope_theta={float(top):g} is not read{where}: transformers' {model_type} config class gives it to "
                f"the other layer type and fills in its default {s.theta:g} here")  # fmt: skip
    if states_rope(raw) or s.layer_type != ALL_LAYERS:
        text = f"rope_theta is absent: transformers' {model_type} config class fills in {s.theta:g}{where}"
    else:
        text = (f"the config states no RoPE field: transformers' {model_type} config class fills in its own{where}, "
                f"rope_type {s.rope_type!r} at rope_theta {s.theta:g}")  # fmt: skip
    return text if s.theta == DEFAULT_THETA else f"{text}; a loader without that class would take {DEFAULT_THETA:g}"


def _original_conflict(s: RopeSettings, w: Stated, stated: int, top: int) -> str:
    """Which of two different pre-training lengths transformers builds the model with."""
    where = f"{stated} in the RoPE parameters but {top} at the top level"
    if s.rope_type not in ORIGINAL_USERS:
        return f"original_max_position_embeddings is {where}; rope_type {s.rope_type!r} reads neither"
    if w.original_source == "top level":
        return (f"original_max_position_embeddings is {where}; transformers builds the model with the top-level "
                f"{top}: its config keeps it as an attribute, and standardising the RoPE parameters (at construction "
                f"for a class that declares the field, when the model is built for any other) overwrites theirs with "
                f"it")  # fmt: skip
    return (f"original_max_position_embeddings is {where}; transformers reads the RoPE parameters' {stated} and "
            f"ignores the top-level one")  # fmt: skip


def _original_missing(raw: dict, s: RopeSettings, w: Stated) -> str:
    """How transformers fills in the pre-training length a yarn / llama3 / longrope config does not give."""
    max_pos, factor, top = s.max_position_embeddings, s.factor, raw.get("original_max_position_embeddings")
    head = f"rope_type {s.rope_type!r} has no original_max_position_embeddings"
    if w.original_source == "class default":
        return (f"{head}: transformers' {raw.get('model_type')} config class fills in its default "
                f"{s.original_max_len} as the trained length")  # fmt: skip
    if top is not None:
        scope = "parameters per layer type" if s.layer_type != ALL_LAYERS else f"{raw.get('model_type')} configs"
        head += f" in its RoPE parameters, and transformers ignores the top-level {top} for {scope}"
    looks = ""
    if max_pos and factor > 1 and (max_pos / factor).is_integer():
        looks = (f"; max_position_embeddings={max_pos} = {factor:g} x {int(max_pos / factor)} looks already "
                 f"extended, so the factor would compound to {factor:g}^2 (effective context "
                 f"{int(max_pos * factor)})")  # fmt: skip
    return f"{head}: loaders take max_position_embeddings={max_pos} as the trained length{looks}"


def _check_original(raw: dict, s: RopeSettings, w: Stated) -> Iterator[Trap]:
    top = raw.get("original_max_position_embeddings")
    written = stated_layer(raw, s.layer_type).get("original_max_position_embeddings")  # as written
    max_pos, factor = s.max_position_embeddings, s.factor
    resolved = w.original_source != "max_position_embeddings"  # the config or its class names a length
    if written and top and int(written) != int(top):
        yield Trap("original_inconsistent", "warning", s.layer_type, _original_conflict(s, w, written, top))
    bare = w.original_source == "class default" and not states_rope(raw)  # the class's own parameters
    if bare and s.rope_type in ORIGINAL_USERS:
        yield Trap("original_missing", "note", s.layer_type,
                   f"the config states no RoPE field: transformers' {raw.get('model_type')} config class fills "
                   f"in its own {s.rope_type} parameters, with original_max_position_embeddings="
                   f"{s.original_max_len} as the trained length")  # fmt: skip
    elif w.original_source == "class default" and written is not None and not w.original_given:
        yield Trap("original_inconsistent", "warning", s.layer_type,
                   f"original_max_position_embeddings is {written} in the RoPE parameters, but transformers' "
                   f"{raw.get('model_type')} config class overwrites it with its top-level field, absent here, "
                   f"so with its default {s.original_max_len}: state it at the top level")  # fmt: skip
    elif s.rope_type in ORIGINAL_USERS and not w.original_given:
        yield Trap("original_missing", "warning", s.layer_type, _original_missing(raw, s, w))
    if resolved and max_pos and factor > 1:
        original = s.original_max_len
        if original > max_pos:
            yield Trap(
                "original_inconsistent",
                "warning",
                s.layer_type,
                f"original_max_position_embeddings={original} exceeds max_position_embeddings={max_pos}",
            )
        elif original == max_pos and s.rope_type in SCALED_FROM_ORIGINAL:
            yield Trap("factor_compounds", "warning", s.layer_type,
                       f"original_max_position_embeddings equals max_position_embeddings ({max_pos}) with factor "
                       f"{factor:g}: either max_position_embeddings was not raised to {factor:g} x {original}, or the "
                       f"'original' is itself an extended length and the factor compounds an earlier "
                       f"extension")  # fmt: skip
        elif s.rope_type == "dynamic" and math.isclose(max_pos, factor * original):
            yield Trap("factor_compounds", "warning", s.layer_type,
                       f"max_position_embeddings={max_pos} is already factor x original_max_position_embeddings "
                       f"({factor:g} x {original}), but dynamic NTK scales from max_position_embeddings: it keeps the "
                       f"trained frequencies up to {max_pos}, past the {original} positions the config says were "
                       f"trained, and stretches them toward {factor:g} x {max_pos} = {int(factor * max_pos)}, so the "
                       f"factor compounds to {factor:g}^2; with a checkpoint trained at {original}, set "
                       f"max_position_embeddings={original}")  # fmt: skip
    if s.rope_type == "longrope" and s.params.get("factor") and resolved and max_pos:
        ratio = max_pos / s.original_max_len
        if not math.isclose(ratio, factor, rel_tol=1e-3):
            yield Trap("original_inconsistent", "warning", s.layer_type,
                       f"LongRoPE factor={factor:g} but max_position_embeddings / original = {ratio:g}: the "
                       f"attention factor follows 'factor' when given, the ratio otherwise")  # fmt: skip
    if s.rope_type == "linear" and factor > 1 and not w.original_given:
        yield Trap("original_missing", "note", s.layer_type,
                   f"linear scaling names no trained length: it divides every position by {factor:g} whatever "
                   f"length the model was trained at; max_position_embeddings={max_pos} is the configured length "
                   f"(trained at {max_pos} / {factor:g} = {max_pos / factor:g} if it is already extended)")  # fmt: skip


def _check_shape(raw: dict, s: RopeSettings, w: Stated) -> Iterator[Trap]:
    derived = s.hidden_size // s.num_heads if s.hidden_size and s.num_heads else None
    if s.latent is not None:  # multi-head latent attention: qk_rope_head_dim channels per head, whatever head_dim says
        width = "qk_nope_head_dim + qk_rope_head_dim" if s.latent == "qk_head_dim" else "qk_rope_head_dim"
        yield Trap("head_dim", "note", s.layer_type,
                   f"multi-head latent attention: transformers' {raw.get('model_type')} config class sets head_dim = "
                   f"{width} = {s.head_dim}{'' if w.head_dim_given else ' (absent: its class default)'} and rotates "
                   f"{s.rotary_dim} channels of each head ({s.layout} layout), not hidden_size // "
                   f"num_attention_heads = {derived}: a stack that derives it rotates the wrong width")  # fmt: skip
    elif w.head_dim_given and s.hidden_size and s.num_heads and s.head_dim * s.num_heads != s.hidden_size:
        yield Trap("head_dim", "note", s.layer_type,
                   f"head_dim={s.head_dim} is not hidden_size / num_attention_heads = {s.hidden_size} / "
                   f"{s.num_heads} = {s.hidden_size / s.num_heads:g}: a stack that derives it rotates the wrong "
                   f"width")  # fmt: skip
    elif not w.head_dim_given and s.hidden_size and s.num_heads and s.head_dim != derived:
        yield Trap("head_dim", "note", s.layer_type,
                   f"head_dim is absent: transformers' {raw.get('model_type')} config class fills in its default "
                   f"{s.head_dim}, not hidden_size // num_attention_heads = {derived}: a stack that derives it rotates "
                   f"the wrong width")  # fmt: skip
    if s.rotary_dim < s.head_dim:
        exact = s.head_dim * s.partial_rotary_factor
        pairs = "(i, i + r/2)" if s.layout == "half" else "(2i, 2i + 1)"
        other = "GPT-J's interleaved (2i, 2i + 1)" if s.layout == "half" else "NeoX's halves (i, i + r/2)"
        severity = "warning" if not float(exact).is_integer() or s.rotary_dim % 2 else "note"
        yield Trap("partial_rotary", severity, s.layer_type,
                   f"partial rotary: {s.partial_rotary_factor:g} x head_dim {s.head_dim} = {exact:g} -> rotary_dim "
                   f"r = {s.rotary_dim}; channels 0..{s.rotary_dim - 1} rotate in pairs {pairs} ({s.layout} layout; "
                   f"not (i, i + D/2), not {other}), the other {s.head_dim - s.rotary_dim} pass through")  # fmt: skip


def _check_layers(settings: list[RopeSettings]) -> Iterator[Trap]:
    thetas = {s.layer_type: s.theta for s in settings}
    if len(set(thetas.values())) > 1:
        shown = ", ".join(f"{layer} {theta:g}" for layer, theta in thetas.items())
        yield Trap("theta_per_layer", "note", "*",
                   f"theta differs per layer type ({shown}): a stack that reads only rope_theta gives every layer "
                   f"one of them")  # fmt: skip


def _stated_type(raw: dict) -> object:
    params = stated(raw)[1]
    return params.get("rope_type", params.get("type"))


def _check_renamed(raw: dict, s: RopeSettings, w: Stated) -> Iterator[Trap]:
    old = _stated_type(raw)
    if s.layer_type == ALL_LAYERS and old in OLD_LONGROPE and s.rope_type == "longrope":
        yield Trap("renamed_longrope", "note", s.layer_type,
                   f"rope type {old!r} is an old name of LongRoPE: transformers' {raw.get('model_type')} config class "
                   f"renames it longrope (short_factor / long_factor{', not YaRN' if old == 'yarn' else ''}); posembed "
                   f"reads it so")  # fmt: skip


def refused_traps(raw: dict) -> Iterator[Trap]:
    """A config transformers' own config class refuses, or a model type it does not know (none without
    transformers): it cannot be loaded as written."""
    model_type = raw.get("model_type")
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return
    if isinstance(model_type, str) and model_type not in CONFIG_MAPPING:
        yield Trap("config_refused", "error", "*",
                   f"transformers does not know model_type {model_type!r} (AutoConfig refuses it: \"Unrecognized "
                   f"model identifier\"; only the checkpoint's own remote code reads it): posembed reads the dict as "
                   f"written, and nothing checks that this is the rotation that code applies")  # fmt: skip
        return
    try:
        build_config(raw)
    except Exception as error:  # noqa: BLE001 - whatever the class raises is the reason
        reason = f"{type(error).__name__}: {' '.join(line.strip() for line in str(error).splitlines())}"
        yield Trap("config_refused", "error", "*",
                   f"transformers' {raw.get('model_type')} config class refuses this config ({reason}): "
                   f"transformers cannot load it as written; posembed reads the dict as written, without the "
                   f"class's defaults")  # fmt: skip


def _check_type_key(raw: dict, s: RopeSettings, w: Stated) -> Iterator[Trap]:
    old = s.params.get("type")
    if old is None or old in built_types(s) or (old in OLD_LONGROPE and s.rope_type == "longrope"):
        return  # 'type' names what is built: the rope type, or M-RoPE's 'mrope' where the sections are built
    why = ""
    if s.layer_type != ALL_LAYERS and raw.get("rope_scaling") is not None:
        why = (f" (transformers' {raw['model_type']} config class merges a 4.x rope_scaling into parameters whose "
               f"rope_type is already 'default')")  # fmt: skip
    yield Trap("type_ignored", "warning", s.layer_type,
               f"the RoPE parameters name their type with the old key 'type' ({old!r}) beside rope_type "
               f"{s.rope_type!r}: transformers builds {s.rope_type!r} and ignores 'type'{why}; write "
               f"rope_type")  # fmt: skip


def _check_factor_unread(raw: dict, s: RopeSettings, w: Stated) -> Iterator[Trap]:
    """A ``factor`` beside default RoPE, which reads none: transformers logs the key and builds plain RoPE."""
    if s.rope_type == "default" and s.params.get("factor") is not None and s.factor != 1.0:
        how = "rope_type is 'default'" if _stated_type(raw) == "default" else "the RoPE parameters name no rope_type"
        yield Trap("factor_unread", "warning", s.layer_type,
                   f"factor={s.factor:g} is set, but {how}: default RoPE reads no factor, so transformers builds "
                   f"plain RoPE (it only logs \"Unrecognized keys in `rope_parameters` for 'rope_type'='default': "
                   f"{{'factor'}}\") and nothing is extended; name the scaling the factor is for (rope_type "
                   f"'linear', 'dynamic', 'yarn', ...)")  # fmt: skip


def _check_numbers(strings: list[tuple[str, Any, int | float | None]]) -> Iterator[Trap]:
    """Numeric RoPE fields given as strings: transformers keeps the string and fails where it is used."""
    for field, value, number in strings:
        parts = field.split(".")
        layer = parts[1] if len(parts) == 3 and parts[0] in ("rope_parameters", "rope_scaling") else "*"
        fix = "write it as a number" if number is None else f"write {number!r} without quotes"
        if isinstance(value, str) and "e" in value.lower() and "." not in value:
            fix += f" (YAML 1.1 reads {value} as a string: write {float(number or 0):.1e} there)"
        yield Trap("not_a_number", "error", layer,
                   f"{field} is {value!r}, a {type(value).__name__}, not a number: transformers does not convert "
                   f"it, so its config class or its rope init fails on it; {fix}")  # fmt: skip


def _check_ignored(raw: dict, settings: list[RopeSettings]) -> Iterator[Trap]:
    ignored = ignored_parameters(raw)
    shown = ", ".join(ignored)
    if ignored and [s.layer_type for s in settings] == [ALL_LAYERS]:
        yield Trap("parameters_ignored", "warning", "*",
                   f"the RoPE parameters nest {shown} like layer types, but {why_ignored(raw)}: transformers reads the "
                   f"parameters as flat, ignores {shown} and builds {settings[0].rope_type} RoPE with theta "
                   f"{settings[0].theta:g}; posembed's builder refuses such a config")  # fmt: skip
    elif ignored:
        yield Trap("parameters_ignored", "warning", "*",
                   f"the RoPE parameters hold {shown} beside the layer types the config has "
                   f"({', '.join(s.layer_type for s in settings)}): transformers ignores "
                   f"{'it' if len(ignored) == 1 else 'them'}")  # fmt: skip


_CHECKS = (_check_theta, _check_original, check_of_type, _check_shape, _check_renamed, _check_type_key,
           _check_factor_unread, check_mscale_forward)  # fmt: skip


def find_traps(raw: dict, strings: list, settings: list[RopeSettings], stated: list[Stated]) -> list[Trap]:
    """Every trap of every layer type (errors first, then warnings, then notes).

    ``raw``: the config with its numeric fields as numbers, ``strings`` the fields it gives as something else (each
    an error), both from :func:`~posembed.interop.rope_check.numbers.read_numbers`; ``stated``: what the config
    writes per layer type (:func:`~posembed.interop.rope_check.stated.stated_of`).
    """
    traps = [
        *_check_numbers(strings),
        *(trap for s, w in zip(settings, stated) for check in _CHECKS for trap in check(raw, s, w)),
    ]
    traps += [*_check_layers(settings), *_check_ignored(raw, settings), *refused_traps(raw)]
    return sorted(traps, key=lambda trap: ("error", "warning", "note").index(trap.severity))
