"""Encoder / Decoder against a transformer forward written here, loaded with the same weights.

``tests/test_model.py`` checks ~30 variants for shapes, gradients and round trips; this file
checks the *numbers* of one configuration per scheme kind against an independent forward:
plain float64 torch ops (pre-LN blocks, GELU MLP, softmax attention), with the position math
from the reference libraries or the papers, never from posembed:

- absolute: ``positional-encodings``' ``PositionalEncoding1D`` (sinusoidal, tokens scaled by
  ``sqrt(C)`` as Vaswani et al.), and a learned table read from the state dict;
- rotary: transformers' Llama ``apply_rotary_pos_emb`` with ``cos``/``sin`` of
  ``p * base^(-2i/D)`` (the ``"half"`` layout);
- bias: ALiBi with the paper's slopes ``2^(-8h/H)`` and bias ``m_h (j - i)`` (causal) or
  ``-m_h |j - i|`` (symmetric); T5 buckets from transformers' ``T5Attention``.

Every parameter is perturbed away from its init (LayerNorm ones and zero biases would hide
swapped or missing terms), and the logits are compared in full.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from posembed.nn.model.transformer import Decoder, Encoder
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.absolute.sinusoidal import Sinusoidal
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.bias.t5 import T5RelativeBias
from posembed.schemes.rotary.rope import RotaryEmbedding
from tests.helpers import assert_close

VOCAB, DIM, HEADS, DEPTH, LENGTH = 13, 16, 2, 2, 9
HEAD_DIM = DIM // HEADS
EMBEDDING_EPS, BLOCK_EPS = 1e-12, 1e-5  # BERT's embedding LayerNorm; torch's default in the blocks


# --- position math, from the reference libraries and the papers --------------------------------


def sinusoidal_reference(positions: torch.Tensor) -> torch.Tensor:
    """``(T,)`` -> ``(T, C)``: positional-encodings' 1-D table (interleaved sin/cos)."""
    from positional_encodings.torch_encodings import PositionalEncoding1D

    table = PositionalEncoding1D(DIM)(torch.zeros(1, int(positions.max()) + 1, DIM))[0]
    return table[positions].double()


def rope_reference(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, base: float = 10000.0):
    """Rotate ``(B, H, T, D)`` q and k with transformers' Llama ``apply_rotary_pos_emb``."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    inv_freq = torch.tensor([base ** (-2 * i / HEAD_DIM) for i in range(HEAD_DIM // 2)], dtype=torch.float64)
    angles = positions.double()[:, None] * inv_freq  # (T, D/2)
    emb = torch.cat((angles, angles), dim=-1)[None]  # (1, T, D): the "half" layout
    return apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())


def alibi_reference(positions: torch.Tensor, *, symmetric: bool) -> torch.Tensor:
    """``(H, T, T)``: slopes ``2^(-8 h / H)``, h = 1..H (Press et al. 2022, H a power of two)."""
    slopes = torch.tensor([2.0 ** (-8.0 * h / HEADS) for h in range(1, HEADS + 1)], dtype=torch.float64)
    distance = (positions[None, :] - positions[:, None]).double()  # j - i
    if symmetric:
        distance = -distance.abs()
    return slopes[:, None, None] * distance


def t5_reference(
    table: torch.Tensor, positions: torch.Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int
):
    """``(H, T, T)``: ``W[bucket(j - i), h]`` with transformers' T5 bucket function."""
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = positions[None, :] - positions[:, None]
    buckets = T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    return table.double()[buckets].permute(2, 0, 1)


# --- the transformer ---------------------------------------------------------------------------


def reference_forward(
    weights: dict,
    ids: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    causal: bool,
    absolute=None,
    token_scale=1.0,
    rotate=None,
    bias=None,
) -> torch.Tensor:
    """Pre-LN transformer logits ``(B, T, V)`` in float64 from a state dict."""
    w = {name: value.detach().double() for name, value in weights.items()}
    for name in [n for n in w if n.endswith(".attn.qkv_proj.weight") or n.endswith(".attn.qkv_proj.bias")]:
        # one fused (3C, C) projection: rows [0, C) query, [C, 2C) key, [2C, 3C) value
        prefix, kind = name.rsplit(".qkv_proj.", 1)
        for part, value in zip("qkv", w.pop(name).chunk(3, dim=0)):
            w[f"{prefix}.{part}_proj.{kind}"] = value
    batch, length = ids.shape
    positions = torch.arange(length)

    def layer_norm(x, prefix, eps):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * w[f"{prefix}.weight"] + w[f"{prefix}.bias"]

    def linear(x, prefix, bias=True):
        out = x @ w[f"{prefix}.weight"].T
        return out + w[f"{prefix}.bias"] if bias else out

    def heads(x):
        return x.view(batch, length, HEADS, HEAD_DIM).transpose(1, 2)  # (B, H, T, D)

    h = w["embeddings.token_embeddings.weight"][ids] * token_scale
    if absolute is not None:
        h = h + absolute(positions)
    h = layer_norm(h, "embeddings.norm", EMBEDDING_EPS)

    i, j = positions[:, None], positions[None, :]
    visible = torch.ones(length, length, dtype=torch.bool) if not causal else j <= i
    visible = visible[None, None]
    if mask is not None:
        visible = visible & mask.bool()[:, None, None, :]
    visible = visible | (i == j)  # a (padding) query always sees itself
    for layer in range(DEPTH):
        prefix = f"blocks.{layer}"
        a = layer_norm(h, f"{prefix}.ln_1", BLOCK_EPS)
        q, k, v = (heads(linear(a, f"{prefix}.attn.{name}_proj")) for name in "qkv")
        if rotate is not None:
            q, k = rotate(q, k, positions)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)
        if bias is not None:
            scores = scores + bias(positions)
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
        attended = (probs @ v).transpose(1, 2).reshape(batch, length, DIM)
        h = h + linear(attended, f"{prefix}.attn.out_proj")
        m = layer_norm(h, f"{prefix}.ln_2", BLOCK_EPS)
        gelu = F.gelu(linear(m, f"{prefix}.mlp.0"))  # exact (erf) GELU
        h = h + linear(gelu, f"{prefix}.mlp.2")
    return linear(layer_norm(h, "norm", BLOCK_EPS), "head", bias=False)


