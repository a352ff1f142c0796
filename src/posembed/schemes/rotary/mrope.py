"""Multimodal RoPE (M-RoPE) of Qwen2-VL (Wang et al. 2024).

One head-wide RoPE (``base^(-2i / D)``, ``i < D / 2``) cut into three consecutive sections of
``mrope_section = (s_t, s_h, s_w)`` frequencies (``s_t + s_h + s_w = D / 2``; Qwen2-VL 7B:
``(16, 24, 24)`` of 64): the first section turns by the token's time coordinate, the second by
its row, the third by its column, in the ``"half"`` layout, as transformers'
``Qwen2VLRotaryEmbedding`` + ``apply_multimodal_rotary_pos_emb`` (with ``angles="fp32"``, bit
for bit). Text tokens sit at ``(p, p, p)``, so on text M-RoPE is plain RoPE.

Settings beyond Qwen2-VL's (all found in transformers 5.24's M-RoPE classes):

- ``arrangement``: how the sections sit among the pairs. ``"blocks"`` (Qwen2-VL, GLM-4V, PaddleOCR-VL):
  consecutive sections in frequency order; ``"interleaved"`` (Qwen3-VL, its MoE, Qwen3.5, Cosmos3-Edge,
  HY-V4-VL): the frequencies stay in order and the axes are dealt round robin, pair ``j`` following
  the second section's axis when ``j % 3 == 1 and j < 3 s_1``, the third's when ``j % 3 == 2 and
  j < 3 s_2``, the first's otherwise; ``"zipped"`` (ERNIE 4.5-VL): the frequencies stay in order, the
  first ``2 s_0`` pairs alternate between the first two sections' axes (``a, b, a, b, ...``; ``s_0 = s_1``),
  the rest follow the third's;
- ``section_axes``: the coordinate each section follows (ERNIE 4.5-VL's sections are height, width,
  time: ``(1, 2, 0)``);
- ``rotary_dim``: partial M-RoPE (Qwen3.5): the sections cover ``rotary_dim / 2`` frequencies of a
  ``rotary_dim``-wide RoPE and the last ``head_dim - rotary_dim`` channels pass through;
- ``frequencies``: a scaled rope type (linear, dynamic, yarn, llama3, longrope): transformers' M-RoPE classes take
  their frequencies and attention factor from the type's init function (and its length switch) and deal those to the
  sections; :meth:`MRoPE.deal` takes that type's one-axis :class:`~posembed.schemes.rotary.rope.RotaryEmbedding`,
  asked per call for the frequencies and factor of the call's length (largest coordinate + 1).

Positions are ``(T, 3)`` or ``(B, T, 3)`` ``(t, h, w)`` coordinates, or a text sequence ``(T,)``;
:func:`posembed.schemes.rotary.mrope_positions.mrope_position_ids` builds them for interleaved text,
images and videos (transformers' ``get_rope_index`` gives the same, axis first: ``(3, B, T)``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed.schemes.rotary.axial import SectionedRotary, axial_cos_sin
from posembed.schemes.rotary.checks import check_base, check_head_dim, resolve_frequency_dim
from posembed.schemes.rotary.rope import RotaryEmbedding, rope_inv_freq

__all__ = ["MROPE_ARRANGEMENTS", "MRoPE", "default_mrope_section", "mrope_frequencies", "mrope_pairs"]

#: how M-RoPE's sections sit among the rotated pairs (see the module docstring)
MROPE_ARRANGEMENTS: tuple[str, ...] = ("blocks", "interleaved", "zipped")


def default_mrope_section(head_dim: int) -> tuple[int, int, int]:
    """Qwen2-VL's split of the ``D / 2`` frequencies: 3/8 each to rows and columns, the rest to time.

    >>> default_mrope_section(128)
    (16, 24, 24)
    """
    half = head_dim // 2
    spatial = half * 3 // 8
    return half - 2 * spatial, spatial, spatial


def check_mrope_section(section: object, head_dim: int, name: str = "head_dim") -> tuple[int, int, int]:
    """``section`` as three non-negative ints that sum to ``head_dim / 2`` (``name`` names that width)."""
    values = tuple(section) if isinstance(section, (list, tuple)) else ()
    ints = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
    if len(values) != 3 or not ints or sum(values) != head_dim // 2:
        raise ValueError(
            f"mrope_section must be three non-negative ints (time, height, width) summing to {name} / 2 = "
            f"{head_dim // 2}; got mrope_section={section!r}"
        )
    return values


def mrope_pairs(
    section: tuple[int, int, int], arrangement: str = "blocks", section_axes: tuple[int, int, int] = (0, 1, 2)
) -> tuple[list[int], list[int]]:
    """``(frequency index, axis)`` of every rotated pair, for sections of sizes ``section``.

    >>> mrope_pairs((2, 1, 1))
    ([0, 1, 2, 3], [0, 0, 1, 2])
    >>> mrope_pairs((2, 1, 1), "interleaved")
    ([0, 1, 2, 3], [0, 1, 2, 0])
    >>> mrope_pairs((2, 2, 1), "zipped", (1, 2, 0))
    ([0, 1, 2, 3, 4], [1, 2, 1, 2, 0])
    """
    total = sum(section)
    if arrangement == "blocks":
        return list(range(total)), [section_axes[k] for k, size in enumerate(section) for _ in range(size)]
    if arrangement == "interleaved":

        def axis(j: int) -> int:
            for k in (1, 2):
                if j % 3 == k and j < 3 * section[k]:
                    return section_axes[k]
            return section_axes[0]

        return list(range(total)), [axis(j) for j in range(total)]
    if arrangement == "zipped":
        if section[0] != section[1]:
            raise ValueError(
                f"arrangement 'zipped' alternates the first two sections, which must be equal; got {section}"
            )
        return list(range(total)), [section_axes[0], section_axes[1]] * section[0] + [section_axes[2]] * section[2]
    raise ValueError(f"arrangement must be one of {MROPE_ARRANGEMENTS}, got {arrangement!r}")


def mrope_frequencies(
    head_dim: int,
    section: tuple[int, int, int],
    base: float = 10000.0,
    *,
    arrangement: str = "blocks",
    section_axes: tuple[int, int, int] = (0, 1, 2),
) -> tuple[Tensor, Tensor]:
    """``(inv_freq, axis_of)`` per rotated pair: RoPE's ``D / 2`` frequencies (``D = head_dim``, the
    rotated width) placed by :func:`mrope_pairs`; by default the first ``s_t`` follow time, then ``s_h``
    rows, then ``s_w`` columns.

    Built from Python ints, so it also runs under ``with torch.device("meta")`` (where a tensor
    ``repeat_interleave`` cannot know its output length).

    >>> mrope_frequencies(8, (2, 1, 1))[1]
    tensor([0, 0, 1, 2])
    """
    index, axes = mrope_pairs(section, arrangement, section_axes)
    inv_freq = rope_inv_freq(head_dim, base)
    return inv_freq[torch.tensor(index, dtype=torch.long)], torch.tensor(axes, dtype=torch.long)


class MRoPE(SectionedRotary):
    """Qwen2-VL's multimodal RoPE: sections of one RoPE follow time, height and width.

    Wang et al. 2024 (Qwen2-VL, arXiv:2409.12191), "M-RoPE".

    Args:
        head_dim: D, the per-head width of q and k (even).
        mrope_section: frequencies per axis ``(time, height, width)``, summing to ``D / 2``;
            ``None``: :func:`default_mrope_section` (Qwen2-VL's 1/4, 3/8, 3/8).
        base: the frequency base (``rope_theta``; Qwen2-VL: 1e6).
        layout: ``"half"`` (transformers' checkpoints) or ``"interleaved"`` (GLM-4V, ERNIE 4.5-VL).
        rotary_dim: channels rotated (even, ``<= head_dim``; ``None``: all); ``mrope_section`` sums to
            ``rotary_dim / 2``.
        arrangement: ``"blocks"``, ``"interleaved"`` or ``"zipped"`` (:data:`MROPE_ARRANGEMENTS`, module docstring).
        section_axes: the coordinate (0 time, 1 height, 2 width) each section follows; default ``(0, 1, 2)``.
        frequency_dim: the width the frequencies divide by (odd widths as
            :class:`~posembed.schemes.rotary.rope.RotaryEmbedding`: GLM-4V-MoE's 21); ``None``: ``rotary_dim``.
        angles: ``"exact"`` (float64 angles) or ``"fp32"`` (transformers' float32 product, bit for bit).
        device: device of the buffers.

    Shape:
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``.
        - position_ids: ``(Tq, 3)`` or ``(B, Tq, 3)`` ``(t, h, w)``; a text sequence ``(Tq,)``
          (and ``None = arange(Tq)``) puts position ``p`` at ``(p, p, p)``.
        - output: ``(q, k)`` rotated, same shapes and dtypes.

    Example:
        >>> from posembed.schemes.rotary.rope import RotaryEmbedding
        >>> mrope, rope = MRoPE(head_dim=16), RotaryEmbedding(head_dim=16)
        >>> q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
        >>> all(torch.allclose(a, b) for a, b in zip(mrope(q, k), rope(q, k)))  # text only: plain RoPE
        True
    """

    name = "mrope"
    paper = "Wang et al. 2024 (Qwen2-VL)"
    extrapolates = False
    num_axes = 3

    def __init__(
        self,
        head_dim: int,
        *,
        mrope_section: tuple[int, int, int] | None = None,
        base: float = 10000.0,
        layout: str = "half",
        angles: str = "exact",
        rotary_dim: int | None = None,
        arrangement: str = "blocks",
        section_axes: tuple[int, int, int] = (0, 1, 2),
        frequency_dim: int | None = None,
        device=None,
    ) -> None:
        self.head_dim = check_head_dim(head_dim)
        self.rotary_dim, self.frequency_dim = resolve_frequency_dim(frequency_dim, rotary_dim, self.head_dim)
        section = default_mrope_section(self.rotary_dim) if mrope_section is None else mrope_section
        width = "head_dim" if self.rotary_dim == self.head_dim else "rotary_dim"
        self.mrope_section = check_mrope_section(section, self.rotary_dim, width)
        if arrangement not in MROPE_ARRANGEMENTS:
            raise ValueError(f"arrangement must be one of {MROPE_ARRANGEMENTS}, got {arrangement!r}")
        if not isinstance(section_axes, (tuple, list)) or sorted(section_axes) != [0, 1, 2]:
            raise ValueError(f"section_axes must order the axes 0, 1, 2 (time, height, width); got {section_axes!r}")
        self.arrangement = arrangement
        self.section_axes: tuple[int, int, int] = (section_axes[0], section_axes[1], section_axes[2])
        self.base = check_base(base)
        super().__init__(layout=layout, angles=angles, device=device)
        self.dealt: RotaryEmbedding | None = None

    def deal(self, frequencies: RotaryEmbedding) -> MRoPE:
        """This M-RoPE, its sections dealing the frequencies and factor of ``frequencies`` (a scaled one-axis rotary
        scheme of the same ``rotary_dim``: transformers' M-RoPE with a scaled rope type) instead of ``base``'s;
        returns ``self``.

        >>> from posembed.schemes.rotary.scaling import LinearScalingRotary
        >>> mrope = MRoPE(8, mrope_section=(2, 1, 1)).deal(LinearScalingRotary(8, factor=4.0))
        >>> torch.allclose(mrope.cos_sin(torch.tensor([[8, 8, 8]]))[0],
        ...                LinearScalingRotary(8, factor=4.0).cos_sin(torch.tensor([8]))[0])
        True
        """
        if not isinstance(frequencies, RotaryEmbedding):
            raise TypeError(
                f"frequencies must be a RotaryEmbedding (a scaled rope type), got {type(frequencies).__name__}"
            )
        if frequencies.rotary_dim != self.rotary_dim:
            raise ValueError(f"frequencies rotate {frequencies.rotary_dim} channels, the sections {self.rotary_dim}")
        self.dealt = frequencies
        return self

    def cos_sin(self, coords: Tensor) -> tuple[Tensor, Tensor]:
        """cos and sin (float32, the scaled type's factor folded in) of coordinates ``(..., 3)`` ->
        ``(..., rotary_dim / 2)``."""
        if self.dealt is None:
            return super().cos_sin(coords)
        inv_freq = self.dealt.inv_freq
        scaling: float | Tensor = self.dealt.attention_scaling  # a 0-dim tensor from _call_frequencies
        if self.dealt.dynamic and coords.numel():
            inv_freq, scaling = self.dealt._call_frequencies(coords.max() + 1)
        index = mrope_pairs(self.mrope_section, self.arrangement, self.section_axes)[0]
        cos, sin = axial_cos_sin(
            coords, inv_freq[torch.tensor(index, device=inv_freq.device)], self.axis_of, self.angles
        )
        return (cos * scaling, sin * scaling) if isinstance(scaling, Tensor) or scaling != 1.0 else (cos, sin)

    def _frequencies(self) -> tuple[Tensor, Tensor]:
        return mrope_frequencies(self.frequency_dim, self.mrope_section, self.base, arrangement=self.arrangement,
                                 section_axes=self.section_axes)  # fmt: skip

    def extra_repr(self) -> str:
        parts = [f"head_dim={self.head_dim}"] + (
            [f"rotary_dim={self.rotary_dim}"] if self.rotary_dim != self.head_dim else []
        )
        parts += [f"frequency_dim={self.frequency_dim}"] if self.frequency_dim != self.rotary_dim else []
        parts += [f"mrope_section={self.mrope_section}", f"base={self.base:g}", f"layout={self.layout!r}"]
        if self.arrangement != "blocks":
            parts.append(f"arrangement={self.arrangement!r}")
        if self.section_axes != (0, 1, 2):
            parts.append(f"section_axes={self.section_axes}")
        if self.angles != "exact":
            parts.append(f"angles={self.angles!r}")
        if self.dealt is not None:
            parts.append(f"dealt={type(self.dealt).__name__}")
        return ", ".join(parts)
