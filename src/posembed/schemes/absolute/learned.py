"""Learned absolute positions: a trained table with one vector per position.

Two spellings of the same thing, shown equivalent in the tests:

- :class:`LearnedAbsolute`, an ``nn.Embedding`` table, as BERT / GPT-2
  (Devlin et al. 2019, the Hugging Face ``position_embeddings`` module);
- :class:`LearnedParameter`, a bare ``nn.Parameter`` of shape ``(max_len, C)``, as ViT
  (Dosovitskiy et al. 2021) and the seed question "is it that simple?" — it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from posembed._utils.checks import check_index_tensor, check_positive_int, check_table_size
from posembed.schemes.base import AbsoluteScheme

__all__ = ["LearnedAbsolute", "LearnedParameter"]


def _limit_hint(scheme: _LearnedTable) -> str:
    return (
        f"a learned table has exactly max_len={scheme.max_len} rows. Ways out: a scheme without a length "
        f"limit (posembed.Sinusoidal, a rotary or bias scheme), or interpolate the table to more rows "
        f"({type(scheme).__name__}.resized(new_len))"
    )


def _interpolated_table(weight: Tensor, new_len: int) -> Tensor:
    """``weight`` ``(max_len, C)`` linearly interpolated to ``(new_len, C)``, ends kept.

    Position interpolation of a learned table: row ``i`` of the result sits at position
    ``i * (max_len - 1) / (new_len - 1)`` of the old table. The math is fp32 for half-precision
    tables (fp64 tables stay fp64).
    """
    check_positive_int(new_len, "new_len")
    work = torch.promote_types(weight.dtype, torch.float32)
    table = weight.detach().t().unsqueeze(0).to(work)  # (1, C, max_len)
    resized = nn.functional.interpolate(table, size=new_len, mode="linear", align_corners=True)  # (1, C, new_len)
    return resized.squeeze(0).t()  # (new_len, C)


class _LearnedTable(AbsoluteScheme):
    """Shared body of :class:`LearnedAbsolute` and :class:`LearnedParameter`: sizes, limit, checks
    and resizing; each subclass keeps the ``(max_len, C)`` table ``weight`` its own way."""

    extrapolates = False
    has_length_limit = True

    if TYPE_CHECKING:
        # For the type checker only: a property here would clash with LearnedParameter's
        # ``weight`` parameter (nn.Module refuses to register over an existing attribute).
        @property
        def weight(self) -> Tensor:
            """The ``(max_len, C)`` table."""
            ...

    def __init__(self, max_len: int, dim: int, init_std: float, device, dtype) -> None:
        super().__init__()
        self.max_len = check_positive_int(max_len, "max_len")
        self.dim = check_positive_int(dim, "dim")
        self.init_std = init_std
        check_table_size(max_len, dim, "the position table (max_len, dim)", device, dtype)

    @property
    def max_positions(self) -> int:
        return self.max_len

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, std=self.init_std)

    @property
    def lookup_table(self) -> Tensor:
        return self.weight

    def check_position_ids(self, position_ids: Tensor) -> None:
        check_index_tensor(position_ids, "position_ids", self.max_len, _limit_hint(self))

    def resized(self, new_len: int) -> _LearnedTable:
        """A copy, same class, whose table is linearly interpolated to ``new_len`` rows (position interpolation).

        >>> LearnedAbsolute(8, 4).resized(15).max_positions
        15
        >>> LearnedParameter(8, 4).resized(15).weight.shape
        torch.Size([15, 4])
        """
        table, weight = _interpolated_table(self.weight, new_len), self.weight
        new = type(self)(new_len, self.dim, init_std=self.init_std, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            new.weight.copy_(table)
        return new

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}"


class LearnedAbsolute(_LearnedTable):
    """Learned position table as an ``nn.Embedding`` (BERT's ``position_embeddings``).

    Args:
        max_len: number of positions (rows), e.g. 512 for BERT.
        dim: width C of each position vector.
        init_std: std of the normal init (BERT's ``initializer_range``, 0.02).

    Shape:
        - position_ids: ``(T,)`` or ``(B, T)``, values in ``[0, max_len)``.
        - output: ``(T, C)`` or ``(B, T, C)``.

    Example:
        >>> pos = LearnedAbsolute(max_len=512, dim=8)
        >>> pos(torch.arange(4)).shape
        torch.Size([4, 8])
    """

    name = "learned"
    paper = "Gehring et al. 2017; Devlin et al. 2019 (BERT)"

    def __init__(self, max_len: int, dim: int, *, init_std: float = 0.02, device=None, dtype=None) -> None:
        super().__init__(max_len, dim, init_std, device, dtype)
        self.embedding = nn.Embedding(max_len, dim, device=device, dtype=dtype)
        self.reset_parameters()

    @property
    def weight(self) -> Tensor:
        """The ``(max_len, C)`` table."""
        return self.embedding.weight

    def forward(self, position_ids: Tensor) -> Tensor:
        self.check_position_ids(position_ids)
        return self.embedding(position_ids)


class LearnedParameter(_LearnedTable):
    """Learned position table as a bare ``nn.Parameter`` (ViT style).

    Numerically the same as :class:`LearnedAbsolute` given the same table; only the
    parameter's name and the lookup differ (``weight[position_ids]``).

    Args:
        max_len: number of positions (rows).
        dim: width C of each position vector.
        init_std: std of the normal init.

    Shape:
        - position_ids: ``(T,)`` or ``(B, T)``, values in ``[0, max_len)``.
        - output: ``(T, C)`` or ``(B, T, C)``.

    Example:
        >>> pos = LearnedParameter(max_len=16, dim=4)
        >>> pos(torch.tensor([[0, 1], [2, 3]])).shape
        torch.Size([2, 2, 4])
    """

    name = "learned_parameter"
    paper = "Dosovitskiy et al. 2021 (ViT)"
    weight: Tensor  # the (max_len, C) nn.Parameter

    def __init__(self, max_len: int, dim: int, *, init_std: float = 0.02, device=None, dtype=None) -> None:
        super().__init__(max_len, dim, init_std, device, dtype)
        self.weight = nn.Parameter(torch.empty(max_len, dim, device=device, dtype=dtype))
        self.reset_parameters()

    def forward(self, position_ids: Tensor) -> Tensor:
        self.check_position_ids(position_ids)
        return self.weight[position_ids]