def _perturbed(model):
    """Move every parameter off its init (LayerNorm 1/0, zero biases) so each term shows."""
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.3 * torch.randn(param.shape, generator=generator))
    return model.eval()


def _inputs():
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(0, VOCAB, (3, LENGTH), generator=generator)
    mask = torch.ones(3, LENGTH, dtype=torch.long)
    mask[1, -3:] = 0  # right padding
    mask[2, -1:] = 0
    return ids, mask


def _t5(bidirectional: bool):
    return T5RelativeBias(HEADS, num_buckets=8, max_distance=6, bidirectional=bidirectional)


CASES = {
    # id: (model class, scheme factory, reference keyword arguments (a function of the model))
    "decoder-sinusoidal": (
        Decoder,
        lambda: Sinusoidal(DIM),
        lambda model: {"absolute": sinusoidal_reference, "token_scale": math.sqrt(DIM)},
    ),
    "encoder-learned": (
        Encoder,
        lambda: LearnedAbsolute(32, DIM),
        lambda model: {"absolute": lambda p: model.scheme.weight.detach().double()[p]},
    ),
    "decoder-rope": (Decoder, lambda: RotaryEmbedding(HEAD_DIM), lambda model: {"rotate": rope_reference}),
    "encoder-rope-base-100": (
        Encoder,
        lambda: RotaryEmbedding(HEAD_DIM, base=100.0),
        lambda model: {"rotate": lambda q, k, p: rope_reference(q, k, p, base=100.0)},
    ),
    "decoder-alibi": (
        Decoder,
        lambda: ALiBi(HEADS),
        lambda model: {"bias": lambda p: alibi_reference(p, symmetric=False)},
    ),
    "encoder-alibi-symmetric": (
        Encoder,
        lambda: ALiBi(HEADS, symmetric=True),
        lambda model: {"bias": lambda p: alibi_reference(p, symmetric=True)},
    ),
    "encoder-t5": (
        Encoder,
        lambda: _t5(True),
        lambda model: {
            "bias": lambda p: t5_reference(model.scheme.weight, p, bidirectional=True, num_buckets=8, max_distance=6)
        },
    ),
    "decoder-t5": (
        Decoder,
        lambda: _t5(False),
        lambda model: {
            "bias": lambda p: t5_reference(model.scheme.weight, p, bidirectional=False, num_buckets=8, max_distance=6)
        },
    ),
    "decoder-none": (Decoder, lambda: None, lambda model: {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_logits_equal_the_reference_forward(case, padded):
    cls, make_scheme, reference_kwargs = CASES[case]
    torch.manual_seed(0)
    model = _perturbed(cls(VOCAB, dim=DIM, depth=DEPTH, num_heads=HEADS, scheme=make_scheme()))
    ids, mask = _inputs()
    mask = mask if padded else None
    with torch.no_grad():
        logits = model(ids, attention_mask=mask)
    expected = reference_forward(model.state_dict(), ids, mask, causal=cls is Decoder, **reference_kwargs(model))
    assert logits.shape == expected.shape == (3, LENGTH, VOCAB)
    assert_close(logits.double(), expected, atol=2e-5, rtol=2e-5, msg=case)


def test_the_reference_is_sensitive_to_the_position_math():
    """The comparison above is not vacuous: a wrong slope, base or layout shows at this size."""
    torch.manual_seed(0)
    model = _perturbed(Decoder(VOCAB, dim=DIM, depth=DEPTH, num_heads=HEADS, scheme=ALiBi(HEADS)))
    ids, _ = _inputs()
    with torch.no_grad():
        logits = model(ids).double()
    halved = reference_forward(
        model.state_dict(), ids, None, causal=True, bias=lambda p: alibi_reference(p, symmetric=False) / 2
    )
    assert (logits - halved).abs().max() > 1e-3
    torch.manual_seed(0)
    rope = _perturbed(Decoder(VOCAB, dim=DIM, depth=DEPTH, num_heads=HEADS, scheme=RotaryEmbedding(HEAD_DIM)))
    with torch.no_grad():
        logits = rope(ids).double()
    other_base = reference_forward(
        rope.state_dict(), ids, None, causal=True, rotate=lambda q, k, p: rope_reference(q, k, p, base=100.0)
    )
    assert (logits - other_base).abs().max() > 1e-3
    torch.manual_seed(0)
    concat = _perturbed(Decoder(VOCAB, dim=DIM, depth=DEPTH, num_heads=HEADS, scheme=Sinusoidal(DIM, layout="concat")))
    with torch.no_grad():
        logits = concat(ids).double()
    interleaved = reference_forward(
        concat.state_dict(), ids, None, causal=True, absolute=sinusoidal_reference, token_scale=math.sqrt(DIM)
    )
    assert (logits - interleaved).abs().max() > 1e-3
