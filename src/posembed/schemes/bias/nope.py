"""NoPE: no positional encoding at all (Kazemnejad et al., NeurIPS 2023).

A causal decoder can still infer positions (the causal mask breaks the symmetry), and on
small algorithmic tasks NoPE generalised to longer inputs best of the schemes compared.
A bidirectional encoder without positions is permutation-equivariant: it sees a bag of tokens.
"""

from __future__ import annotations

from torch import Tensor

from posembed.schemes.base import BiasScheme, ScoreMod

__all__ = ["NoPE"]


class NoPE(BiasScheme):
    """The empty bias scheme: adds nothing to the logits, for any head count.

    It is a bias-kind scheme so that an attention layer can take it like any other; both views
    of the bias are ``None`` (the attention layer then runs plain attention). The positions
    are ignored. Kazemnejad et al. report the best length generalisation of five schemes
    (mean reciprocal rank 0.687; copy, trained to 20 tokens and tested to 40: 0.965 accuracy),
    hence ``extrapolates = True`` (for causal decoders on those tasks).

    Shape:
        - q_positions, k_positions, q, k: as any bias scheme; unused.
        - bias output: ``None``.

    Example:
        >>> import torch
        >>> nope = NoPE()
        >>> nope.bias(torch.arange(4), torch.arange(4)) is None
        True
        >>> nope.check_attention(num_heads=7, head_dim=5, causal=True)
    """

    name = "nope"
    adds_bias = False
    paper = "Kazemnejad et al. 2023 (NeurIPS)"
    extrapolates = True
    built_for = ()  # any attention layer

    def __init__(self) -> None:
        super().__init__()
        #: NoPE serves any head count; ``None`` says so. The one bias scheme without a head count
        #: (``BiasScheme.num_heads`` is an int): readers ask ``adds_bias`` before they read it.
        self.num_heads = None  # type: ignore[assignment]

    def reset_parameters(self) -> None:
        """Nothing to reset: NoPE has no parameters or buffers."""

    def bias(self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None) -> None:
        return None

    def score_mod(
        self, q_positions: Tensor, k_positions: Tensor, q: Tensor | None = None, k: Tensor | None = None
    ) -> ScoreMod | None:
        return None
