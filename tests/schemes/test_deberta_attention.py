"""SelfAttention with DeBERTa's scheme is transformers' DebertaV2 self-attention, whole.

Not only the c2p + p2c bias (``test_deberta.py``): the content term's scale ``1/sqrt(3D)``, the
masked softmax, the values and the output projection, compared as full tensors with
``DisentangledSelfAttention`` (plus ``DebertaV2SelfOutput.dense``) built from ``DebertaV2Config``
with random weights, on every backend that serves the scheme.

In float32 the comparison is with transformers as it is. In float64 it is to 1e-10: there the
reference's ``scaled_size_sqrt`` (``sqrt(D * s)``, which transformers takes in float32 whatever
the model's dtype) is taken in float64, as posembed takes it, so that the only differences left
are the order of float64 operations.
"""

import math

import pytest
import torch

from posembed import Encoder, SelfAttention
from posembed.nn.attention.backends import AttentionInputs, run_backend
from posembed.nn.model.transformer import build_model
from posembed.schemes.bias.deberta import DebertaRelative
from tests.helpers import assert_close
from tests.schemes.test_deberta import CASES, HEADS, HIDDEN, hf_model, ours_from

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

BACKENDS = ("eager", "sdpa", "chunked", "flex")
LENGTH, PADDING = 80, 11  # 80 > max_relative_positions: far buckets and clamping; row 1 right-padded


def case_model(case: str, dtype: torch.dtype):
    """The HF model of ``CASES[case]`` and the matching scheme, both in ``dtype``."""
    config = dict(CASES[case])
    model = hf_model(**config).to(dtype)
    buckets = config.get("position_buckets", 32)
    scheme = ours_from(
        model,
        position_buckets=None if buckets < 0 else buckets,
        max_relative_positions=config.get("max_relative_positions", 64),
    )
    return model, scheme.to(dtype)


def layer_from(model, scheme: DebertaRelative, backend: str, dtype: torch.dtype) -> SelfAttention:
    """A posembed layer holding HF layer 0's query/key/value projections and ``output.dense``."""
    hf = model.encoder.layer[0].attention
    attn = SelfAttention(HIDDEN, HEADS, scheme=scheme, backend=backend, chunk_size=16, dtype=dtype)
    projections = (hf.self.query_proj, hf.self.key_proj, hf.self.value_proj)
    with torch.no_grad():
        attn.qkv_proj.weight.copy_(torch.cat([p.weight for p in projections]))
        attn.qkv_proj.bias.copy_(torch.cat([p.bias for p in projections]))
        attn.out_proj.load_state_dict(hf.output.dense.state_dict())
    if scheme.share_att_key:
        scheme.share_projections(attn.q_proj, attn.k_proj)
    return attn.eval()


