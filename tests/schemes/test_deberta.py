"""DeBERTa-v2 disentangled attention: full-tensor parity with transformers' DisentangledSelfAttention."""

import math

import pytest
import torch
from torch.func import functional_call

from posembed import SelfAttention
from posembed.schemes.bias.deberta import DebertaRelative, log_bucket_position
from tests.helpers import assert_close
from tests.schemes.bias_checks import check_score_mod, check_score_mod_memory, check_self_attention

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

HIDDEN, HEADS = 32, 2


def hf_model(
    position_buckets=32, max_relative_positions=64, pos_att_type=("p2c", "c2p"), share_att_key=False, norm="layer_norm"
):
    from transformers import DebertaV2Config, DebertaV2Model

    config = DebertaV2Config(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        intermediate_size=64,
        num_hidden_layers=1,
        vocab_size=50,
        max_position_embeddings=128,
        relative_attention=True,
        pos_att_type=list(pos_att_type),
        position_buckets=position_buckets,
        max_relative_positions=max_relative_positions,
        share_att_key=share_att_key,
        norm_rel_ebd=norm,
    )
    torch.manual_seed(0)
    model = DebertaV2Model(config).eval()
    with torch.no_grad():  # HF inits LayerNorm to the identity and zero biases: make every weight matter
        for p in model.encoder.parameters():
            p.normal_(0.0, 0.3)
    return model


def ours_from(model, **kwargs) -> DebertaRelative:
    """A DebertaRelative holding the HF encoder's relative table and the first layer's projections."""
    encoder, attention = model.encoder, model.encoder.layer[0].attention.self
    scheme = DebertaRelative(
        HIDDEN,
        HEADS,
        HIDDEN // HEADS,
        attention_terms=tuple(attention.pos_att_type),
        share_att_key=attention.share_att_key,
        layer_norm=hasattr(encoder, "LayerNorm"),
        **kwargs,
    )
    with torch.no_grad():
        scheme.rel_embeddings.weight.copy_(encoder.rel_embeddings.weight)
        if scheme.norm is not None:
            scheme.norm.load_state_dict(encoder.LayerNorm.state_dict())
        if attention.share_att_key:
            scheme.share_projections(attention.query_proj, attention.key_proj)
        for name in ("pos_key_proj", "pos_query_proj"):
            if getattr(scheme, name) is not None:
                getattr(scheme, name).load_state_dict(getattr(attention, name).state_dict())
    return scheme


def hf_bias_and_probs(model, hidden):
    """HF's c2p + p2c (``disentangled_attention_bias``) and its attention probabilities, plus its q/k."""
    encoder, attention = model.encoder, model.encoder.layer[0].attention.self
    batch, length, _ = hidden.shape
    rel_embeddings, relative_pos = encoder.get_rel_embedding(), encoder.get_rel_pos(hidden)
    query = attention.transpose_for_scores(attention.query_proj(hidden), HEADS)  # (B * H, T, D)
    key = attention.transpose_for_scores(attention.key_proj(hidden), HEADS)
    scale_factor = 1 + len(attention.pos_att_type)
    bias = attention.disentangled_attention_bias(query, key, relative_pos, rel_embeddings, scale_factor)
    mask = torch.ones(batch, 1, length, length, dtype=torch.bool)
    _, probs = attention(hidden, mask, output_attentions=True, relative_pos=relative_pos, rel_embeddings=rel_embeddings)
    shape = (batch, HEADS, length, -1)
    return bias.view(shape), probs, query.view(shape), key.view(shape)


@pytest.mark.parametrize("bucket_size,max_position", [(32, 64), (256, 512), (8, 64)])
def test_log_buckets_equal_transformers(bucket_size, max_position):
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    relative = torch.arange(-1500, 1501)
    assert torch.equal(
        log_bucket_position(relative, bucket_size, max_position),
        make_log_bucket_position(relative, bucket_size, max_position).long(),
    )


CASES = {
    "v2_buckets": {},
    "v3_shared_keys": {"share_att_key": True, "position_buckets": 16, "max_relative_positions": 40},
    "c2p_only_no_norm": {"pos_att_type": ("c2p",), "norm": "none"},
    "no_buckets": {"position_buckets": -1, "max_relative_positions": 24},
}


@pytest.mark.parametrize("case", list(CASES))
def test_bias_equals_transformers_disentangled_attention_bias(case):
    config = dict(CASES[case])
    model = hf_model(**config)
    buckets = config.get("position_buckets", 32)
    scheme = ours_from(
        model,
        position_buckets=None if buckets < 0 else buckets,
        max_relative_positions=config.get("max_relative_positions", 64),
    )
    hidden = torch.randn(2, 80, HIDDEN)  # 80 > max_relative_positions: far buckets and clamping
    with torch.no_grad():
        expected, probs, q, k = hf_bias_and_probs(model, hidden)
        pos = torch.arange(80)
        bias = scheme.bias(pos, pos, q, k)
        assert_close(bias, expected, atol=1e-5, rtol=1e-5)
        # the whole DeBERTa score: q . k and the bias all divided by sqrt(D * s) (scheme.scale)
        ours_probs = torch.softmax(q @ k.transpose(-1, -2) * scheme.scale + bias, dim=-1)
        assert_close(ours_probs, probs, atol=1e-6, rtol=1e-5)


