"""Convert q/k projection weights between the two RoPE channel layouts.

A checkpoint trained with one layout runs with the other once the rows of its query and key
projections are permuted within each head:

- interleaved (Meta, GPT-J): rotated pairs are channels ``(2i, 2i+1)``;
- half (Hugging Face, GPT-NeoX): rotated pairs are channels ``(i, i + r/2)``.

:func:`interleaved_to_half_qk_weight` is the permutation Hugging Face's
``convert_llama_weights_to_hf`` applies to Meta checkpoints; :func:`half_to_interleaved_qk_weight`
is its inverse. Value and output projections are not touched. With partial rotary only the first
``rotary_dim`` rows of each head move.
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed._utils.checks import check_positive_int

__all__ = ["half_to_interleaved_qk_weight", "interleaved_to_half_qk_weight"]


def _check(weight: Tensor, num_heads: int, head_dim: int, rotary_dim: int | None) -> int:
    check_positive_int(num_heads, "num_heads")
    check_positive_int(head_dim, "head_dim")
    rotary_dim = head_dim if rotary_dim is None else check_positive_int(rotary_dim, "rotary_dim")
    if rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"rotary_dim must be even and <= head_dim={head_dim}, got {rotary_dim}")
    if weight.dim() not in (1, 2) or weight.shape[0] != num_heads * head_dim:
        raise ValueError(
            f"weight has shape {tuple(weight.shape)}; expected (num_heads * head_dim, ...) = "
            f"({num_heads * head_dim}, ...) rows for num_heads={num_heads}, head_dim={head_dim}"
        )
    return rotary_dim


def _permute(weight: Tensor, num_heads: int, head_dim: int, rotary_dim: int, to_half: bool) -> Tensor:
    rest = weight.shape[1:]
    heads = weight.reshape(num_heads, head_dim, *rest)  # (H, D, ...)
    rot, passed = heads[:, :rotary_dim], heads[:, rotary_dim:]
    if to_half:  # (2i, 2i+1) -> (i, i + r/2)
        rot = rot.reshape(num_heads, rotary_dim // 2, 2, *rest).transpose(1, 2)  # (H, 2, r/2, ...)
    else:  # (i, i + r/2) -> (2i, 2i+1)
        rot = rot.reshape(num_heads, 2, rotary_dim // 2, *rest).transpose(1, 2)  # (H, r/2, 2, ...)
    rot = rot.reshape(num_heads, rotary_dim, *rest)
    return torch.cat((rot, passed), dim=1).reshape(weight.shape)


def interleaved_to_half_qk_weight(
    weight: Tensor, num_heads: int, head_dim: int, *, rotary_dim: int | None = None
) -> Tensor:
    """Rows of a q or k projection (weight ``(H*D, C)`` or bias ``(H*D,)``) from interleaved to half layout.

    >>> interleaved_to_half_qk_weight(torch.arange(4.0), num_heads=1, head_dim=4)
    tensor([0., 2., 1., 3.])
    """
    rotary_dim = _check(weight, num_heads, head_dim, rotary_dim)
    return _permute(weight, num_heads, head_dim, rotary_dim, to_half=True)


def half_to_interleaved_qk_weight(
    weight: Tensor, num_heads: int, head_dim: int, *, rotary_dim: int | None = None
) -> Tensor:
    """Rows of a q or k projection from half to interleaved layout (inverse of the above).

    >>> half_to_interleaved_qk_weight(torch.tensor([0.0, 2.0, 1.0, 3.0]), num_heads=1, head_dim=4)
    tensor([0., 1., 2., 3.])
    """
    rotary_dim = _check(weight, num_heads, head_dim, rotary_dim)
    return _permute(weight, num_heads, head_dim, rotary_dim, to_half=False)
