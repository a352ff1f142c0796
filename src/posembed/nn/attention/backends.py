"""Attention backends behind one dispatch point: eager, SDPA, FlexAttention, chunked and fused.

Every backend computes the same thing,

    softmax(scale * q k^T + bias + mask) v,

where ``bias`` comes from a :class:`~posembed.schemes.base.BiasScheme` (added to the already
scaled logits; a scheme that declares ``needs_key_mask`` also receives the key padding mask) and
``mask`` merges the causal mask and the key padding mask. ``scale`` is the one number the
attention layer decides (:attr:`posembed.nn.attention.layer.SelfAttention.softmax_scale`); every backend
applies it. They differ in what they materialise:

- ``eager``: plain PyTorch softmax, the reference; holds ``(B, H, T, T)`` scores; trains.
- ``sdpa``: ``F.scaled_dot_product_attention`` with bias, causal and padding masks merged into
  one ``attn_mask`` (a ``(B|1, H, T, T)`` tensor for bias schemes; none otherwise); trains.
- ``flex``: ``flex_attention`` with the scheme's ``score_mod`` and a block mask; compiled, no
  ``T x T`` tensor; no backward on CPU in torch 2.13. ``"auto"`` picks it for bias schemes on
  CUDA (compiled), where the CPU-tuned ``fused`` backend is never picked. Compiled off the CPU,
  it lowers no head narrower than :data:`FLEX_MIN_HEAD_DIM` channels: :func:`choose_backend`
  then takes SDPA up to :data:`AUTO_SDPA_MAX_LENGTH`, and above it flex with the heads
  zero-padded to that width (``q . k`` unchanged, ``v``'s extra channels sliced off, the scale
  still the true width's), logged once. Compiled kernels are built once per shape and scheme
  kind and reused by every later model: dynamo's recompile limits are raised to
  :data:`FLEX_RECOMPILE_LIMIT` around each compiled call, and put back after it.
- ``chunked``: a loop over query chunks, each under ``torch.utils.checkpoint``: only
  ``(B, H, chunk, T)`` scores and bias exist at a time, in the forward and the backward; trains.
  Measured on CPU (ALiBi, H = 4, C = 64, B = 1, forward + backward, peak RSS growth): T = 4096,
  SDPA 803 MiB, chunked (256) 203 MiB; T = 8192, chunked 276 MiB.
- ``fused``: :func:`posembed.kernels.attention.bias_attention`, query blocks through PyTorch's
  fused CPU kernel with that block's bias, a recomputing backward, no ``(H, T, T)`` tensor and
  half the work when causal; bias schemes that do not read q/k, positions shared across the
  batch (padding masks allowed), no attention dropout; trains.

Masking rule shared by all backends (defined once, in :mod:`posembed.kernels.masks`): a query
may attend to key ``j`` when ``j`` is a real token (and ``j <= i`` if causal), and always to
itself, so that no row is fully masked (the outputs at padding positions are finite; callers
ignore them).

:func:`choose_backend` is the one place where a backend is picked; a fallback is logged once
per reason. This module holds it, :func:`run_backend` and FlexAttention; the inputs and their
bias and mask terms are in :mod:`posembed.nn.attention.inputs`, the eager, SDPA, chunked and fused
backends in :mod:`posembed.nn.attention.kernels` (their names are re-exported here).
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable
from dataclasses import replace
from enum import Enum

import torch
import torch.nn.functional as F
from torch import Tensor

from posembed._utils.devices import cpu_tuned
from posembed._utils.logging import log_once as _log_once
from posembed._utils.torch_private import recompile_limits
from posembed.kernels.masks import visibility_mod, visible_keys
from posembed.nn.attention.inputs import AttentionInputs, adds_bias, mask_keyword, needs_grad
from posembed.nn.attention.kernels import chunked_attention, eager_attention, fused_attention, sdpa_attention

__all__ = [
    "Backend",
    "BACKENDS",
    "AUTO_SDPA_MAX_LENGTH",
    "FLEX_MIN_HEAD_DIM",
    "FLEX_RECOMPILE_LIMIT",
    "AttentionInputs",
    "choose_backend",
    "run_backend",
    "eager_attention",
    "sdpa_attention",
    "flex_attention",
    "chunked_attention",
    "flex_available",
    "flex_applies",
    "flex_head_floor",
    "adds_bias",
    "visible_keys",
]

logger = logging.getLogger(__name__)


class Backend(str, Enum):
    """The attention backends; a ``str`` enum, so ``backend="sdpa"`` and ``Backend.SDPA`` are one value.

    ``AUTO`` is a request only (:func:`choose_backend` turns it into one of the others); the rest
    run through :func:`run_backend`.

    Example:
        >>> Backend.parse("sdpa") is Backend.SDPA, Backend.SDPA == "sdpa"
        (True, True)
        >>> Backend.parse("dense")
        Traceback (most recent call last):
        ...
        ValueError: unknown backend 'dense'; choose one of auto, sdpa, flex, fused, chunked, eager
    """

    AUTO = "auto"
    SDPA = "sdpa"
    FLEX = "flex"
    FUSED = "fused"
    CHUNKED = "chunked"
    EAGER = "eager"

    def __str__(self) -> str:  # the name as users write it, in f-strings too (StrEnum from Python 3.11)
        return self.value

    @classmethod
    def parse(cls, value: object) -> Backend:
        """``value`` (a name or a :class:`Backend`) as a :class:`Backend`; ``ValueError`` naming it and the choices."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown backend {value!r}; choose one of {', '.join(BACKENDS)}") from None


