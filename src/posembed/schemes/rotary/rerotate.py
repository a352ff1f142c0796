"""Re-rotating cached keys: move RoPE-rotated keys to new positions, or to another scheme.

A key cached at position ``m`` carries ``a R(m theta) k`` (``R`` the rotation of every pair,
``a`` the attention factor of YaRN / LongRoPE folded into cos and sin). Moving it to position
``n`` needs no unrotated key: ``a' R(n theta') R(-m theta) / a`` applied to the cached key gives
what recomputing from the unrotated key would (up to the fp32 rounding of the angles, about one
ulp of ``position * inv_freq``). Uses: attention sinks / StreamingLLM (evicting the middle of a
cache shifts later keys down), re-indexing a reused prefix, or a scale switch (moving keys from
one scheme's frequencies to another's, e.g. plain RoPE to YaRN when the context grows).

Each step only uses a scheme's public :meth:`~posembed.schemes.rotary.rope.RotaryEmbedding.cos_sin`
and :func:`~posembed.schemes.rotary.rope.apply_rotary`, so every rotary variant works (plain, linear,
NTK, dynamic NTK, YaRN, Llama 3, LongRoPE, proportional) in both layouts. Dynamic variants
(dynamic NTK, LongRoPE) choose their frequencies from the positions they are given, as their
``forward`` does: ``old_positions`` must be the positions of the call that rotated the keys.

xPos is refused: its keys are scaled by ``zeta^(-m/B)`` per pair, relative to a centre taken
over the whole call, which is not a rotation and cannot be moved pair by pair.
"""

from __future__ import annotations

from torch import Tensor

from posembed.schemes.rotary.rope import RotaryEmbedding, apply_rotary
from posembed.schemes.rotary.xpos import XPos

__all__ = ["rerotate_keys", "rotation_between"]


def _check_scheme(scheme: object, name: str) -> RotaryEmbedding:
    if isinstance(scheme, XPos):
        raise ValueError(
            f"{name} is XPos: its keys are scaled by zeta^(-m/B) around a centre taken over the whole call, "
            "which is not a rotation; recompute the keys from the unrotated ones instead of re-rotating"
        )
    if not isinstance(scheme, RotaryEmbedding):
        raise TypeError(f"{name} must be a rotary scheme (RotaryEmbedding or a variant), got {type(scheme).__name__}")
    return scheme


def _check_positions(positions: Tensor, k: Tensor, name: str) -> Tensor:
    if not isinstance(positions, Tensor):
        raise TypeError(f"{name} must be a tensor of positions, got {type(positions).__name__}")
    if positions.dim() not in (1, 2) or positions.shape[-1] != k.shape[-2]:
        raise ValueError(
            f"{name} has shape {tuple(positions.shape)}; expected (T,) or (B, T) with T = {k.shape[-2]} "
            f"(the keys' length, from k of shape {tuple(k.shape)})"
        )
    return positions


def _for_keys(t: Tensor, k: Tensor) -> Tensor:
    """cos / sin of per-row positions ``(B, T, r/2)`` made to broadcast over heads ``(B, 1, T, r/2)``."""
    return t.unsqueeze(-3) if t.dim() == 3 and k.dim() == 4 else t


