"""RoPE's rotation: the formula once, its optional compiled kernel, and the one dispatch point.

:func:`rotate_reference` is the formula (Su et al. 2021): each pair ``(x1, x2)`` becomes
``(x1 cos - x2 sin, x2 cos + x1 sin)``. Everything else runs it:

- eager: :func:`rotate_reference` writing into one fresh output buffer (``out=``; no temporaries
  beyond the two products), inside :class:`_Rotation`, whose backward is the same formula with the
  angle negated (a rotation's transpose is its inverse), so only cos and sin are saved;
- learned angles (cos/sin that require grad) and code already under ``torch.compile``: the plain
  formula (no ``out=``), differentiated by autograd or fused by the outer compiler;
- compiled: :class:`CompiledRotation`, ``torch.compile`` of the same formula (built lazily,
  once), inside the same :class:`_Rotation`. It reads and writes the input's dtype (float32,
  bfloat16 or float16) and rotates in float32 inside (:func:`rotate_in_float32`): one pass over
  ``x``, cos and sin kept in float32, the result rounded once, as the eager path rounds it.

:func:`apply_rotary` is the one place that chooses between them. ``compiled=None`` (the default)
asks the device policy :func:`compiled_by_default`: the compiled kernel on CUDA, where the eager
formula is several passes over memory per tensor; the eager formula on the CPU, where it is what
the benchmarks and the lab's bit-for-bit runs measured. Nothing in the forward or the backward
reads a tensor's value back to the host (no ``.item()``, no data-dependent branch): the checks
look at shapes and dtypes only.

Why the compiled kernel lives here and not in :mod:`posembed.kernels.rope`: ``compiled=True`` is an
option of :class:`~posembed.schemes.rotary.rope.RotaryEmbedding`, and schemes sit below ``fused`` in
the layering (they never import it). Since the kernel is nothing but ``torch.compile`` of this
module's formula, it needs nothing from ``fused``; :mod:`posembed.kernels.rope` re-exports it as the
public fast-path API. The compiler's state is one explicit, cached object
(:func:`compiled_rotation`); a compile failure is recorded on it, logged once, and every later
call takes the eager formula.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import torch
from torch import Tensor

from posembed._utils.logging import log_once
from posembed._utils.memory import advise_huge_pages
from posembed._utils.torch_private import cpp_compiler

__all__ = [
    "COMPILED_DTYPES", "ROPE_CHANNELS", "ROPE_DIRECTIONS", "ROPE_LAYOUTS", "CompiledRotation", "apply_rotary",
    "apply_rotary_placed", "check_placement", "check_rotation", "compile_available",
    "compiled_by_default", "compiled_rotation", "rotate_in_float32", "rotate_reference", "rotate_with",
]  # fmt: skip

logger = logging.getLogger(__name__)

#: RoPE channel layouts: pairs ``(i, i + r/2)`` (GPT-NeoX, Hugging Face) or ``(2i, 2i + 1)`` (GPT-J, Meta)
ROPE_LAYOUTS: tuple[str, ...] = ("half", "interleaved")

#: which way a pair turns: ``"forward"`` ``(x1 cos - x2 sin, x2 cos + x1 sin)`` (Su et al.; transformers'
#: ``rotate_half``), ``"reversed"`` ``(x1 cos + x2 sin, x2 cos - x1 sin)`` (NanoChat's ``cat(x2, -x1)``)
ROPE_DIRECTIONS: tuple[str, ...] = ("forward", "reversed")
#: which channels of a head a partial rotary rotates: the first ``r`` (GPT-NeoX, Phi) or the last ``r`` (DeepSeek-V4)
ROPE_CHANNELS: tuple[str, ...] = ("first", "last")

#: input dtypes the compiled kernel rotates (half precision widened to float32 inside the kernel)
COMPILED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16, torch.float16)
_HALF = (torch.bfloat16, torch.float16)

Kernel = Callable[[Tensor, Tensor, Tensor, str], Tensor]


def check_rotation(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> None:
    """The arguments of a rotation fit: a known layout, cos and sin alike, at most ``D / 2`` wide."""
    if layout not in ROPE_LAYOUTS:
        raise ValueError(f"layout must be one of {ROPE_LAYOUTS}, got {layout!r}")
    if cos.shape != sin.shape or 2 * cos.shape[-1] > x.shape[-1]:
        raise ValueError(
            f"cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must share a shape whose last dim "
            f"is at most half of x's last dim {x.shape[-1]}"
        )


def _pairs(t: Tensor, half_dim: int, layout: str) -> tuple[Tensor, Tensor]:
    """The two members of every rotated pair, as views of ``t``."""
    if layout == "half":
        return t[..., :half_dim], t[..., half_dim : 2 * half_dim]
    pairs = t[..., : 2 * half_dim].unflatten(-1, (half_dim, 2))  # (..., r/2, 2)
    return pairs[..., 0], pairs[..., 1]


def rotate_reference(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "half", *, out: Tensor | None = None) -> Tensor:
    """The rotation formula, plain PyTorch: ``(x1 cos - x2 sin, x2 cos + x1 sin)`` for every pair.

    Args:
        x: queries or keys; the first ``r = 2 * cos.shape[-1]`` channels are rotated, the rest
            pass through (partial rotary).
        cos, sin: ``cos(m * theta_i)``, ``sin(m * theta_i)``, broadcastable to ``x[..., :r/2]``,
            in ``x``'s dtype.
        layout: ``"half"`` (pairs ``(i, i + r/2)``) or ``"interleaved"`` (pairs ``(2i, 2i + 1)``).
        out: a buffer shaped like ``x`` to write into (no autograd then). ``None``: a new tensor,
            differentiable in everything, and what ``torch.compile`` traces.

    Shape:
        x ``(B, H, T, D)`` (any leading dims); cos, sin ``(T, r/2)`` or ``(B, 1, T, r/2)``;
        output like ``x``.

    >>> rotate_reference(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0]]), torch.tensor([[1.0]]))
    tensor([[0., 1.]])
    """
    half = cos.shape[-1]
    x1, x2 = _pairs(x, half, layout)
    o1, o2 = (None, None) if out is None else _pairs(out, half, layout)
    r1 = torch.mul(x1, cos, out=o1).addcmul_(x2, sin, value=-1.0)  # x1 cos - x2 sin
    r2 = torch.mul(x2, cos, out=o2).addcmul_(x1, sin)  # x2 cos + x1 sin
    rest = x[..., 2 * half :]
    if out is not None:
        if rest.shape[-1]:
            out[..., 2 * half :].copy_(rest)
        return out
    rotated = torch.cat((r1, r2), -1) if layout == "half" else torch.stack((r1, r2), -1).flatten(-2)
    return torch.cat((rotated, rest), -1) if rest.shape[-1] else rotated


def rotate_in_float32(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "half") -> Tensor:
    """The formula with a half-precision ``x`` widened to float32 and the result rounded back once.

    What the compiled kernel traces: Inductor fuses the widening, the rotation and the rounding
    into one loop that reads and writes ``x``'s dtype. ``cos``/``sin`` are float32 (the exact
    angles are never rounded to half precision). For float32 ``x`` this is
    :func:`rotate_reference`.

    >>> x = torch.tensor([[1.0, 0.0]], dtype=torch.bfloat16)
    >>> rotate_in_float32(x, torch.tensor([[0.0]]), torch.tensor([[1.0]]))
    tensor([[0., 1.]], dtype=torch.bfloat16)
    """
    work = x.float() if x.dtype in _HALF else x
    return rotate_reference(work, cos, sin, layout).to(x.dtype)


def _eager(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """The formula written into a fresh buffer that faults in huge pages where the kernel allows.

    A half-precision ``x`` (only the compiled kernel's fallback passes one) is rotated in
    float32 and rounded back once, as :func:`apply_rotary`'s eager path does.
    """
    if x.dtype in _HALF:
        return _eager(x.float(), cos.float(), sin.float(), layout).to(x.dtype)
    out = torch.empty_like(x)
    advise_huge_pages(out)
    return rotate_reference(x, cos, sin, layout, out=out)


class _Rotation(torch.autograd.Function):
    """A rotation by ``kernel`` as one linear map: the gradient is the inverse rotation of the gradient."""

    @staticmethod
    def forward(ctx, x: Tensor, cos: Tensor, sin: Tensor, layout: str, kernel: Kernel) -> Tensor:
        ctx.save_for_backward(cos, sin)
        ctx.layout, ctx.kernel = layout, kernel
        return kernel(x, cos, sin, layout)

    @staticmethod
    def backward(ctx, grad: Tensor):
        cos, sin = ctx.saved_tensors  # double backward: the inverse rotation is again a _Rotation
        # ``grad`` as it comes: a copy to a dense tensor (the gradient of a sum is one expanded
        # scalar) would cost a pass over fresh, page-faulting memory (issue 27: 1.7x on the CPU)
        return rotate_with(ctx.kernel, grad, cos, -sin, ctx.layout), None, None, None, None


def rotate_with(kernel: Kernel, x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """Run ``kernel`` (eager or compiled) on fixed angles, through :class:`_Rotation` when ``x`` needs a gradient."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _Rotation.apply(x, cos, sin, layout, kernel)
    return kernel(x, cos, sin, layout)


@functools.cache
def compile_available(device_type: str = "cpu") -> bool:
    """Whether ``torch.compile`` can build kernels for ``device_type`` here.

    ``"cpu"``: Inductor's C++ compiler is present; ``"cuda"``: a CUDA device and Triton are.
    Cheap: nothing is compiled. If compiling still fails later, :class:`CompiledRotation` logs
    it once and falls back to the eager formula.

    >>> compile_available("meta")
    False
    """
    try:
        if device_type == "cuda":
            from torch.utils._triton import has_triton

            return torch.cuda.is_available() and has_triton()
        if device_type != "cpu":
            return False
        return cpp_compiler() is not None
    except Exception as error:  # no Inductor, no C++ compiler, no Triton, unsupported platform, ...
        logger.info("compiled RoPE kernel unavailable on %s (%s); the eager formula is used", device_type, error)
        return False


def _compile_reference() -> Kernel:
    return torch.compile(rotate_in_float32, dynamic=None, fullgraph=True)


class CompiledRotation:
    """``torch.compile`` of :func:`rotate_in_float32`, built on first use; eager after a failure.

    Args:
        build: makes the compiled callable (default: ``torch.compile`` of the reference); tests
            pass one that fails.

    Attributes:
        error: the compile error, once one happened (``None`` before); from then on every call
            runs the eager formula.

    >>> rotation = CompiledRotation(build=lambda: _eager)
    >>> rotation(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0]]), torch.tensor([[1.0]]), "half")
    tensor([[0., 1.]])
    """

    def __init__(self, build: Callable[[], Kernel] = _compile_reference) -> None:
        self._build = build
        self._kernel: Kernel | None = None
        self.error: str | None = None

    def __call__(self, x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
        if self.error is None:
            try:
                if self._kernel is None:
                    self._kernel = self._build()
                return self._kernel(x, cos, sin, layout)
            except Exception as error:  # a compile failure: record it, log once, stay correct
                self.error = str(error)
                log_once(logger, f"compiling the RoPE kernel failed ({error}); using the eager formula")
        return _eager(x, cos, sin, layout)


@functools.cache
def compiled_rotation() -> CompiledRotation:
    """The process-wide compiled kernel (one compile cache, one failure record)."""
    return CompiledRotation()


def compiled_by_default(device: torch.device) -> bool:
    """The device policy for ``compiled=None``: whether the compiled kernel is the default on ``device``.

    CUDA: yes (the eager formula is several passes over memory per tensor there). The CPU and
    anything else: no (the eager formula is what the CPU benchmarks and the lab's bit-for-bit
    runs measured; ``compiled=True`` still opts in).

    >>> compiled_by_default(torch.device("cpu")), compiled_by_default(torch.device("cuda"))
    (False, True)
    """
    return device.type == "cuda"


def _compiled_applies(x: Tensor, compiled: bool | None) -> bool:
    """Whether the compiled kernel rotates ``x``: asked for (or the device's default) and able to.

    A reason not to is logged once when ``compiled=True`` asked for the kernel; under the device
    default the fallback is silent (nothing was asked)."""
    if compiled is None:
        if not compiled_by_default(x.device):
            return False
    elif not compiled:
        return False
    reason = None
    if x.dtype not in COMPILED_DTYPES:
        reason = f"compiled RoPE covers float32, bfloat16 and float16 inputs, got {x.dtype}; rotating eagerly"
    elif not compile_available(x.device.type):
        device = x.device.type
        reason = f"compiled RoPE requested, but torch.compile cannot build {device} kernels here; rotating eagerly"
    if reason is not None and compiled:
        log_once(logger, reason)
    return reason is None


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "half", *, compiled: bool | None = None) -> Tensor:
    """Rotate the first ``2 * cos.shape[-1]`` channels of ``x``; the rest pass through.

    The one dispatch point of the rotation. Half-precision inputs are rotated in float32 and
    rounded back once. Gradients flow to ``x`` (and to ``cos``/``sin`` when they require them).
    Under ``torch.compile``, and for learned angles, the plain formula is traced; otherwise the
    eager formula or its compiled kernel runs, with the inverse rotation as backward. The compiled
    kernel covers float32, bfloat16 and float16 inputs with fixed angles (float32 inside); for
    anything else, or where it cannot be built, the eager formula runs.

    Args:
        x: queries or keys.
        cos, sin: float32 (any float dtype), broadcastable to ``x[..., :r/2]``.
        layout: ``"half"`` (pairs ``(i, i + r/2)``) or ``"interleaved"`` (pairs ``(2i, 2i+1)``).
        compiled: ``True``: the compiled kernel where it applies (a fallback is logged once);
            ``False``: the eager formula; ``None`` (default): the device's policy,
            :func:`compiled_by_default` (compiled on CUDA, eager on the CPU).

    Shape:
        - x: ``(..., T, D)``; cos, sin: ``(T, r/2)`` or ``(B, 1, T, r/2)`` with ``r <= D``.
        - output: same shape and dtype as ``x``.

    >>> x = torch.tensor([[1.0, 0.0]])
    >>> apply_rotary(x, torch.tensor([[0.0]]), torch.tensor([[1.0]]))  # 90 degrees
    tensor([[0., 1.]])
    """
    check_rotation(x, cos, sin, layout)
    compiling = torch.compiler.is_compiling()  # the outer compiler fuses the plain formula
    learned = torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad)  # autograd traces it
    if not (compiling or learned) and _compiled_applies(x, compiled):  # x's dtype in and out, float32 inside
        return rotate_with(compiled_rotation(), x, cos.to(torch.float32), sin.to(torch.float32), layout)
    if learned and compiled and not compiling:
        log_once(logger, "compiled RoPE covers fixed angles (cos/sin without gradient); rotating eagerly")
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    cos, sin = cos.to(work.dtype), sin.to(work.dtype)
    if compiling or learned:
        return rotate_reference(work, cos, sin, layout).type_as(x)
    return rotate_with(_eager, work, cos, sin, layout).type_as(x)