def test_gradcheck_float64():
    scheme = DebertaRelative(4, 1, 2, position_buckets=4, max_relative_positions=10, dtype=torch.float64)
    pos = torch.arange(6)
    q = torch.randn(1, 1, 6, 2, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 1, 6, 2, dtype=torch.float64, requires_grad=True)
    table = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    pos_key = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    pos_query = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)

    def f(q, k, table, pos_key, pos_query):
        values = {"rel_embeddings.weight": table, "pos_key_proj.weight": pos_key, "pos_query_proj.weight": pos_query}
        return functional_call(scheme, values, (pos, pos, q, k), strict=False)

    assert torch.autograd.gradcheck(f, (q, k, table, pos_key, pos_query))


@pytest.mark.parametrize("flex", [True, False])
def test_score_mod_equals_bias(flex):
    scheme = DebertaRelative(16, 4, 8, position_buckets=4, max_relative_positions=16, init_std=1.0)
    pos = torch.tensor([[0, 0, 1, 2, 3, 9], [0, 1, 2, 0, 1, 2]])
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    check_score_mod(scheme, pos, pos, q, k, causal=not flex, flex=flex)
    check_score_mod(scheme, torch.arange(4, 6), torch.arange(6), q[:, :, :2], k, causal=True, flex=False)


def test_cache_rows_equal_the_full_bias():
    scheme = DebertaRelative(16, 2, 8, position_buckets=4, max_relative_positions=16, init_std=1.0)
    q, k = torch.randn(2, 2, 12, 8), torch.randn(2, 2, 12, 8)
    full = scheme.bias(torch.arange(12), torch.arange(12), q, k)
    assert_close(scheme.bias(torch.arange(9, 12), torch.arange(12), q[:, :, 9:], k), full[:, :, 9:])


@pytest.mark.parametrize("causal", [True, False])
def test_self_attention_equals_reference(causal):
    """SelfAttention plus the scheme's bias; HF's bias function as the reference.

    The layer scales q . k by DeBERTa's 1/sqrt(3D) (the scheme's ``attention_scale``); the shared
    reference scales it by 1/sqrt(D), so the difference of the two content terms joins its bias.
    """
    model = hf_model(position_buckets=4, max_relative_positions=16)
    encoder, attention = model.encoder, model.encoder.layer[0].attention.self

    def reference(q, k):
        batch, heads, length, dim = q.shape
        relative_pos = encoder.get_rel_pos(torch.zeros(1, length, HIDDEN))
        flat = (q.reshape(batch * heads, length, dim), k.reshape(batch * heads, length, dim))
        bias = attention.disentangled_attention_bias(*flat, relative_pos, encoder.get_rel_embedding(), 3)
        content = q @ k.transpose(-1, -2) * (1 / math.sqrt(3 * dim) - 1 / math.sqrt(dim))  # (B, H, T, T)
        return bias.view(batch, heads, length, length) + content

    def make():
        return ours_from(model, position_buckets=4, max_relative_positions=16)

    backends = ("sdpa", "eager", "chunked")
    check_self_attention(make, reference, causal=causal, backends=backends, dim=HIDDEN, heads=HEADS, length=12)


def test_shared_projections_follow_the_layer():
    scheme = DebertaRelative(16, 2, 8, position_buckets=4, max_relative_positions=16, share_att_key=True)
    q = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match=r"call scheme.share_projections\(layer.q_proj, layer.k_proj\) first"):
        scheme.bias(torch.arange(3), torch.arange(3), q, q)
    attn = SelfAttention(16, 2, scheme=scheme)
    scheme.share_projections(attn.q_proj, attn.k_proj)
    assert sum(p.numel() for p in scheme.parameters()) == 2 * 4 * 16 + 2 * 16  # table + LayerNorm only
    out = attn(torch.randn(2, 5, 16))
    out.sum().backward()
    assert attn.qkv_proj.weight.grad is not None and scheme.rel_embeddings.weight.grad.abs().sum() > 0
    assert "share_att_key=True" in repr(scheme)


def test_errors():
    with pytest.raises(ValueError, match="attention_terms=.*'c2x'"):
        DebertaRelative(16, 2, 8, attention_terms=("c2x",))
    with pytest.raises(ValueError, match="max_relative_positions=8 must exceed position_buckets // 2 \\+ 1 = 9"):
        DebertaRelative(16, 2, 8, position_buckets=16, max_relative_positions=8)
    with pytest.raises(ValueError, match="share_projections needs DebertaRelative"):
        DebertaRelative(16, 2, 8).share_projections(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16))
    with pytest.raises(ValueError, match="built for head_dim=4"):
        SelfAttention(16, 2, scheme=DebertaRelative(16, 2, 4))
    assert math.isclose(DebertaRelative(16, 2, 8).scale, 1 / math.sqrt(24))


def test_score_mod_captures_no_t_by_t_tensor():
    check_score_mod_memory(
        DebertaRelative(16, 2, 8, position_buckets=8, max_relative_positions=32), heads=2, head_dim=8, per_token=16
    )