#: backend names accepted by :class:`~posembed.nn.attention.layer.SelfAttention` (the values of :class:`Backend`)
BACKENDS = tuple(backend.value for backend in Backend)

#: ``backend="auto"``: bias schemes use SDPA (materialised bias) up to this length, fused or chunked above
AUTO_SDPA_MAX_LENGTH = 1024

#: narrowest q/k and v head that compiled FlexAttention lowers off the CPU (Triton's ``tl.dot``
#: needs 16: "NYI: embedding dimension of the query, key, and value must be at least 16")
FLEX_MIN_HEAD_DIM = 16

#: compiled FlexAttention graphs dynamo keeps for its one ``flex_attention`` frame (one per
#: shape, scheme kind, mask kind and grad mode; torch's default, 8, is spent by two scheme kinds
#: at a few lengths, after which every new shape runs the uncompiled reference). Set only
#: around posembed's compiled flex call (:func:`posembed._utils.torch_private.recompile_limits`).
FLEX_RECOMPILE_LIMIT = 1024


def log_once(reason: str) -> None:
    """Log a backend fallback once per distinct reason (warning level)."""
    _log_once(logger, reason)


def flex_available() -> bool:
    """Whether ``torch.nn.attention.flex_attention`` can be imported."""
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _compiled_flex():
    """The one ``torch.compile`` wrapper of FlexAttention, shared by every layer and model."""
    from torch.nn.attention.flex_attention import flex_attention as _flex

    return torch.compile(_flex, dynamic=False)


def flex_head_floor(device: torch.device) -> int:
    """The narrowest head compiled FlexAttention lowers on ``device``.

    :data:`FLEX_MIN_HEAD_DIM` off the CPU (Triton); 1 on the CPU, whose C++ kernel takes any
    width. Decided by the device policy (:func:`posembed._utils.devices.cpu_tuned`), so a CPU test can
    mock it to check the CUDA decision.
    """
    return 1 if cpu_tuned(device) else FLEX_MIN_HEAD_DIM


def _narrow_head(inp: AttentionInputs) -> str | None:
    """Why compiled flex cannot lower ``inp``'s heads on their device, or ``None`` when it can."""
    floor = flex_head_floor(inp.q.device)
    width, value_width = inp.q.shape[-1], inp.v.shape[-1]
    if min(width, value_width) >= floor:
        return None
    return (
        f"compiled FlexAttention on {inp.q.device.type} lowers heads of at least {floor} channels, "
        f"got q/k width E={width} and v width Ev={value_width}"
    )


def _pad_heads(inp: AttentionInputs, width: int) -> AttentionInputs:
    """``inp`` with q, k and v zero-padded to at least ``width`` channels.

    Zero channels add nothing to ``q . k``; the scale stays ``inp.scale`` (the true width's) and
    the caller slices the output back to v's width.
    """

    def pad(x: Tensor) -> Tensor:
        return F.pad(x, (0, max(width - x.shape[-1], 0)))  # (B, H, T, >= width)

    return replace(inp, q=pad(inp.q), k=pad(inp.k), v=pad(inp.v))


