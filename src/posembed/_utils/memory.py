"""Fewer page faults for large fresh CPU tensors: ask the kernel for transparent huge pages.

glibc hands blocks over its mmap threshold (at most 32 MiB) straight to the kernel, and every
4 KiB page of such a block faults on first touch: filling a fresh (32 * 512, 768) fp32 tensor
here costs ~19 ms, of which ~15 ms are page faults. Where transparent huge pages are in
``madvise`` mode (``/sys/kernel/mm/transparent_hugepage/enabled``), ``madvise(MADV_HUGEPAGE)``
on the untouched block lets the kernel fault it in 2 MiB at a time (~4 ms). Elsewhere (another
OS, THP off, no libc) :func:`advise_huge_pages` does nothing: it only ever changes speed.

``POSEMBED_HUGE_PAGES=0`` in the environment (or :func:`huge_pages` ``(False)`` around a block)
turns the advice off, e.g. to measure what it buys or where resident memory is tight.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from torch import Tensor

from posembed._utils.devices import cpu_tuned

__all__ = ["advise_huge_pages", "huge_pages", "transparent_huge_pages", "HUGE_PAGE", "MIN_BYTES"]

logger = logging.getLogger(__name__)

HUGE_PAGE = 2 << 20
#: tensors smaller than this are left alone (they come from the heap, already faulted in)
MIN_BYTES = 8 << 20
_MADV_HUGEPAGE = 14
_THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"
_enabled = os.environ.get("POSEMBED_HUGE_PAGES", "1") != "0"


@contextlib.contextmanager
def huge_pages(enabled: bool) -> Iterator[None]:
    """Give (or withhold) the huge-page advice inside the block (process-wide), then restore it."""
    global _enabled
    before, _enabled = _enabled, bool(enabled)
    try:
        yield
    finally:
        _enabled = before


def transparent_huge_pages() -> str:
    """The kernel's THP mode (``always``, ``madvise``, ``never``), or ``unknown``."""
    try:
        text = Path(_THP_MODE).read_text()
    except OSError:
        return "unknown"
    chosen = [word[1:-1] for word in text.split() if word.startswith("[")]
    return chosen[0] if chosen else "unknown"


@functools.cache
def _madvise():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError) as error:  # pragma: no cover - exotic libc
        logger.info("madvise unavailable (%s); large tensors fault in 4 KiB pages", error)
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


def advise_huge_pages(tensor: Tensor) -> bool:
    """Advise huge pages for the 2 MiB-aligned interior of ``tensor``'s fresh CPU storage.

    Call it right after ``torch.empty`` and before the first write. Returns whether the advice
    was given (False for small, non-CPU tensors or where ``madvise`` is unavailable).

    >>> import torch
    >>> advise_huge_pages(torch.empty(4))
    False
    """
    size = tensor.numel() * tensor.element_size()
    madvise = _madvise()
    if not _enabled or madvise is None or not cpu_tuned(tensor.device) or size < MIN_BYTES:
        return False
    start = tensor.data_ptr()
    first = (start + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
    last = (start + size) & ~(HUGE_PAGE - 1)
    return last > first and madvise(first, last - first, _MADV_HUGEPAGE) == 0
