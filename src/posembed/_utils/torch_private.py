"""Every private PyTorch API posembed uses, each checked before use and backed by a public path.

posembed's speed leans on a few PyTorch internals. Nothing else in the package touches them:
each is reached only through this module, which checks that the symbol exists (and, where
arguments are passed by position, that its schema names them as expected) and otherwise runs
the public path that computes the same thing, logged once at INFO.

================================ =================================== ==============================================
private API                      used for                            public fallback
================================ =================================== ==============================================
``aten._scaled_dot_product_``    one bias-attention query block      :func:`flash_cpu_ops` is ``None``: the caller's
``flash_attention_for_cpu``      (forward and backward) on the CPU   own matmul + logsumexp path
(and ``_backward``)
``aten.native_layer_norm_``      the fused embedding's chunk         autograd through ``F.layer_norm``
``backward``                     backward                            (:func:`layer_norm_backward`)
``torch._dynamo.config``         room for compiled FlexAttention's   none needed: a torch without the settings
``recompile_limit``              graphs, *only while it is called*   compiles with its own limits
                                 (:func:`recompile_limits`)
``torch._inductor.cpp_builder``  is a C++ compiler there?            a ``c++`` / ``g++`` / ``clang++`` / ``$CXX`` on
                                 (:func:`cpp_compiler`)              ``PATH``
``torch._inductor`` cache dir    one compile cache for a sweep       ``$TORCHINDUCTOR_CACHE_DIR`` or ``None``
and config                       (:func:`inductor_cache_dir`,
                                 :func:`inductor_caches_off`)
``nn.modules.module._global_*``  are global module hooks set?        assume they are (the module path runs)
``_hooks``                       (:func:`has_hooks`)
================================ =================================== ==============================================

Tested against torch 2.13.0, the only torch installed where the tests run: each fallback has a
test that removes the private symbol and compares the public path with the private one over the
whole tensor (``tests/test_torch_private.py``). pyproject claims ``torch>=2.4``; the names this
module looks for are the ones torch 2.4 already had, and the renamed dynamo limits
(``cache_size_limit`` before torch 2.6, ``recompile_limit`` after) are read under either name.
That older torches run the fallbacks correctly is argued from their public API, not tested here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
from collections.abc import Iterator

import torch
from torch import Tensor, nn

__all__ = [
    "flash_cpu_ops",
    "layer_norm_backward",
    "recompile_limits",
    "cpp_compiler",
    "inductor_cache_dir",
    "inductor_caches_off",
    "has_hooks",
]

logger = logging.getLogger(__name__)

#: argument names the flash CPU ops must take, in order (they are passed by position up to ``is_causal``)
_FLASH_ARGS = ("query", "key", "value", "dropout_p", "is_causal", "attn_mask", "scale")
_FLASH_BACKWARD_ARGS = (
    "grad_out",
    "query",
    "key",
    "value",
    "out",
    "logsumexp",
    "dropout_p",
    "is_causal",
    "attn_mask",
    "scale",
)
_LAYER_NORM_BACKWARD_ARGS = ("grad_out", "input", "normalized_shape", "mean", "rstd", "weight", "bias", "output_mask")


def _aten_op(name: str, arguments: tuple[str, ...]):
    """``torch.ops.aten.<name>`` when it exists with exactly ``arguments``; else ``None`` (logged once)."""
    try:
        op = getattr(torch.ops.aten, name)
        found = tuple(argument.name for argument in op.default._schema.arguments)
    except (AttributeError, RuntimeError) as error:
        logger.info("torch %s has no aten.%s (%s): posembed uses the public path", torch.__version__, name, error)
        return None
    if found != arguments:
        logger.info(
            "torch %s's aten.%s takes %s, not %s: posembed uses the public path",
            torch.__version__,
            name,
            found,
            arguments,
        )
        return None
    return op


@functools.cache
def flash_cpu_ops():
    """``(forward, backward)`` of PyTorch's fused CPU attention kernel, or ``None`` where this torch
    lacks either (or names their arguments otherwise); the caller then computes the blocks itself."""
    forward = _aten_op("_scaled_dot_product_flash_attention_for_cpu", _FLASH_ARGS)
    backward = _aten_op("_scaled_dot_product_flash_attention_for_cpu_backward", _FLASH_BACKWARD_ARGS)
    return None if forward is None or backward is None else (forward, backward)


@functools.cache
def _layer_norm_backward_op():
    return _aten_op("native_layer_norm_backward", _LAYER_NORM_BACKWARD_ARGS)


def layer_norm_backward(
    grad: Tensor,
    x: Tensor,
    width: int,
    mean: Tensor,
    rstd: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    mask: list[bool],
    eps: float,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """Gradients ``(dx, dweight, dbias)`` of ``F.layer_norm(x, (width,), weight, bias, eps)`` for ``grad``.

    ``mean``/``rstd`` are the forward's saved statistics (``torch.native_layer_norm``'s); ``mask``
    says which of the three are wanted (``None`` for the others). ATen's
    ``native_layer_norm_backward`` where it exists; otherwise autograd through ``F.layer_norm``,
    which recomputes the statistics (equal up to rounding).
    """
    op = _layer_norm_backward_op()
    if op is not None:
        return op(grad, x, (width,), mean, rstd, weight, bias, mask)
    inputs = [t.detach().requires_grad_(want) if t is not None else None for t, want in zip((x, weight, bias), mask)]
    with torch.enable_grad():
        y = nn.functional.layer_norm(inputs[0], (width,), inputs[1], inputs[2], eps)
        wanted = [t for t, want in zip(inputs, mask) if want and t is not None]
        grads = iter(torch.autograd.grad(y, wanted, grad) if wanted else ())
    return tuple(next(grads) if want and t is not None else None for t, want in zip(inputs, mask))  # type: ignore[return-value]


_LIMIT_NAMES = (
    ("recompile_limit", "cache_size_limit"),
    ("accumulated_recompile_limit", "accumulated_cache_size_limit"),
)


@contextlib.contextmanager
def recompile_limits(limit: int) -> Iterator[None]:
    """Raise dynamo's recompile limits to at least ``limit`` inside the ``with`` block only.

    The settings are global, so they are set on entry and put back on exit (even on an error);
    a limit already higher is left alone. About 10 us (a ``config.patch`` costs ~100 us). A torch
    without the settings (under either name) runs the block unchanged.
    """
    config = getattr(getattr(torch, "_dynamo", None), "config", None)
    saved = {}
    for names in _LIMIT_NAMES:
        name = next((n for n in names if hasattr(config, n)), None)
        if name is not None and getattr(config, name) < limit:
            saved[name] = getattr(config, name)
            setattr(config, name, limit)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(config, name, value)


def cpp_compiler() -> str | None:
    """The C++ compiler Inductor would build CPU kernels with, or ``None`` where there is none.

    Asked of ``torch._inductor.cpp_builder`` where it exists; otherwise the first of ``$CXX``,
    ``c++``, ``g++``, ``clang++`` found on ``PATH``.
    """
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
    except ImportError:
        get_cpp_compiler = None
    if get_cpp_compiler is not None:
        return get_cpp_compiler() or None
    candidates = [os.environ.get("CXX"), "c++", "g++", "clang++"]
    return next((found for name in candidates if name and (found := shutil.which(name))), None)


def inductor_cache_dir() -> str | None:
    """The Inductor cache directory this process compiles into: torch's own answer where it has
    ``cache_dir_utils``, else ``$TORCHINDUCTOR_CACHE_DIR`` (``None`` when unset)."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:
        return os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return cache_dir()


def inductor_caches_off() -> bool:
    """Whether torch is told to keep no compile cache (``force_disable_caches`` or no
    ``fx_graph_cache``); ``False`` where this torch has no Inductor config."""
    try:
        from torch._inductor import config
    except ImportError:
        return False
    return bool(getattr(config, "force_disable_caches", False) or not getattr(config, "fx_graph_cache", True))


_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_HOOKS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)


def has_hooks(*modules: nn.Module) -> bool:
    """Whether any forward/backward hook (or pre-hook) is registered on ``modules`` or globally
    (``nn.modules.module.register_module_forward_hook`` and friends). A torch that keeps them
    under other names counts as hooked, so callers run the modules themselves."""
    from torch.nn.modules import module as module_module

    for name in _GLOBAL_HOOKS:
        hooks = getattr(module_module, name, None)
        if hooks is None or len(hooks):
            return True
    for module in modules:
        for name in _MODULE_HOOKS:
            hooks = getattr(module, name, None)
            if hooks is None or len(hooks):
                return True
    return False
