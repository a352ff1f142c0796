"""Dropout keep masks for the fused embedding: drop probability exactly ``p``, cheap bits.

:class:`KeepMask` decides, chunk by chunk, which elements a dropout keeps; the caller scales
the kept values by ``1 / (1 - p)``. :func:`sparse_positions` draws the rare extra drops.
"""

from __future__ import annotations

import math

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
    number per element and costs more). Every bit comes from torch's default generator
    (``random_`` and ``geometric_``), so ``torch.manual_seed`` governs the masks and
    ``torch.random.fork_rng`` isolates them. Off the CPU, 32 bits per element are compared with
    ``round(p * 2**32)`` (within 2**-33 of ``p``). Either stream is its own: for the same seed
    the masks differ from ``nn.Dropout``'s (:class:`~posembed.nn.embedding.block.TransformerEmbeddings`
    applies its own ``dropout`` module instead).
    """

    def __init__(self, p: float, device: torch.device) -> None:
        self.p = p
        self.threshold = min(math.floor(p * 65536), 65535)  # 16-bit draws below it drop
        covered = self.threshold / 65536
        #: probability of the sparse extra drops among the elements the threshold keeps
        self.extra = (p - covered) / (1.0 - covered)
        self.cpu = device.type == "cpu"

    def fill(self, mask: Tensor, scratch) -> None:
        """Fill the bool ``mask`` (any shape, contiguous) with keep decisions.

        ``scratch.get(name, shape, like, dtype)`` lends a reusable buffer (the fused embedding's
        per-thread chunk buffers) for the random bits.
        """
        count = mask.numel()
        per_draw = 4 if self.cpu else 2  # 16-bit draws on the CPU, 32-bit ones elsewhere
        bits = scratch.get("bits", ((count + per_draw - 1) // per_draw,), mask, torch.int64)
        bits.random_(-(2**63), 2**63 - 1)
        if not self.cpu:
            limit = min(round(self.p * 2**32), 2**32 - 1) - 2**31
            torch.ge(bits.view(torch.int32)[:count].view_as(mask), limit, out=mask)
            return
        torch.ge(bits.view(torch.int16)[:count].view_as(mask), self.threshold - 32768, out=mask)  # u >= threshold
        if self.extra > 0.0:
            mask.view(-1)[sparse_positions(self.extra, count, mask.device)] = False


def sparse_positions(rate: float, count: int, device: torch.device | str = "cpu") -> Tensor:
    """Positions in ``[0, count)`` each chosen independently with probability ``rate`` (small),
    drawn from torch's default generator.

    The gaps between chosen positions are geometric; a batch of them is drawn at once (the
    expected number plus a margin) and topped up in the rare case it falls short.

    >>> _ = torch.manual_seed(0)
    >>> picks = sparse_positions(0.01, 10**6)
    >>> bool(torch.all(picks.diff() > 0)), 9000 < picks.numel() < 11000
    (True, True)
    """
    batch = int(count * rate + 6 * math.sqrt(count * rate)) + 8
    positions = _gaps(rate, batch, device).cumsum(0) - 1
    while positions[-1] < count:
        positions = torch.cat([positions, _gaps(rate, batch, device).cumsum(0) + positions[-1]])
    return positions[positions < count]


def _gaps(rate: float, size: int, device) -> Tensor:
    """``size`` geometric gaps (trials to the first success, at least 1) at ``rate``, as int64."""
    return torch.empty(size, dtype=torch.float64, device=device).geometric_(rate).long()
