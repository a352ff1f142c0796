"""Rotary position embedding (RoPE; Su et al. 2021, RoFormer).

Each pair of query/key channels is rotated by the angle ``m * theta_i`` with
``theta_i = base^(-2i / rotary_dim)``, so that ``q_m . k_n`` depends only on ``n - m``.

Two channel layouts pair the dims differently (same maths, a permutation apart; see
:mod:`posembed.schemes.rotary.layout` for the weight converter):

- ``"half"``: pairs ``(i, i + rotary_dim/2)`` — GPT-NeoX, Hugging Face Llama;
- ``"interleaved"``: pairs ``(2i, 2i + 1)`` — GPT-J, Meta Llama, torchtune, x-transformers.

Partial rotary (``rotary_dim < head_dim``, GPT-NeoX / Phi) rotates the first ``rotary_dim``
channels and passes the rest through. Frequencies and cos/sin are always float32; the angle
``m * theta_i`` is formed exactly (float64, :mod:`posembed.schemes.phases`), so cos/sin are
within 2.5e-7 of the float64 truth at every position up to ``2**24`` (``angles="fp32"`` gives
the float32 product of transformers bit for bit instead). The rotation of half-precision inputs
runs in float32 and is cast back with ``type_as``.

The rotary family is a tree (no module imports one above it):

- leaves: :mod:`~posembed.schemes.rotary.checks` (argument checks),
  :mod:`~posembed.schemes.rotary.rotation` (the rotation formula, its compiled kernel, the dispatch),
  :mod:`~posembed.schemes.phases` (exact cos/sin);
- this module: :func:`rope_inv_freq`, :func:`rope_cos_sin` and :class:`RotaryEmbedding`;
- the variants, which subclass it: :mod:`~posembed.schemes.rotary.scaling` (linear, NTK,
  dynamic NTK, Llama 3, proportional), :mod:`~posembed.schemes.rotary.yarn`,
  :mod:`~posembed.schemes.rotary.longrope`, :mod:`~posembed.schemes.rotary.xpos`;
- the Hugging Face config reader, at the edge: :func:`posembed.interop.rope.config.rotary_from_hf_config`
  (schemes never import it: the layering runs the other way).
"""

from __future__ import annotations

import torch
from torch import Tensor

from posembed._utils.checks import check_positive_int
from posembed.schemes.base import RotaryScheme
from posembed.schemes.fp32_buffers import Fp32Buffer
from posembed.schemes.phases import check_angles, cos_sin
from posembed.schemes.rotary.checks import (
    check_base,
    check_cache_range,
    check_forward_mscale,
    check_head_dim,
    past_cache_message,
    resolve_frequency_dim,
    resolve_qk_positions,
)  # fmt: skip
from posembed.schemes.rotary.rotation import ROPE_LAYOUTS, apply_rotary, apply_rotary_placed, check_placement

__all__ = ["RotaryEmbedding", "rope_inv_freq", "rope_cos_sin", "apply_rotary", "ROPE_LAYOUTS"]


#: the smallest context-extension factor a scaled RoPE variant takes (1 keeps the trained context)
MIN_FACTOR = 1.0


def rope_inv_freq(rotary_dim: int, base: float = 10000.0, device=None) -> Tensor:
    """Inverse frequencies ``theta_i = base^(-2i / rotary_dim)``, float32, shape ``(rotary_dim / 2,)``.

    >>> rope_inv_freq(4, base=100.0)
    tensor([1.0000, 0.1000])
    """
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device=device).float() / rotary_dim
    return 1.0 / (base**exponents)