def rotation_between(
    scheme: RotaryEmbedding, old_positions: Tensor, new_positions: Tensor, new_scheme: RotaryEmbedding | None = None
) -> tuple[Tensor, Tensor]:
    """cos and sin of the one rotation taking keys from ``old_positions`` (``scheme``) to
    ``new_positions`` (``new_scheme``, default the same): ``(c_n + i s_n) conj(c_o + i s_o) / |c_o + i s_o|^2``.

    Both schemes must rotate the same number of channels. Shape: positions ``(T,)`` or ``(B, T)``
    -> two tensors ``(*positions.shape, rotary_dim / 2)``, float32.

    >>> import torch
    >>> from posembed.schemes.rotary.rope import RotaryEmbedding
    >>> rope = RotaryEmbedding(4, base=100.0)
    >>> cos, sin = rotation_between(rope, torch.tensor([5]), torch.tensor([2]))
    >>> bool(torch.allclose(cos, rope.cos_sin(torch.tensor([-3]))[0], atol=1e-6))
    True
    """
    new_scheme = scheme if new_scheme is None else new_scheme
    if new_scheme.rotary_dim != scheme.rotary_dim:
        raise ValueError(
            f"the schemes rotate different widths (rotary_dim {scheme.rotary_dim} and {new_scheme.rotary_dim}); "
            "unrotate and rotate separately (rerotate_keys does so)"
        )
    cos_o, sin_o = scheme.cos_sin(old_positions)
    cos_n, sin_n = new_scheme.cos_sin(new_positions)
    norm = cos_o * cos_o + sin_o * sin_o  # a^2 per pair (1 without an attention factor)
    return (cos_n * cos_o + sin_n * sin_o) / norm, (sin_n * cos_o - cos_n * sin_o) / norm


def _unrotate(k: Tensor, scheme: RotaryEmbedding, positions: Tensor) -> Tensor:
    cos, sin = scheme.cos_sin(positions)
    norm = cos * cos + sin * sin
    return apply_rotary(k, _for_keys(cos / norm, k), _for_keys(-sin / norm, k), scheme.layout)


def rerotate_keys(
    k: Tensor,
    scheme: RotaryEmbedding,
    old_positions: Tensor,
    new_positions: Tensor,
    *,
    new_scheme: RotaryEmbedding | None = None,
) -> Tensor:
    """Keys rotated by ``scheme`` at ``old_positions``, moved to ``new_positions`` (by ``new_scheme``).

    Equal to rotating the unrotated keys afresh at the new positions (within fp32 rounding of the
    angles). With one scheme, or two of the same width and layout, it is one rotation by the angle
    difference (:func:`rotation_between`); otherwise the keys are unrotated with the old scheme and
    rotated with the new one. Channels past ``rotary_dim`` pass through.

    Args:
        k: cached keys, already rotated.
        scheme: the scheme that rotated them.
        old_positions: the positions they were rotated at.
        new_positions: where they should be.
        new_scheme: the scheme to move them into (a scale switch); default ``scheme``.

    Shape:
        - k: ``(B, H, T, D)`` (any leading dims).
        - old_positions, new_positions: ``(T,)`` or ``(B, T)``.
        - output: like ``k``.

    Raises:
        ValueError: xPos (not a rotation), positions that do not fit ``k``, schemes of different head_dim.

    Example (attention sinks: keep 2 sink keys, evict positions 2..5, shift the rest down):
        >>> import torch
        >>> rope = RotaryEmbedding(8)
        >>> k = torch.randn(1, 2, 10, 8)
        >>> _, cached = rope(k, k)
        >>> kept = torch.tensor([0, 1, 6, 7, 8, 9])
        >>> moved = rerotate_keys(cached[:, :, kept], rope, kept, torch.arange(6))
        >>> _, fresh = rope(k[:, :, kept], k[:, :, kept])
        >>> bool(torch.allclose(moved, fresh, atol=1e-5))
        True
    """
    scheme = _check_scheme(scheme, "scheme")
    target = scheme if new_scheme is None else _check_scheme(new_scheme, "new_scheme")
    if target.head_dim != scheme.head_dim or k.shape[-1] != scheme.head_dim:
        raise ValueError(
            f"keys of width {k.shape[-1]} cannot move from head_dim {scheme.head_dim} to head_dim {target.head_dim}; "
            "all three must match"
        )
    old_positions = _check_positions(old_positions, k, "old_positions")
    new_positions = _check_positions(new_positions, k, "new_positions")
    if target.rotary_dim == scheme.rotary_dim and target.layout == scheme.layout:
        cos, sin = rotation_between(scheme, old_positions, new_positions, target)
        return apply_rotary(k, _for_keys(cos, k), _for_keys(sin, k), scheme.layout)
    plain = _unrotate(k, scheme, old_positions)
    cos, sin = target.cos_sin(new_positions)
    return apply_rotary(plain, _for_keys(cos, k), _for_keys(sin, k), target.layout)
