"""Position ids of Qwen2-VL's M-RoPE for interleaved text, images and videos (Wang et al. 2024).

Text tokens count on from the last position, the same value on all three axes. A run of
vision tokens (one image or video, ``T' x H' x W'`` tokens after the spatial merge) starting at
position ``s`` gets ``(s + t, s + h, s + w)`` in (t, h, w) row-major order, and the text after
it resumes at ``s + max(H', W')`` (transformers 5.x ``Qwen2VLModel.get_rope_index``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from posembed._utils.checks import check_positive_int

__all__ = ["TEXT", "IMAGE", "VIDEO", "mrope_position_ids", "vision_positions"]

#: token types (transformers' ``mm_token_type_ids``)
TEXT, IMAGE, VIDEO = 0, 1, 2


def vision_positions(start: int, grid: Sequence[int], spatial_merge_size: int = 1) -> Tensor:
    """``(t, h, w)`` positions of one image or video of patch grid ``(T, H, W)``, offset by ``start``.

    Shape: ``(T * H' * W', 3)`` with ``H' = H // spatial_merge_size`` (and ``W'``), long.

    >>> vision_positions(5, (1, 4, 4), spatial_merge_size=2).tolist()
    [[5, 5, 5], [5, 5, 6], [5, 6, 5], [5, 6, 6]]
    """
    frames, height, width = (int(v) for v in grid)
    height, width = height // spatial_merge_size, width // spatial_merge_size
    t, h, w = torch.meshgrid(torch.arange(frames), torch.arange(height), torch.arange(width), indexing="ij")
    return torch.stack([t, h, w], dim=-1).reshape(-1, 3) + start


def _runs(types: list[int]) -> list[tuple[int, int, int]]:
    """``(type, start, end)`` of each run of equal token types."""
    runs: list[tuple[int, int, int]] = []
    for index, kind in enumerate(types):
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1], index + 1)
        else:
            runs.append((kind, index, index + 1))
    return runs


def mrope_position_ids(
    token_types: Tensor,
    image_grids: Tensor | Sequence[Sequence[int]] | None = None,
    video_grids: Tensor | Sequence[Sequence[int]] | None = None,
    *,
    spatial_merge_size: int = 2,
    attention_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """M-RoPE positions of a batch of interleaved text (0), image (1) and video (2) tokens.

    Args:
        token_types: ``(B, T)`` token types (:data:`TEXT`, :data:`IMAGE`, :data:`VIDEO`).
        image_grids, video_grids: ``(N, 3)`` patch grids ``(T, H, W)`` before the merge, one per
            image / video, in order of appearance across the batch (``image_grid_thw``).
        spatial_merge_size: patches merged per side into one token (Qwen2-VL: 2).
        attention_mask: ``(B, T)``, 0 for padding; padding gets position 0 on every axis.

    Returns:
        ``(positions, deltas)``: positions ``(B, T, 3)`` long for :class:`~posembed.schemes.rotary.mrope.MRoPE`
        (transformers' ``(3, B, T)`` is ``positions.permute(2, 0, 1)``), and ``deltas`` ``(B, 1)``:
        ``max position + 1 - real tokens``, what generated tokens add to their index.

    Example:
        >>> types = torch.tensor([[0, 0, 1, 1, 1, 1, 0]])  # two words, a 4 x 4 patch image (2 x 2 tokens), a word
        >>> positions, deltas = mrope_position_ids(types, [(1, 4, 4)])
        >>> positions[0].T.tolist(), deltas.tolist()
        ([[0, 1, 2, 2, 2, 2, 4], [0, 1, 2, 2, 3, 3, 4], [0, 1, 2, 3, 2, 3, 4]], [[-2]])
    """
    check_positive_int(spatial_merge_size, "spatial_merge_size")
    if token_types.dim() != 2:
        raise ValueError(f"token_types must have shape (B, T), got {tuple(token_types.shape)}")
    grids = {
        IMAGE: iter(image_grids if image_grids is not None else ()),
        VIDEO: iter(video_grids if video_grids is not None else ()),
    }
    batch, length = token_types.shape
    positions = torch.zeros(batch, length, 3, dtype=torch.long, device=token_types.device)
    deltas = []
    for row in range(batch):
        keep = torch.ones(length, dtype=torch.bool) if attention_mask is None else attention_mask[row].bool().cpu()
        types = token_types[row].cpu()[keep].tolist()
        parts, current = [], 0
        for kind, start, end in _runs(types):
            if kind == TEXT:
                parts.append(torch.arange(current, current + end - start)[:, None].expand(-1, 3))
                current += end - start
                continue
            if kind not in grids:
                raise ValueError(
                    f"token_types holds {kind!r}; expected {TEXT} (text), {IMAGE} (image) or {VIDEO} (video)"
                )
            grid = next(grids[kind], None)
            if grid is None:
                raise ValueError(f"token_types has more {'image' if kind == IMAGE else 'video'} runs than grids given")
            block = vision_positions(current, grid, spatial_merge_size)
            if block.shape[0] != end - start:
                raise ValueError(
                    f"a run of {end - start} vision tokens (row {row}, tokens {start}..{end - 1}) "
                    f"does not match its grid "
                    f"{tuple(int(v) for v in grid)} / merge {spatial_merge_size}: {block.shape[0]} tokens"
                )
            parts.append(block)
            current += max(int(grid[1]), int(grid[2])) // spatial_merge_size
        row_positions = torch.cat(parts) if parts else torch.zeros(0, 3, dtype=torch.long)
        positions[row, keep.to(positions.device)] = row_positions.to(positions.device)
        deltas.append((int(row_positions.max()) + 1 if len(row_positions) else 0) - len(types))
    return positions, torch.tensor(deltas, device=token_types.device).unsqueeze(1)
