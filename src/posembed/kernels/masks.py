"""The masking rule of every attention path, defined once, in the two forms they need.

A query ``i`` may attend to key ``j`` when ``j`` is a real token (the key padding mask) and,
if causal, ``j <= i``; a query always sees its own index, so that no row is fully masked
(outputs at padding positions stay finite; callers ignore them).

- :func:`visible_keys` materialises the rule as a boolean tensor (eager, SDPA, chunked and
  the fused kernel, one block of query rows at a time);
- :func:`visibility_mod` returns it as a FlexAttention ``mask_mod`` (no ``T x T`` tensor).

Both are pure functions: the attention kernels (:mod:`posembed.kernels.attention`) and the
dispatcher (:mod:`posembed.nn.attention.backends`) import them from here, never each other.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["visible_keys", "visibility_mod"]

#: FlexAttention mask modifier ``(b, h, q_idx, kv_idx) -> bool``.
MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


def visible_keys(q_idx: Tensor, num_keys: int, causal: bool, key_mask: Tensor | None) -> Tensor:
    """May query ``q_idx[r]`` see key ``j < num_keys``? (the rule in the module docstring).

    Shape:
        q_idx ``(r,)`` query indices; key_mask ``(B, >= num_keys)`` bool (True = real token)
        or ``None`` -> ``(B|1, 1, r, num_keys)`` bool.

    >>> visible_keys(torch.arange(3), 3, True, torch.tensor([[True, False, True]]))[0, 0].int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 0, 1]], dtype=torch.int32)
    """
    k_idx = torch.arange(num_keys, device=q_idx.device)
    if causal:
        allowed = k_idx[None, :] <= q_idx[:, None]  # (r, num_keys)
    else:
        allowed = torch.ones(q_idx.shape[0], num_keys, dtype=torch.bool, device=q_idx.device)
    allowed = allowed[None, None]  # (1, 1, r, num_keys)
    if key_mask is not None:
        allowed = allowed & key_mask[:, None, None, :num_keys]  # (B, 1, r, num_keys)
    return allowed | (k_idx[None, :] == q_idx[:, None])


def visibility_mod(causal: bool, key_mask: Tensor | None) -> MaskMod:
    """The same rule as a FlexAttention ``mask_mod``; ``key_mask`` ``(B, T)`` bool or ``None``.

    >>> mod = visibility_mod(True, None)
    >>> bool(mod(0, 0, torch.tensor(1), torch.tensor(2))), bool(mod(0, 0, torch.tensor(2), torch.tensor(1)))
    (False, True)
    """

    def mask_mod(b, h, q_idx, kv_idx):
        allowed = kv_idx <= q_idx if causal else q_idx >= 0
        if key_mask is not None:
            allowed = allowed & key_mask[b, kv_idx]
        return allowed | (q_idx == kv_idx)

    return mask_mod
