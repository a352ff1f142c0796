"""Dropout keep masks for the fused embedding: drop probability exactly ``p``, cheap bits.

:class:`KeepMask` decides, chunk by chunk, which elements a dropout keeps; the caller scales
the kept values by ``1 / (1 - p)``. :func:`sparse_positions` draws the rare extra drops.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

__all__ = ["KeepMask", "sparse_positions"]


class KeepMask:
    """Dropout keep decisions: each element dropped independently with probability exactly ``p``.

    On CPU an element is dropped when a uniform 16-bit draw ``u`` is below ``t = floor(p * 2**16)``
    (probability ``a = t / 2**16 <= p``) or, independently, with the small probability
    ``e = (p - a) / (1 - a) <= 2**-16 / (1 - a)`` that makes up the rest: ``a + (1 - a) e = p``.
    The second kind is sparse (``e`` is below 1e-4 for ``p <= 0.8``), so its positions are drawn
    directly, as geometric gaps, instead of deciding every element twice. Kept values are scaled by exactly
    ``1 / (1 - p)``, as ``nn.Dropout``: the expectation is kept.

    Four 16-bit draws come out of every 64-bit random number (``bernoulli_`` draws one random
    number per element and costs about 4x more). The bits come from numpy's SFC64 seeded by
    one draw of torch's default generator (so ``torch.manual_seed`` makes a run reproducible),
    and the comparison from numpy's vectorised ``greater_equal``. Off the CPU, torch draws 32
    bits per element against ``round(p * 2**32)`` (within 2**-33 of ``p``). Either stream is
    its own: for the same seed the masks differ from ``nn.Dropout``'s.
    """

    def __init__(self, p: float, device: torch.device) -> None:
        self.p = p
        self.threshold = min(math.floor(p * 65536), 65535)  # 16-bit draws below it drop
        covered = self.threshold / 65536
        #: probability of the sparse extra drops among the elements the threshold keeps
        self.extra = (p - covered) / (1.0 - covered)
        self.generator = None
        if device.type == "cpu":
            seed = int(torch.empty((), dtype=torch.int64).random_(generator=torch.default_generator))
            self.generator = np.random.Generator(np.random.SFC64(seed))

    def fill(self, mask: Tensor, scratch) -> None:
        """Fill the bool ``mask`` (any shape, contiguous) with keep decisions.

        ``scratch.get(name, shape, like, dtype)`` lends a reusable buffer (the fused embedding's
        per-thread chunk buffers) for the random bits off the CPU.
        """
        count = mask.numel()
        if self.generator is None:
            bits = scratch.get("bits", ((count + 1) // 2,), mask, torch.int64).random_(-(2**63), 2**63 - 1)
            limit = min(round(self.p * 2**32), 2**32 - 1) - 2**31
            torch.ge(bits.view(torch.int32)[:count].view_as(mask), limit, out=mask)
            return
        keep = mask.numpy().reshape(-1)
        raw = self.generator.bit_generator.random_raw((count + 3) // 4).view(np.int16)[:count]
        np.greater_equal(raw, self.threshold - 32768, out=keep)  # signed view of u >= threshold
        if self.extra > 0.0:
            keep[sparse_positions(self.generator, self.extra, count)] = False


def sparse_positions(generator: np.random.Generator, rate: float, count: int) -> np.ndarray:
    """Positions in ``[0, count)`` each chosen independently with probability ``rate`` (small).

    The gaps between chosen positions are geometric; a batch of them is drawn at once (the
    expected number plus a margin) and topped up in the rare case it falls short.

    >>> gen = np.random.Generator(np.random.SFC64(0))
    >>> picks = sparse_positions(gen, 0.01, 10**6)
    >>> bool(np.all(np.diff(picks) > 0)), 9000 < picks.size < 11000
    (True, True)
    """
    batch = int(count * rate + 6 * math.sqrt(count * rate)) + 8
    positions = np.cumsum(generator.geometric(rate, size=batch)) - 1
    while positions[-1] < count:
        more = np.cumsum(generator.geometric(rate, size=batch)) + positions[-1]
        positions = np.concatenate([positions, more])
    return positions[positions < count]
