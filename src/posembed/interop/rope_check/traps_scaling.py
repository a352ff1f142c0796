"""The traps of the scaled rope types (yarn, dynamic, longrope, llama3, PhiMoE's forward) and the :class:`Trap` record;
:mod:`posembed.interop.rope_check.traps` runs them with the checks every layer gets."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from posembed.interop.rope.parameters import ORIGINAL
from posembed.interop.rope.settings import ORIGINAL_USERS, RopeSettings
from posembed.interop.rope_check.stated import Stated

__all__ = ["Trap", "MSCALE_FORWARD", "yarn_default_attention", "check_of_type", "check_mscale_forward"]

#: model types whose transformers rotary embedding calls the rope init function again in ``forward``, without the
#: sequence length, and multiplies cos / sin by ``short_mscale`` / ``long_mscale`` (transformers 5.23
#: modeling_phimoe.py)
MSCALE_FORWARD = frozenset({"phimoe"})


@dataclass(frozen=True)
class Trap:
    """One finding: ``code`` (stable, for scripts), ``severity``, the layer type, a message."""

    code: str
    severity: str
    layer_type: str
    message: str


def yarn_default_attention(factor: float, m: float = 1.0) -> float:
    """YaRN's default attention factor ``0.1 ln s + 1`` (1 for ``s <= 1``); DeepSeek's ``get_mscale(s, m)`` with
    ``m``."""
    return 1.0 if factor <= 1 else 0.1 * float(m) * math.log(factor) + 1.0


def _check_yarn(s: RopeSettings, w: Stated) -> Iterator[Trap]:
    p, plain = s.params, yarn_default_attention(s.factor)
    given, mscale, all_dim = p.get("attention_factor"), p.get("mscale"), p.get("mscale_all_dim")
    yield Trap("yarn_attention", "note", s.layer_type,
               f"YaRN's attention factor a (default 0.1 ln s + 1 = {plain:.6g}) multiplies cos and sin, which rotate "
               f"q and k both, so the logits scale by a^2 = {plain ** 2:.6g}; apply it once, inside cos/sin - not "
               f"also to q or k alone, not as a^2 in the softmax scale")  # fmt: skip
    if given is not None and plain > 1 and math.isclose(float(given), plain**2, rel_tol=1e-4):
        yield Trap("yarn_squared", "warning", s.layer_type,
                   f"attention_factor={given:g} is (0.1 ln s + 1)^2: folded into cos and sin it is applied to q "
                   f"and k, so the logits would scale by its square again (a^4)")  # fmt: skip
    if mscale and all_dim:
        ratio = yarn_default_attention(s.factor, mscale) / yarn_default_attention(s.factor, all_dim)
        yield Trap("yarn_mscale", "note", s.layer_type,
                   f"DeepSeek mscale={mscale}, mscale_all_dim={all_dim}: the rotary factor is get(s, mscale) / "
                   f"get(s, mscale_all_dim) = {ratio:.6g} instead of the plain {plain:.6g}; DeepSeek also "
                   f"multiplies its softmax scale by get(s, mscale_all_dim)^2 = "
                   f"{yarn_default_attention(s.factor, all_dim) ** 2:.6g} in attention - keep that, and do not add "
                   f"the plain factor on top")  # fmt: skip
    elif mscale is not None or all_dim is not None:
        yield Trap("yarn_mscale", "warning", s.layer_type,
                   f"DeepSeek mscale={mscale}, mscale_all_dim={all_dim}: only one of mscale / mscale_all_dim is set: "
                   f"transformers then ignores it and uses the plain 0.1 ln s + 1 = {plain:.6g}, while DeepSeek's code "
                   f"would not")  # fmt: skip
    if given is not None and (mscale or all_dim):
        yield Trap(
            "yarn_mscale", "warning", s.layer_type, "attention_factor is set together with mscale: it overrides them"
        )


def _check_dynamic(s: RopeSettings, w: Stated) -> Iterator[Trap]:
    length = s.max_position_embeddings
    yield Trap("dynamic_formula", "note", s.layer_type,
               f"dynamic NTK: for a call of length l > L = max_position_embeddings = {length}, the base becomes "
               f"theta ((s l / L) - (s - 1))^(D / (D - 2)); for l <= L the frequencies must stay the trained ones, "
               f"and l is the current total length, so keys cached at a shorter length carry other "
               f"frequencies")  # fmt: skip
    if w.original_given and s.original_max_len != length:
        yield Trap("dynamic_original", "warning", s.layer_type,
                   f"original_max_position_embeddings={s.original_max_len} is set, but dynamic NTK takes "
                   f"max_position_embeddings={length} as the trained length: frequencies change only past "
                   f"{length}")  # fmt: skip


def _check_longrope(s: RopeSettings, w: Stated) -> Iterator[Trap]:
    yield Trap("longrope_switch", "note", s.layer_type,
               f"LongRoPE uses short_factor while the sequence (largest position + 1) is at most "
               f"{s.original_max_len} and long_factor beyond: decided by the actual length of each call, not by "
               f"max_position_embeddings={s.max_position_embeddings} - picking long_factor from the configured "
               f"maximum distorts short prompts")  # fmt: skip
    for name in ("short_factor", "long_factor"):
        values = s.params.get(name)
        if values is not None and len(values) != s.rotary_dim // 2:
            yield Trap(
                "longrope_factors",
                "error",
                s.layer_type,
                f"{name} has {len(values)} values; rotary_dim / 2 = {s.rotary_dim // 2} are needed",
            )


def _check_llama3(s: RopeSettings, w: Stated) -> Iterator[Trap]:
    low, high, original = s.params.get("low_freq_factor"), s.params.get("high_freq_factor"), s.original_max_len
    if low is None or high is None:
        yield Trap("llama3_bounds", "error", s.layer_type, "llama3 scaling needs low_freq_factor and high_freq_factor")
    elif not 0 < low <= high:
        yield Trap("llama3_bounds", "error", s.layer_type,
                   f"llama3 needs 0 < low_freq_factor <= high_freq_factor, got {low:g} and {high:g}")  # fmt: skip
    elif low == high:
        yield Trap("llama3_bounds", "note", s.layer_type,
                   f"llama3 with low_freq_factor = high_freq_factor = {low:g}: no smooth ramp, a step: wavelengths "
                   f"above original / low_freq_factor = {original / low:g} are interpolated (x{s.factor:g}), the "
                   f"rest kept")  # fmt: skip
    else:
        yield Trap("llama3_bounds", "note", s.layer_type,
                   f"llama3: wavelengths above original / low_freq_factor = {original / low:g} are interpolated "
                   f"(x{s.factor:g}), those below original / high_freq_factor = {original / high:g} kept, a smooth "
                   f"ramp between")  # fmt: skip


#: the checks of one scaling type, each ``_check_<rope_type>`` (rope types are named in the factory alone)
_TYPE_CHECKS = (_check_yarn, _check_dynamic, _check_longrope, _check_llama3)


def check_of_type(raw: dict, s: RopeSettings, w: Stated) -> Iterator[Trap]:
    """The traps of the layer's scaling type (none for a type without checks)."""
    for check in _TYPE_CHECKS:
        if check.__name__ == f"_check_{s.rope_type}":
            yield from check(s, w)


def check_mscale_forward(raw: dict, s: RopeSettings, w: Stated) -> Iterator[Trap]:
    if raw.get("model_type") not in MSCALE_FORWARD or s.rope_type == "default":
        return
    frequencies = f"which gives the {s.rope_type} frequencies"
    if s.rope_type == "longrope":
        frequencies = "so it always takes short_factor, never long_factor"
    elif s.rope_type == "dynamic":
        frequencies = "so dynamic NTK never rescales its frequencies"
    short, long = s.params.get("short_mscale"), s.params.get("long_mscale")
    original = s.original_max_len if s.rope_type in ORIGINAL_USERS else s.params.get(ORIGINAL)
    yield Trap("mscale_forward", "warning", s.layer_type,
               f"transformers' {raw.get('model_type')} rotary embedding does not use what its rope init function "
               f"builds at each length: its forward calls that function again without the sequence length, "
               f"{frequencies}, and multiplies cos and sin by short_mscale={short} (sequences up to {ORIGINAL}="
               f"{original}) or long_mscale={long} (longer) instead of the attention factor; posembed's "
               f"scheme reads that forward and does the same (forward_mscale)")  # fmt: skip