def check_placement(direction: str, channels: str) -> tuple[str, str]:
    """``direction`` in :data:`ROPE_DIRECTIONS` and ``channels`` in :data:`ROPE_CHANNELS`, else a ``ValueError``."""
    if direction not in ROPE_DIRECTIONS:
        raise ValueError(f"direction must be one of {ROPE_DIRECTIONS}, got {direction!r}")
    if channels not in ROPE_CHANNELS:
        raise ValueError(f"channels must be one of {ROPE_CHANNELS}, got {channels!r}")
    return direction, channels


def apply_rotary_placed(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str = "half",
    *,
    direction: str = "forward",
    channels: str = "first",
    compiled: bool | None = None,
) -> Tensor:
    """:func:`apply_rotary` with the turn's direction and the rotated channels' place as settings.

    ``direction="reversed"`` turns every pair by the negated angle (NanoChat rotates
    ``x cos + cat(x2, -x1) sin``); ``channels="last"`` rotates the last ``r = 2 * cos.shape[-1]``
    channels and passes the first ``D - r`` through (DeepSeek-V4's ``[nope | rope]`` heads). The
    defaults are :func:`apply_rotary` itself.

    Shape: as :func:`apply_rotary`.

    >>> x = torch.tensor([[1.0, 0.0, 5.0, 0.0]])
    >>> apply_rotary_placed(x, torch.tensor([[0.0]]), torch.tensor([[1.0]]), direction="reversed", channels="last")
    tensor([[ 1.,  0.,  0., -5.]])
    """
    check_placement(direction, channels)
    if direction == "reversed":
        sin = -sin
    rotated = 2 * cos.shape[-1]
    if channels == "first" or rotated >= x.shape[-1]:
        return apply_rotary(x, cos, sin, layout, compiled=compiled)
    check_rotation(x, cos, sin, layout)
    tail = apply_rotary(x[..., -rotated:], cos, sin, layout, compiled=compiled)
    return torch.cat((x[..., :-rotated], tail), -1)