def rope_cos_sin(
    position_ids: Tensor, inv_freq: Tensor, scaling: float | Tensor = 1.0, *, angles: str = "exact"
) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` of ``position * inv_freq`` in float32, times ``scaling``.

    ``scaling`` is the attention factor of YaRN / LongRoPE (1.0 otherwise), folded into cos and
    sin as Hugging Face does, so the logits scale by its square (a 0-dim tensor where the call's positions choose it:
    no value is read back to the host). ``angles="exact"`` forms the
    angle in float64 (within 2.5e-7 of the float64 truth up to position ``2**24``, see
    :mod:`posembed.schemes.phases`); ``"fp32"`` is transformers' float32 product, bit for bit.

    Shape:
        - position_ids: ``(T,)`` or ``(B, T)`` (any integer or float dtype).
        - inv_freq: ``(D/2,)``.
        - output: two tensors of shape ``(*position_ids.shape, D/2)``, float32.

    >>> cos, sin = rope_cos_sin(torch.arange(3), torch.tensor([1.0, 0.0]))
    >>> cos[:, 1], sin[:, 1]
    (tensor([1., 1., 1.]), tensor([0., 0., 0.]))
    """
    cos, sin = cos_sin(position_ids, inv_freq, angles)  # (..., T, D/2)
    if isinstance(scaling, Tensor) or scaling != 1.0:
        cos, sin = cos * scaling, sin * scaling
    return cos, sin


class RotaryEmbedding(RotaryScheme):
    """Rotary position embedding (RoPE) of queries and keys.

    Args:
        head_dim: D, the per-head width of q and k (even).
        rotary_dim: channels rotated (even, ``<= head_dim``); ``None`` means all (partial rotary
            otherwise: ``rotary_dim = int(head_dim * partial_rotary_factor)``).
        base: the frequency base (``rope_theta``), 10000 in the paper.
        layout: ``"half"`` (GPT-NeoX / Hugging Face) or ``"interleaved"`` (GPT-J / Meta).
        direction: ``"forward"`` (default; transformers' ``rotate_half``) or ``"reversed"``: every
            pair turns by the negated angle (NanoChat's ``cat(x2, -x1)``); cos/sin are unchanged.
        frequency_dim: the width the default frequencies divide by, ``base^(-2i / frequency_dim)``;
            ``None``: ``rotary_dim``. An odd width (transformers' ``int(head_dim * partial_rotary_factor)``,
            e.g. GLM-4V-MoE's 21) gives ``ceil(frequency_dim / 2)`` frequencies rotating
            ``rotary_dim = 2 ceil(frequency_dim / 2)`` channels. Linear, dynamic NTK, Llama 3 and LongRoPE take it
            as transformers' init functions do (GLM-4-MoE); the other variants refuse it.
        channels: ``"first"`` (default): partial rotary rotates the first ``rotary_dim`` channels
            (GPT-NeoX, Phi); ``"last"``: the last ``rotary_dim`` (DeepSeek-V4's ``[nope | rope]``).
        forward_mscale: ``(short, long)``: the factor a call folds into cos and sin instead of the attention factor,
            ``short`` for a call whose length (largest position + 1) is at most ``mscale_switch``, ``long`` for a longer
            one, with the frequencies built at init at every length (PhiMoE's forward: ``short_mscale`` /
            ``long_mscale``, its rope init function called again without the length). ``None`` (default): the
            attention factor, and the variant's own frequencies per length. No cos/sin cache is built with it.
        mscale_switch: the longest call that takes ``forward_mscale[0]`` (PhiMoE's
            ``original_max_position_embeddings``); needed with ``forward_mscale``.
        max_len: size of the cos/sin cache built at init (non-persistent buffers) for
            default positions ``arange(T)`` (:meth:`cached_cos_sin`); ``None`` builds none and
            computes every call on the fly. With a cache, a call with default positions longer
            than ``max_len`` is an error (it names the ways out); explicit ``position_ids`` are
            always computed on the fly, with the same values: positions have no limit.
        compiled: rotate queries and keys with the compiled kernel
            (:class:`~posembed.schemes.rotary.rotation.CompiledRotation`, ``torch.compile`` of the
            rotation formula; one pass per tensor in fp32, bf16 or fp16, float32 inside; the first
            call per shape compiles for seconds). ``None`` (default): the device's policy
            (:func:`~posembed.schemes.rotary.rotation.compiled_by_default`: compiled on CUDA, eager on
            the CPU); ``True``: compiled on every device (a fallback is logged once); ``False``:
            eager. Other dtypes, learned angles and code already under ``torch.compile`` keep the
            eager rotation, which stays the reference.
        angles: ``"exact"`` (default) forms ``m * theta_i`` in float64: cos/sin within 2.5e-7 of
            the float64 truth at every position up to ``2**24``. ``"fp32"``: the float32 product
            of transformers, bit for bit (its error grows with the position: ~3e-5 at 1e3).
        device: device of the buffers.

    Attributes:
        attention_scaling: factor folded into cos and sin (YaRN / LongRoPE; 1.0 here).

    Shape:
        - q: ``(B, H, Tq, D)``, k: ``(B, H, Tk, D)``.
        - position_ids: ``(Tq,)`` or ``(B, Tq)``; ``None`` means ``arange(Tq)``.
        - k_position_ids: ``(Tk,)`` or ``(B, Tk)``; ``None`` means ``position_ids`` (``Tq == Tk``).
        - output: ``(q, k)`` rotated, same shapes and dtypes.

    Example:
        >>> rope = RotaryEmbedding(head_dim=8)
        >>> q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
        >>> q_rot, k_rot = rope(q, k)
        >>> q_rot.shape
        torch.Size([2, 4, 5, 8])
        >>> bool(torch.allclose(q_rot.norm(dim=-1), q.norm(dim=-1), atol=1e-5))  # a rotation
        True

    Subclasses (the variants) set their own fields before calling ``super().__init__`` and
    override :meth:`_frequencies`; dynamic ones (frequencies that depend on the current length)
    set ``dynamic = True`` and override :meth:`_inv_freq_for`.
    """

    name = "rope"
    takes_frequency_dim = True  # an odd frequency_dim: this class's own frequencies divide by it
    paper = "Su et al. 2021 (RoFormer)"
    extrapolates = False
    #: True when the frequencies depend on the current length (no cos/sin cache then)
    dynamic = False
    # float32 whatever the model's dtype: .half() / .to(torch.bfloat16) leave them, .to(device) moves them
    inv_freq = Fp32Buffer()  # (D/2,)
    cos_cached = Fp32Buffer()  # (max_len, D/2), empty without a cache
    sin_cached = Fp32Buffer()

    def __init__(
        self,
        head_dim: int,
        *,
        rotary_dim: int | None = None,
        base: float = 10000.0,
        layout: str = "half",
        max_len: int | None = None,
        compiled: bool | None = None,
        angles: str = "exact",
        direction: str = "forward",
        channels: str = "first",
        frequency_dim: int | None = None,
        forward_mscale: tuple[float, float] | None = None,
        mscale_switch: int | None = None,
        device=None,
    ) -> None:
        super().__init__()
        self.direction, self.channels = check_placement(direction, channels)
        self.forward_mscale, self.mscale_switch = check_forward_mscale(forward_mscale, mscale_switch)
        if self.forward_mscale is not None:
            self.dynamic = True  # the factor depends on the call's length: no cache
        self.compiled = None if compiled is None else bool(compiled)
        self.angles = check_angles(angles)
        self.head_dim = check_head_dim(head_dim)
        self.rotary_dim, self.frequency_dim = resolve_frequency_dim(frequency_dim, rotary_dim, self.head_dim)
        if self.frequency_dim != self.rotary_dim and not type(self).__dict__.get("takes_frequency_dim", False):
            raise ValueError(
                f"an odd frequency_dim ({self.frequency_dim}) is a setting of the default, linear, dynamic, llama3 and "
                f"longrope RoPE frequencies (transformers' int(head_dim * partial_rotary_factor)); "
                f"{type(self).__name__} does not take it"
            )
        self.base = check_base(base)
        if layout not in ROPE_LAYOUTS:
            raise ValueError(f"layout must be one of {ROPE_LAYOUTS}, got {layout!r}")
        self.layout = layout
        self.max_len = None if max_len is None else check_positive_int(max_len, "max_len")
        self.attention_scaling = 1.0
        rows = 0 if (self.max_len is None or self.dynamic) else self.max_len
        half, fp32 = self.rotary_dim // 2, torch.float32
        self.inv_freq = torch.empty(half, device=device, dtype=fp32)
        self.cos_cached = torch.empty(rows, half, device=device, dtype=fp32)
        self.sin_cached = torch.empty(rows, half, device=device, dtype=fp32)
        self.reset_parameters()

    def _frequencies(self, device) -> tuple[Tensor, float]:
        """``(inv_freq, attention_scaling)``; the variants override this."""
        return rope_inv_freq(self.frequency_dim, self.base, device=device), 1.0

    def _inv_freq_for(self, length: Tensor) -> Tensor:
        """Frequencies for a call whose largest position is ``length - 1`` (dynamic variants)."""
        return self.inv_freq

    def _call_frequencies(self, length: Tensor) -> tuple[Tensor, float | Tensor]:
        """``(inv_freq, factor folded into cos / sin)`` of a call whose largest position is ``length - 1`` (the
        forward mscale chosen on the device, a 0-dim tensor: the call reads nothing back to the host)."""
        if self.forward_mscale is not None and self.mscale_switch is not None:  # set together, or neither
            short, long = self.forward_mscale
            return self.inv_freq, torch.where(length > self.mscale_switch, long, short)
        return self._inv_freq_for(length), self.attention_scaling

    def reset_parameters(self) -> None:
        """(Re)build ``inv_freq`` and the cos/sin cache, e.g. after ``to_empty`` from the meta device."""
        with torch.no_grad():
            inv_freq, self.attention_scaling = self._frequencies(self.inv_freq.device)
            self.inv_freq.copy_(inv_freq)
            if self.cos_cached.shape[0]:
                positions = torch.arange(self.cos_cached.shape[0], device=self.inv_freq.device)
                cos, sin = rope_cos_sin(positions, self.inv_freq, self.attention_scaling, angles=self.angles)
                self.cos_cached.copy_(cos)
                self.sin_cached.copy_(sin)

    def cos_sin(self, position_ids: Tensor) -> tuple[Tensor, Tensor]:
        """cos and sin (float32, attention scaling folded in) for explicit positions.

        Shape: ``(T,)`` or ``(B, T)`` -> two tensors ``(*position_ids.shape, rotary_dim / 2)``.
        """
        inv_freq = self.inv_freq
        scaling: float | Tensor = self.attention_scaling  # a 0-dim tensor from _call_frequencies
        if self.dynamic:
            inv_freq, scaling = self._call_frequencies(position_ids.max() + 1)
        return rope_cos_sin(position_ids, inv_freq, scaling, angles=self.angles)

    @property
    def cache_size(self) -> int:
        """Rows of the cos/sin cache: ``max_len``, or 0 without one (or for dynamic variants)."""
        return self.cos_cached.shape[0]

    def cached_cos_sin(self, length: int, offset: int = 0) -> tuple[Tensor, Tensor]:
        """The cached cos and sin of positions ``offset .. offset + length - 1`` (a slice, no math).

        Raises a ``ValueError`` naming ``offset + length`` and the cache size when the positions
        run past the cache (or there is none): pass explicit ``position_ids`` to compute them on
        the fly, or build the scheme with a larger ``max_len``.

        Shape: two tensors ``(length, rotary_dim / 2)``, float32, attention scaling folded in.

        Example:
            >>> rope = RotaryEmbedding(head_dim=8, max_len=16)
            >>> cos, sin = rope.cached_cos_sin(4, offset=12)
            >>> cos.shape, bool(torch.equal(cos, rope.cos_sin(torch.arange(12, 16))[0]))
            (torch.Size([4, 4]), True)
            >>> rope.cached_cos_sin(4, offset=13)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            ValueError: positions 13 .. 16 (offset + length = 17) run past the cos/sin cache of 16 positions ...
        """
        check_cache_range(length, offset)
        end = offset + length
        if end > self.cache_size:
            raise ValueError(past_cache_message(offset, length, self.cache_size, self.max_len, self.dynamic))
        return self.cos_cached[offset:end], self.sin_cached[offset:end]

    def cos_sin_range(self, length: int, offset: int = 0) -> tuple[Tensor, Tensor]:
        """cos and sin for positions ``offset .. offset + length - 1``: a slice of the cache when it
        fits, computed on the fly otherwise (never an error).

        Shape: two tensors ``(length, rotary_dim / 2)``, float32.
        """
        check_cache_range(length, offset)
        if offset + length <= self.cache_size:
            return self.cached_cos_sin(length, offset)
        positions = torch.arange(offset, offset + length, device=self.inv_freq.device)
        return self.cos_sin(positions)

    def default_cos_sin(self, length: int) -> tuple[Tensor, Tensor]:
        """cos and sin of the default positions ``arange(length)``: from the cache when there is
        one (:meth:`cached_cos_sin`, an error past it), else computed on the fly."""
        if self.cache_size:
            return self.cached_cos_sin(length)
        return self.cos_sin(torch.arange(length, device=self.inv_freq.device))

    def _rotate_qk(
        self, q: Tensor, k: Tensor, position_ids: Tensor | None, k_position_ids: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        if position_ids is None and k_position_ids is None and q.shape[-2] == k.shape[-2]:
            cos, sin = self.default_cos_sin(q.shape[-2])  # (T, r/2)
            return self._rotate_one(q, cos, sin), self._rotate_one(k, cos, sin)
        q_pos, k_pos = resolve_qk_positions(q, k, position_ids, k_position_ids)
        q_cs, k_cs = self._qk_cos_sin(q_pos, k_pos)
        return self._rotate_one(q, *q_cs), self._rotate_one(k, *k_cs)

    def _qk_cos_sin(self, q_pos: Tensor, k_pos: Tensor) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
        """cos/sin of queries and keys, with one set of frequencies for both (dynamic variants)."""
        inv_freq = self.inv_freq
        scaling: float | Tensor = self.attention_scaling  # a 0-dim tensor from _call_frequencies
        if self.dynamic:
            inv_freq, scaling = self._call_frequencies(torch.maximum(q_pos.max(), k_pos.max()) + 1)
        q_cs = rope_cos_sin(q_pos, inv_freq, scaling, angles=self.angles)
        k_cs = q_cs if k_pos is q_pos else rope_cos_sin(k_pos, inv_freq, scaling, angles=self.angles)
        return q_cs, k_cs

    def _rotate_one(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """Rotate ``x`` through :func:`~posembed.schemes.rotary.rotation.apply_rotary`, the one dispatch point."""
        if cos.dim() == 3:  # (B, T, r/2) from per-row positions
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B, 1, T, r/2)
        if self.direction == "forward" and self.channels == "first":
            return apply_rotary(x, cos, sin, self.layout, compiled=self.compiled)
        return apply_rotary_placed(x, cos, sin, self.layout, direction=self.direction, channels=self.channels,
                                   compiled=self.compiled)  # fmt: skip

    def extra_repr(self) -> str:
        parts = [f"head_dim={self.head_dim}"]
        if self.rotary_dim != self.head_dim:
            parts.append(f"rotary_dim={self.rotary_dim}")
        if self.frequency_dim != self.rotary_dim:
            parts.append(f"frequency_dim={self.frequency_dim}")
        parts += [f"base={self.base:g}", f"layout={self.layout!r}"]
        parts += [
            f"{name}={value!r}"
            for name, value, default in (("direction", self.direction, "forward"), ("channels", self.channels, "first"))
            if value != default
        ]
        if self.max_len is not None:
            parts.append(f"max_len={self.max_len}")
        if self.compiled is not None:
            parts.append(f"compiled={self.compiled}")
        if self.angles != "exact":
            parts.append(f"angles={self.angles!r}")
        if self.attention_scaling != 1.0:
            parts.append(f"attention_scaling={self.attention_scaling:.6g}")
        if self.forward_mscale is not None:
            parts.append(f"forward_mscale={self.forward_mscale}, mscale_switch={self.mscale_switch}")
        return ", ".join(parts)
