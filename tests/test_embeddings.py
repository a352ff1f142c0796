import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from posembed import LearnedAbsolute, LearnedParameter, Sinusoidal, Sinusoidal2D, Sinusoidal3D, TransformerEmbeddings
from posembed.interop.hf import save_embeddings
from posembed.schemes.absolute.sinusoidal_nd import grid_coordinates
from posembed.schemes.base import AbsoluteScheme, BiasScheme, RotaryScheme
from tests.helpers import assert_close


class Seed004Embeddings(nn.Module):
    """The module of seed 004 (token + learned position + LayerNorm), as the question wrote it."""

    def __init__(self, vocab_size, hidden_size, max_position_embeddings):
        super().__init__()
        self.token_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.layer_norm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.dropout = nn.Dropout()

    def forward(self, input_ids):
        seq_length = input_ids.size(1)
        position_ids = torch.arange(seq_length, dtype=torch.long).unsqueeze(0)
        embeddings = self.token_embeddings(input_ids) + self.position_embeddings(position_ids)
        return self.dropout(self.layer_norm(embeddings))


class RampPositions(AbsoluteScheme):
    """A parameter-free absolute scheme with no length limit (fp32 math), for the tests."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, position_ids):
        scale = torch.arange(1, self.dim + 1, dtype=torch.float32)
        return torch.sin(position_ids.float().unsqueeze(-1) / scale)


class TinyRotary(RotaryScheme):
    head_dim = 4

    def forward(self, q, k, position_ids=None, k_position_ids=None):
        return q, k


class TinyBias(BiasScheme):
    num_heads = 2

    def bias(self, q_positions, k_positions, q=None, k=None):
        return None


def _block(combine="add", pos_dim=8, hidden=8, token_dim=None, type_vocab_size=2, vocab=40, max_len=16):
    torch.manual_seed(1)
    emb = TransformerEmbeddings(
        vocab,
        hidden,
        position=LearnedAbsolute(max_len, pos_dim),
        combine=combine,
        token_dim=token_dim,
        type_vocab_size=type_vocab_size,
    )
    with torch.no_grad():  # non-trivial LayerNorm affine
        emb.norm.weight.normal_()
        emb.norm.bias.normal_()
    return emb.eval()


def test_seed_004_module_equals_block_without_segments():
    seed = Seed004Embeddings(50, 12, 20).eval()
    emb = TransformerEmbeddings(50, 12, position=LearnedAbsolute(20, 12), type_vocab_size=0, pad_token_id=None).eval()
    with torch.no_grad():
        seed.layer_norm.weight.normal_()
        emb.token_embeddings.weight.copy_(seed.token_embeddings.weight)
        emb.position.embedding.weight.copy_(seed.position_embeddings.weight)
        emb.norm.load_state_dict(seed.layer_norm.state_dict())
    ids = torch.randint(0, 50, (3, 20))
    assert torch.equal(emb(ids), seed(ids))


def test_add_is_word_plus_type_then_position_then_layernorm():
    emb = _block()
    ids, types = torch.randint(0, 40, (2, 7)), torch.randint(0, 2, (2, 7))
    positions = torch.randint(0, 16, (2, 7))
    x = emb.token_embeddings.weight[ids] + emb.token_type_embeddings.weight[types]
    x = x + emb.position.weight[positions]
    expected = nn.functional.layer_norm(x, (8,), emb.norm.weight, emb.norm.bias, eps=1e-12)
    assert torch.equal(emb(ids, types, positions), expected)
    # no token types = segment 0 everywhere, as BERT
    assert torch.equal(emb(ids), emb(ids, torch.zeros_like(ids)))


def test_explicit_positions_in_every_shape_equal_the_default():
    emb = _block()
    ids = torch.randint(0, 40, (3, 9))
    default = emb(ids)
    for positions in (torch.arange(9), torch.arange(9)[None], torch.arange(9).expand(3, 9)):
        assert torch.equal(emb(ids, position_ids=positions), default)


def test_dropout_is_applied_in_training_only():
    emb = _block().train()
    ids = torch.randint(1, 40, (4, 16))
    out = emb(ids)
    assert (out == 0).float().mean() > 0.03
    assert torch.equal(emb.eval()(ids), emb.components(ids).output)


def test_padding_row_is_zero_and_gets_no_gradient():
    emb = _block()
    assert torch.equal(emb.token_embeddings.weight[0], torch.zeros(8))
    emb(torch.tensor([[0, 3, 0, 5]])).sum().backward()
    assert torch.equal(emb.token_embeddings.weight.grad[0], torch.zeros(8))
    assert emb.token_embeddings.weight.grad[3].abs().sum() > 0
    assert emb.position.weight.grad[:4].abs().sum() > 0


def test_concat_without_projection_splits_the_hidden_width():
    emb = _block("concat", pos_dim=3)
    assert emb.token_embeddings.embedding_dim == 5 and emb.projection is None
    ids, types = torch.randint(0, 40, (2, 6)), torch.randint(0, 2, (2, 6))
    tok, pos = emb.token_embeddings(ids), emb.position.weight[:6].expand(2, 6, 3)
    pre = torch.cat([tok, pos], -1) + emb.token_type_embeddings(types)
    assert_close(emb.components(ids, types).combined, pre)
    assert_close(emb(ids, types), emb.norm(pre))
    # re-injection vectors put the position in its own channels
    assert_close(emb.position_embeddings(torch.arange(6)), nn.functional.pad(emb.position.weight[:6], (5, 0)))


def test_concat_with_projection_maps_back_to_hidden():
    emb = _block("concat", pos_dim=6, hidden=8, token_dim=10)
    assert emb.token_embeddings.embedding_dim == 10 and emb.projection.in_features == 16
    ids = torch.randint(0, 40, (2, 5))
    tok, pos = emb.token_embeddings(ids), emb.position.weight[:5].expand(2, 5, 6)
    pre = emb.projection(torch.cat([tok, pos], -1)) + emb.token_type_embeddings.weight[0]
    assert_close(emb.components(ids).combined, pre)
    emb(ids).sum().backward()
    assert emb.projection.weight.grad.abs().sum() > 0 and emb.position.weight.grad.abs().sum() > 0


@settings(max_examples=25, deadline=None)
@given(
    combine=st.sampled_from(["add", "concat", "project"]),
    batch=st.integers(1, 3),
    length=st.integers(1, 12),
    types=st.integers(0, 3),
    offset=st.integers(0, 4),
)
def test_components_sum_to_the_combined_input(combine, batch, length, types, offset):
    """For every variant, token + position + segment == what the block normalises."""
    kwargs = {
        "add": {},
        "concat": {"combine": "concat", "pos_dim": 3},
        "project": {"combine": "concat", "pos_dim": 5, "token_dim": 7},
    }[combine]
    emb = _block(type_vocab_size=types, **kwargs)
    ids = torch.randint(0, 40, (batch, length))
    token_types = torch.randint(0, types, (batch, length)) if types else None
    positions = torch.arange(length) + offset
    parts = emb.components(ids, token_types, positions)
    assert_close(parts.token + parts.position + parts.segment, parts.combined)
    assert_close(parts.position, emb.position_embeddings(positions).expand_as(parts.combined))
    assert torch.equal(parts.output, emb(ids, token_types, positions))


def test_unlimited_fp32_scheme_is_cast_to_the_block_dtype():
    emb = TransformerEmbeddings(30, 6, position=RampPositions(6), dtype=torch.bfloat16).eval()
    assert emb.max_positions is None
    ids = torch.randint(0, 30, (2, 700))
    out = emb(ids, position_ids=torch.arange(700) + 5000)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 700, 6)
    pre = (
        emb.token_embeddings(ids)
        + emb.token_type_embeddings.weight[0]
        + RampPositions(6)(torch.arange(700) + 5000).bfloat16()
    )
    assert_close(emb.components(ids, position_ids=torch.arange(700) + 5000).combined, pre)


def test_no_position_scheme_embeds_tokens_only():
    emb = TransformerEmbeddings(30, 4, position=None, type_vocab_size=0).eval()
    ids = torch.randint(0, 30, (2, 3))
    assert_close(emb(ids), emb.norm(emb.token_embeddings(ids)))
    with pytest.raises(ValueError, match="no position scheme"):
        emb.position_embeddings(torch.arange(3))


def test_learned_parameter_scheme_gives_the_same_block():
    a = _block()
    b = TransformerEmbeddings(40, 8, position=LearnedParameter(16, 8)).eval()
    b.load_state_dict({k.replace("position.embedding.weight", "position.weight"): v for k, v in a.state_dict().items()})
    ids = torch.randint(0, 40, (2, 16))
    assert torch.equal(a(ids), b(ids))


def test_reset_parameters_and_repr():
    emb = _block()
    emb.reset_parameters()
    assert torch.equal(emb.norm.weight, torch.ones(8)) and torch.equal(emb.token_embeddings.weight[0], torch.zeros(8))
    assert 0.01 < float(emb.token_embeddings.weight[1:].detach().std()) < 0.03
    assert "combine='add'" in repr(emb) and "vocab_size=40" in repr(emb)


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize("scheme", [TinyRotary(), TinyBias()])
def test_rotary_and_bias_schemes_point_to_the_attention_layer(scheme):
    with pytest.raises(TypeError, match="attention layer"):
        TransformerEmbeddings(10, 4, position=scheme)


def test_input_ids_outside_vocab_or_float():
    emb = _block()
    with pytest.raises(ValueError, match=r"input_ids holds 40, outside \[0, 40\)"):
        emb(torch.tensor([[1, 40]]))
    with pytest.raises(ValueError, match=r"input_ids holds -1"):
        emb(torch.tensor([[-1, 2]]))
    with pytest.raises(TypeError, match="input_ids must hold integers"):
        emb(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"shape \(B, T\)"):
        emb(torch.tensor([1, 2]))


def test_token_types_outside_table_or_without_table():
    emb = _block()
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"token_type_ids holds 2, outside \[0, 2\).*type_vocab_size=2"):
        emb(ids, torch.tensor([[0, 1, 2]]))
    with pytest.raises(TypeError, match="token_type_ids must hold integers"):
        emb(ids, torch.tensor([[0.0, 1.0, 1.0]]))
    with pytest.raises(ValueError, match="type_vocab_size=0"):
        _block(type_vocab_size=0)(ids, torch.zeros_like(ids))


def test_positions_beyond_the_learned_table_name_size_and_ways_out():
    emb = _block(max_len=16)
    with pytest.raises(ValueError, match=r"position_ids holds 16, outside \[0, 16\).*Sinusoidal.*interpolat"):
        emb(torch.randint(0, 40, (1, 17)))
    with pytest.raises(ValueError, match=r"holds 20"):
        emb(torch.randint(0, 40, (1, 4)), position_ids=torch.arange(4) + 17)
    with pytest.raises(TypeError, match="position_ids must hold integers"):
        emb(torch.randint(0, 40, (1, 4)), position_ids=torch.arange(4.0))


def test_mismatched_shapes_name_both():
    emb = _block()
    ids = torch.randint(0, 40, (2, 5))
    with pytest.raises(ValueError, match=r"token_type_ids has shape \(2, 4\) but input_ids has shape \(2, 5\)"):
        emb(ids, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"position_ids has shape \(3, 5\) but input_ids has shape \(2, 5\)"):
        emb(ids, position_ids=torch.zeros(3, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"position_ids has shape \(6,\)"):
        emb(ids, position_ids=torch.arange(6))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"position": LearnedAbsolute(8, 6)}, r"position width.*hidden_size=8.*dim=6"),
        ({"position": LearnedAbsolute(8, 8), "combine": "concat"}, r"dim=8 leaves no room.*hidden_size=8"),
        ({"position": LearnedAbsolute(8, 8), "combine": "sum"}, r"combine must be one of.*'sum'"),
        ({"position": None, "combine": "concat"}, "needs a position scheme"),
        ({"position": LearnedAbsolute(8, 8), "token_dim": 4}, r"token_dim=4 needs combine='concat'"),
        ({"position": LearnedAbsolute(8, 8), "pad_token_id": 50}, r"pad_token_id=50 is outside \[0, vocab_size=50\)"),
        ({"position": LearnedAbsolute(8, 8), "type_vocab_size": -1}, r"type_vocab_size must be an int >= 0.*got -1"),
        ({"position": LearnedAbsolute(8, 8), "vocab_size": 0}, "vocab_size must be positive, got 0"),
    ],
)
def test_bad_construction(kwargs, match):
    args = {"vocab_size": 50, "hidden_size": 8, **kwargs}
    with pytest.raises(ValueError, match=match):
        TransformerEmbeddings(args.pop("vocab_size"), args.pop("hidden_size"), **args)


def test_a_scheme_passed_in_keeps_its_values():
    table = LearnedAbsolute(16, 8)
    before = table.weight.detach().clone()
    emb = TransformerEmbeddings(50, 8, position=table)
    assert torch.equal(emb.position.weight, before)
    emb.reset_parameters()  # an explicit reset re-initialises every part, the table included
    assert not torch.equal(emb.position.weight, before)


# ---------------------------------------------------------------------- coordinates (2-D / 3-D schemes)


@pytest.mark.parametrize(("cls", "sizes"), [(Sinusoidal2D, (3, 4)), (Sinusoidal3D, (2, 3, 2))])
@pytest.mark.parametrize("batched", [False, True])
def test_coordinate_schemes_add_scheme_of_coordinates(cls, sizes, batched):
    torch.manual_seed(2)
    emb = TransformerEmbeddings(40, 12, position=cls(12)).eval()
    assert emb.num_axes == len(sizes) and emb.max_positions is None
    length = math.prod(sizes)
    ids, types = torch.randint(0, 40, (2, length)), torch.randint(0, 2, (2, length))
    coords = grid_coordinates(*sizes)  # (T, A)
    if batched:
        coords = torch.stack([coords, coords.flip(0) + 1])  # (B, T, A): each row its own coordinates
    x = emb.token_embeddings(ids) + emb.token_type_embeddings(types) + cls(12)(coords)
    expected = nn.functional.layer_norm(x, (12,), emb.norm.weight, emb.norm.bias, eps=1e-12)
    assert_close(emb(ids, types, coords), expected)
    parts = emb.components(ids, types, coords)
    assert_close(parts.token + parts.position + parts.segment, parts.combined)


def test_coordinate_schemes_need_coordinates_matching_the_ids():
    emb = TransformerEmbeddings(40, 8, position=Sinusoidal2D(8))
    ids = torch.randint(0, 40, (2, 6))
    with pytest.raises(
        ValueError, match=r"Sinusoidal2D embeds 2-D coordinates, so position_ids are required.*\(6, 2\)"
    ):
        emb(ids)
    with pytest.raises(
        ValueError, match=r"position_ids has shape \(6,\), but Sinusoidal2D takes coordinates of shape \(6, 2\)"
    ):
        emb(ids, position_ids=torch.arange(6))
    with pytest.raises(ValueError, match=r"shape \(5, 2\).*input_ids of shape \(2, 6\)"):
        emb(ids, position_ids=grid_coordinates(1, 5))
    with pytest.raises(ValueError, match=r"shape \(3, 6, 2\)"):
        emb(ids, position_ids=grid_coordinates(2, 3).expand(3, 6, 2))
    with pytest.raises(ValueError, match=r"shape \(6, 3\)"):
        emb(ids, position_ids=grid_coordinates(1, 2, 3))
    with pytest.raises(ValueError, match="coordinates holds -1"):
        emb(ids, position_ids=grid_coordinates(2, 3) - 1)
    with pytest.raises(TypeError, match="must hold integers"):
        emb(ids, position_ids=grid_coordinates(2, 3).float())
    one_row = grid_coordinates(2, 3)[None]  # (1, T, A) broadcasts over the batch
    assert_close(emb.eval()(ids, position_ids=one_row), emb(ids, position_ids=one_row[0]), atol=0, rtol=0)


# ---------------------------------------------------------------------- broadcast token types


def test_token_types_of_shape_1_t_broadcast_like_positions():
    for kwargs in ({}, {"combine": "concat", "pos_dim": 3}, {"combine": "concat", "pos_dim": 5, "token_dim": 7}):
        emb = _block(**kwargs)
        ids = torch.randint(0, 40, (3, 6))
        types = torch.tensor([[0, 0, 0, 1, 1, 1]])
        expected = emb(ids, types.expand(3, 6), torch.arange(6).expand(3, 6))
        assert_close(emb(ids, types, torch.arange(6)[None]), expected, atol=0, rtol=0)
        assert_close(emb(ids, types[0], torch.arange(6)), expected, atol=0, rtol=0)
        parts = emb.components(ids, types)
        assert_close(parts.token + parts.position + parts.segment, parts.combined)
    with pytest.raises(
        ValueError, match=r"token_type_ids has shape \(2, 6\) but input_ids has shape \(3, 6\).*\(1, T\)"
    ):
        emb(ids, torch.zeros(2, 6, dtype=torch.long))


# ---------------------------------------------------------------------- compile and meta device


def _compile_parity(module, *args, backend="aot_eager"):
    torch._dynamo.reset()
    compiled = torch.compile(module, backend=backend, fullgraph=True)
    assert_close(compiled(*args), module(*args), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "sinusoidal_cached"])
def test_compiled_equals_eager_without_graph_breaks(position):
    scheme = {
        "learned": lambda: LearnedAbsolute(16, 8),
        "sinusoidal": lambda: Sinusoidal(8),
        "sinusoidal_cached": lambda: Sinusoidal(8, max_len=16),
    }[position]()
    emb = TransformerEmbeddings(40, 8, position=scheme).eval()
    ids, types = torch.randint(0, 40, (2, 7)), torch.randint(0, 2, (2, 7))
    _compile_parity(emb, ids, types, torch.arange(7) + 3)
    _compile_parity(emb, ids)


def test_compiled_with_inductor_equals_eager():
    emb = _block()
    ids, types = torch.randint(0, 40, (2, 9)), torch.randint(0, 2, (2, 9))
    _compile_parity(emb, ids, types, backend="inductor")


def test_meta_device_forward_checks_shapes_not_values():
    for scheme in (LearnedAbsolute(16, 8, device="meta"), Sinusoidal(8, device="meta")):
        emb = TransformerEmbeddings(40, 8, position=scheme, device="meta")
        out = emb(torch.zeros(2, 5, dtype=torch.long, device="meta"))
        assert out.is_meta and out.shape == (2, 5, 8)
        with pytest.raises(TypeError, match="input_ids must hold integers"):
            emb(torch.zeros(2, 5, device="meta"))
        with pytest.raises(ValueError, match=r"token_type_ids has shape \(2, 4\)"):
            emb(torch.zeros(2, 5, dtype=torch.long, device="meta"), torch.zeros(2, 4, dtype=torch.long, device="meta"))


def test_token_scale_multiplies_tokens_and_starts_them_at_unit_std():
    from posembed import Sinusoidal

    emb = TransformerEmbeddings(1000, 64, position=Sinusoidal(64), type_vocab_size=0, token_scale=8.0).eval()
    ids = torch.randint(0, 1000, (2, 5))
    expected = emb.norm(emb.token_embeddings(ids) * 8.0 + emb.position(torch.arange(5)))
    assert_close(emb(ids), expected)
    assert abs(float((emb.token_embeddings.weight.detach() * 8.0).std()) - 1.0) < 0.05
    learned = TransformerEmbeddings(1000, 64, position=LearnedAbsolute(8, 64), token_scale=8.0)
    with pytest.raises(ValueError, match="token_scale=8"):
        save_embeddings(learned, "/nonexistent-never-written")


@pytest.mark.parametrize("segments", [2, 0])
def test_fast_path_equals_the_eager_formula_forward_and_backward(segments):
    """The learned-table block runs the fused path; values and gradients equal plain autograd."""
    emb = TransformerEmbeddings(60, 16, position=LearnedAbsolute(32, 16), type_vocab_size=segments, dropout=0.0)
    assert emb._fused_applies(torch.arange(9))
    ids, types = torch.randint(0, 60, (3, 9)), torch.randint(0, 2, (3, 9)) if segments else None
    positions = torch.randint(0, 32, (3, 9))
    out = emb(ids, types, positions)
    grad = torch.randn_like(out)
    out.backward(grad)
    fast = {name: p.grad.clone() for name, p in emb.named_parameters()}
    emb.zero_grad()
    x = emb.token_embeddings(ids)
    if segments:
        x = x + emb.token_type_embeddings(types)
    x = x + emb.position.embedding(positions)
    expected = nn.functional.layer_norm(x, (16,), emb.norm.weight, emb.norm.bias, eps=emb.norm.eps)
    assert torch.equal(out, expected)
    expected.backward(grad)
    for name, p in emb.named_parameters():
        assert_close(fast[name], p.grad, msg=name)