def hf_attention(model, hidden: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's ``output.dense(context)`` ``(B, T, C)`` and attention probabilities ``(B, H, T, T)``."""
    encoder, hf = model.encoder, model.encoder.layer[0].attention
    relative_pos, rel_embeddings = encoder.get_rel_pos(hidden), encoder.get_rel_embedding()
    context, probs = hf.self(
        hidden,
        encoder.get_attention_mask(mask),
        output_attentions=True,
        relative_pos=relative_pos,
        rel_embeddings=rel_embeddings,
    )
    return hf.output.dense(context), probs


def layer_probabilities(attn: SelfAttention, backend: str, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The probabilities the backend computes for the layer: its attention with ``v = I`` (``(B, H, T, T)``)."""
    batch, length, _ = x.shape
    qkv = attn.qkv_proj(x).view(batch, length, 3, HEADS, attn.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, H, T, D)
    q, k = qkv[0], qkv[1]
    identity = torch.eye(length, dtype=x.dtype).expand(batch, HEADS, length, length)  # (B, H, T, T)
    inp = AttentionInputs(
        q=q,
        k=k,
        v=identity,
        scale=attn.softmax_scale,
        causal=False,
        positions=torch.arange(length),
        key_mask=mask.bool(),
        scheme=attn.scheme,
        qk=(q, k),
    )
    return run_backend(backend, inp, chunk_size=16)


def real_rows(t: torch.Tensor, mask: torch.Tensor, axis: int) -> list[torch.Tensor]:
    """Each row's slice of the real query positions along ``axis`` (padding queries are ignored)."""
    return [t[b].narrow(axis - 1, 0, int(mask[b].sum())) for b in range(t.shape[0])]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_layer_equals_transformers_deberta_v2_attention(case, dtype, monkeypatch):
    if dtype == torch.float64:
        from transformers.models.deberta_v2 import modeling_deberta_v2

        exact = lambda layer, factor: torch.sqrt(torch.tensor(layer.size(-1), dtype=torch.float64) * factor)  # noqa: E731
        monkeypatch.setattr(modeling_deberta_v2, "scaled_size_sqrt", exact)
    # float32: outputs reach |8|; 5e-6 is a few float32 roundings of that, probabilities at the default
    output_atol = 5e-6 if dtype == torch.float32 else None
    model, scheme = case_model(case, dtype)
    torch.manual_seed(2)
    hidden = torch.randn(2, LENGTH, HIDDEN, dtype=dtype)
    mask = torch.ones(2, LENGTH, dtype=torch.long)
    mask[1, -PADDING:] = 0
    with torch.no_grad():
        expected, expected_probs = hf_attention(model, hidden, mask)
        for backend in BACKENDS:
            attn = layer_from(model, scheme, backend, dtype)
            assert math.isclose(attn.softmax_scale, 1 / math.sqrt(HIDDEN // HEADS * (1 + len(scheme.attention_terms))))
            out = attn(hidden, attention_mask=mask)
            assert attn.backend_for(hidden, attention_mask=mask) == backend
            probs = layer_probabilities(attn, backend, hidden, mask)
            for ours, theirs in zip(real_rows(out, mask, 1), real_rows(expected, mask, 1)):
                assert_close(ours, theirs, atol=output_atol, msg=f"{case} {backend}: output")
            for ours, theirs in zip(real_rows(probs, mask, 2), real_rows(expected_probs, mask, 2)):
                assert_close(ours, theirs, msg=f"{case} {backend}: probabilities")


def test_plain_scale_is_not_deberta():
    """With ``scale=1/sqrt(D)`` (the scale before the scheme declared its own) the layer is not DeBERTa's."""
    model, scheme = case_model("v2_buckets", torch.float32)
    hidden, mask = torch.randn(1, 12, HIDDEN), torch.ones(1, 12, dtype=torch.long)
    attn = layer_from(model, scheme, "eager", torch.float32)
    plain = SelfAttention(HIDDEN, HEADS, scheme=scheme, backend="eager", scale=1 / math.sqrt(HIDDEN // HEADS))
    plain.load_state_dict(attn.state_dict())
    with torch.no_grad():
        expected, _ = hf_attention(model, hidden, mask)
        assert_close(attn(hidden), expected)
        assert (plain(hidden) - expected).abs().max() > 1e-3


def test_encoder_layers_use_the_scheme_scale_and_round_trip():
    scheme = DebertaRelative(
        16, 2, 8, position_buckets=8, max_relative_positions=32, attention_terms=("c2p",), init_std=1.0
    )
    model = Encoder(20, dim=16, depth=2, num_heads=2, scheme=scheme).eval()
    assert all(block.attn.softmax_scale == 1 / math.sqrt(8 * 2) for block in model.blocks)
    rebuilt = build_model(model.config_dict()).eval()
    rebuilt.load_state_dict(model.state_dict())
    ids = torch.randint(0, 20, (2, 9))
    with torch.no_grad():
        assert torch.equal(rebuilt(ids), model(ids))
    assert rebuilt.config_dict() == model.config_dict()