@functools.lru_cache(maxsize=32)
def _causal_block_mask(length: int, device: torch.device):
    """The causal block mask of one length on one device, built once and shared by every call.

    Built outside inference mode: a mask first made under ``torch.inference_mode`` (an
    evaluation) must still be savable for the backward of a later training step.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    with torch.inference_mode(False):
        return create_block_mask(visibility_mod(True, None), None, None, length, length, device=device)


def flex_attention(inp: AttentionInputs, compiled: bool = False, *, min_head_dim: int | None = None) -> Tensor:
    """FlexAttention with the scheme's ``score_mod`` and a block mask for causal/padding.

    posembed builds no ``T x T`` tensor here. With ``compiled=True`` the call goes through
    ``torch.compile`` and fuses into one kernel (a few seconds of compilation per new shape and
    scheme kind, then reused by every layer and model in the process; needs a C++ compiler on
    CPU); uncompiled, PyTorch runs its reference implementation, which materialises the scores
    (logged once). On CPU in torch 2.13 it has no backward: :func:`choose_backend` never picks
    it when gradients are needed there.

    Heads narrower than ``min_head_dim`` are zero-padded to it and the output sliced back
    (default: :func:`flex_head_floor` of the device when compiled, no padding uncompiled).
    """
    from torch.nn.attention.flex_attention import create_block_mask
    from torch.nn.attention.flex_attention import flex_attention as _eager_flex

    if min_head_dim is None:
        min_head_dim = flex_head_floor(inp.q.device) if compiled else 1
    value_width = inp.v.shape[-1]
    if min(inp.q.shape[-1], value_width) < min_head_dim:
        inp = _pad_heads(inp, min_head_dim)

    score_mod = None
    if adds_bias(inp.scheme):
        q, k = inp.qk if inp.qk is not None else (None, None)
        score_mod = inp.scheme.score_mod(inp.positions, inp.positions, q, k, **mask_keyword(inp))
    block_mask = None
    if inp.key_mask is not None:  # depends on the batch's values: built per call
        batch, _, length, _ = inp.q.shape
        mask_mod = visibility_mod(inp.causal, inp.key_mask)
        block_mask = create_block_mask(mask_mod, batch, None, length, length, device=inp.q.device)
    elif inp.causal:
        build = _causal_block_mask if not torch.compiler.is_compiling() else _causal_block_mask.__wrapped__
        block_mask = build(inp.q.shape[-2], inp.q.device)
    if compiled:
        if torch.compiler.is_compiling():  # inside an outer torch.compile: its graph compiles the call
            out = _eager_flex(inp.q, inp.k, inp.v, score_mod=score_mod, block_mask=block_mask, scale=inp.scale)
        else:
            # room for one graph per shape and scheme kind, during this call only
            with recompile_limits(FLEX_RECOMPILE_LIMIT):
                out = _compiled_flex()(inp.q, inp.k, inp.v, score_mod=score_mod, block_mask=block_mask, scale=inp.scale)
        return out[..., :value_width]  # (B, H, T, Dv)
    log_once(
        "backend 'flex' runs uncompiled: PyTorch's reference FlexAttention materialises the scores; "
        "SelfAttention(compile_flex=True) uses the fused kernel"
    )
    with warnings.catch_warnings():  # said once above, through logging
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        out = _eager_flex(inp.q, inp.k, inp.v, score_mod=score_mod, block_mask=block_mask, scale=inp.scale)
    return out[..., :value_width]  # (B, H, T, Dv)


def choose_backend(
    requested: Backend | str, inp: AttentionInputs, adds_bias: bool, training: bool, *, compile_flex: bool = False
) -> Backend:
    """The one dispatch point: the backend that will run ``inp``.

    Rules:

    - ``"auto"``: SDPA when no bias is added (absolute, rotary, NoPE) or the length is at most
      :data:`AUTO_SDPA_MAX_LENGTH`; above it, bias schemes run ``"fused"`` where it applies
      (:func:`fused_applies`: memory O(T * block), half the work when causal), else ``"chunked"``
      (memory O(T * chunk)).
    - ``"fused"`` falls back to ``"chunked"``, logged once per reason, where it does not apply.
    - ``"flex"`` falls back, logged once per reason, when FlexAttention cannot be imported (to
      SDPA), when gradients are needed on CPU (no flex backward there; to chunked), or when
      attention dropout is active (flex has none; to chunked).
    - ``"auto"`` on CUDA: bias schemes run ``"flex"`` (compiled: one fused kernel, no ``T x T``
      tensor, with a backward) where :func:`flex_applies`, else SDPA up to the threshold and
      ``"chunked"`` above it; ``"fused"`` is tuned for the CPU and is never picked elsewhere.
    - Compiled flex off the CPU never gets a head narrower than :func:`flex_head_floor` (16):
      ``"auto"`` takes SDPA up to the threshold, and above it flex with zero-padded heads;
      ``"flex"`` with ``compile_flex`` pads. Both logged once with the reason.
    - ``"sdpa"``, ``"chunked"``, ``"eager"`` run as asked.

    ``requested`` is a :class:`Backend` or its name (``ValueError`` for another); the answer is
    never :attr:`Backend.AUTO`.
    """
    requested = Backend.parse(requested)
    if requested is Backend.AUTO:
        length = inp.q.shape[-2]
        if not adds_bias:
            return Backend.SDPA
        if not cpu_tuned(inp.q.device):
            if flex_applies(inp, training) is None:
                return _narrow_flex(inp, Backend.SDPA if length <= AUTO_SDPA_MAX_LENGTH else Backend.FLEX)
            return Backend.SDPA if length <= AUTO_SDPA_MAX_LENGTH else Backend.CHUNKED
        if length <= AUTO_SDPA_MAX_LENGTH:
            return Backend.SDPA
        return Backend.FUSED if fused_applies(inp, training) is None else Backend.CHUNKED
    if requested is Backend.FUSED:
        reason = fused_applies(inp, training)
        if reason is not None:
            log_once(f"backend 'fused' does not apply ({reason}); using 'chunked'")
            return Backend.CHUNKED
        return Backend.FUSED
    if requested is not Backend.FLEX:
        return requested
    if not flex_available():
        log_once("backend 'flex' requested but torch.nn.attention.flex_attention is unavailable; using 'sdpa'")
        return Backend.SDPA
    if inp.q.device.type == "cpu" and needs_grad(inp):
        log_once("backend 'flex' has no backward on CPU (torch 2.13) and gradients are needed; using 'chunked'")
        return Backend.CHUNKED
    if training and inp.dropout > 0.0:
        log_once("backend 'flex' has no attention dropout; using 'chunked' while training with dropout > 0")
        return Backend.CHUNKED
    return _narrow_flex(inp, Backend.FLEX) if compile_flex else Backend.FLEX


def _narrow_flex(inp: AttentionInputs, instead: Backend) -> Backend:
    """``"flex"`` for heads compiled flex lowers; for narrower ones ``instead`` (``"sdpa"``, or
    ``"flex"``, which pads them: :func:`flex_attention`), logged once with the reason."""
    reason = _narrow_head(inp)
    if reason is None:
        return Backend.FLEX
    if instead is Backend.FLEX:
        log_once(f"{reason}; running 'flex' with the heads zero-padded to {flex_head_floor(inp.q.device)} channels")
    else:
        log_once(f"{reason}; using {instead.value!r} (materialised bias) up to T={AUTO_SDPA_MAX_LENGTH}")
    return instead


def flex_applies(inp: AttentionInputs, training: bool) -> str | None:
    """``None`` when ``"auto"`` may run ``inp`` on FlexAttention off the CPU, else why not.

    Checked on the inputs' device type, never on this machine's: a CPU test can call it with
    ``meta`` tensors (or a mocked device type) to check the CUDA decision.
    """
    if cpu_tuned(inp.q.device):
        return "the CPU has no FlexAttention backward; the CPU-tuned backends serve it"
    if not flex_available():
        return "torch.nn.attention.flex_attention is unavailable"
    if adds_bias(inp.scheme) and not inp.scheme.has_score_mod:
        return f"{type(inp.scheme).__name__} has no FlexAttention score_mod"
    return _shared_positions_no_dropout(inp, training)


def fused_applies(inp: AttentionInputs, training: bool) -> str | None:
    """``None`` when :func:`posembed.kernels.attention.bias_attention` can run ``inp``, else why not."""
    if inp.scheme is None or inp.scheme.needs_qk:
        return "it serves bias schemes that do not read q/k"
    if inp.scheme.needs_key_mask:
        return "it serves bias schemes that do not read the padding mask"
    if adds_bias(inp.scheme) and inp.scheme.num_heads != inp.q.shape[1]:
        return f"{type(inp.scheme).__name__} has num_heads={inp.scheme.num_heads}, not one bias per head"
    return _shared_positions_no_dropout(inp, training)


def _shared_positions_no_dropout(inp: AttentionInputs, training: bool) -> str | None:
    """What flex and fused both need: one ``(T,)`` position row for the batch, no attention dropout."""
    if inp.positions.dim() != 1:
        return "positions differ per row"
    if training and inp.dropout > 0.0:
        return "attention dropout is active"
    return None


#: the function that runs each backend but ``AUTO`` (``(inputs, chunk_size, compile_flex) -> (B, H, T, Dv)``)
_RUNNERS: dict[Backend, Callable[[AttentionInputs, int, bool], Tensor]] = {
    Backend.SDPA: lambda inp, chunk_size, compile_flex: sdpa_attention(inp),
    Backend.FUSED: lambda inp, chunk_size, compile_flex: fused_attention(inp),
    Backend.CHUNKED: lambda inp, chunk_size, compile_flex: chunked_attention(inp, chunk_size),
    Backend.FLEX: lambda inp, chunk_size, compile_flex: flex_attention(inp, compiled=compile_flex),
    Backend.EAGER: lambda inp, chunk_size, compile_flex: eager_attention(inp),
}


def run_backend(
    name: Backend | str, inp: AttentionInputs, *, chunk_size: int = 256, compile_flex: bool = False
) -> Tensor:
    """Run the backend ``name`` (a :class:`Backend` or its name, not ``"auto"``) on ``inp``."""
    backend = Backend.parse(name)
    if backend is Backend.AUTO:
        raise ValueError("run_backend runs a chosen backend: pass choose_backend('auto', ...)'s answer, not 'auto'")
    return _RUNNERS[backend](inp, chunk_size, compile_flex)
