"""posembed.kernels.embedding against Hugging Face ``BertEmbeddings`` (forward and every gradient)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.kernels.embedding import combined_table, fused_embedding
from tests.helpers import assert_close

transformers = pytest.importorskip("transformers")
from transformers import BertConfig  # noqa: E402
from transformers.models.bert.modeling_bert import BertEmbeddings  # noqa: E402


def _bert(vocab=50, width=16, positions=24, types=2):
    config = BertConfig(
        vocab_size=vocab,
        hidden_size=width,
        max_position_embeddings=positions,
        type_vocab_size=types,
        hidden_dropout_prob=0.0,
        pad_token_id=0,
    )
    module = BertEmbeddings(config)
    with torch.no_grad():  # non-trivial LayerNorm affine so its gradients are tested too
        module.LayerNorm.weight.uniform_(0.5, 1.5)
        module.LayerNorm.bias.normal_()
    return module, config


def _fused(module, ids, *, position_ids=None, token_type_ids=None, dropout=0.0, training=False):
    return fused_embedding(
        ids,
        module.word_embeddings.weight,
        module.position_embeddings.weight,
        position_ids=position_ids,
        token_type_ids=token_type_ids,
        type_weight=module.token_type_embeddings.weight,
        norm_weight=module.LayerNorm.weight,
        norm_bias=module.LayerNorm.bias,
        eps=module.LayerNorm.eps,
        dropout=dropout,
        training=training,
        padding_idx=0,
    )


def _grads(module, out, grad):
    for p in module.parameters():
        p.grad = None
    out.backward(grad)
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("with_types", [False, True])
@pytest.mark.parametrize("with_positions", [False, True])
def test_forward_and_gradients_match_bert_embeddings(with_types, with_positions):
    module, config = _bert()
    ids = torch.randint(0, config.vocab_size, (3, 20))
    ids[0, :4] = 0  # padding tokens: their word row must get no gradient
    types = torch.randint(0, 2, (3, 20)) if with_types else None
    positions = torch.randint(0, config.max_position_embeddings, (3, 20)) if with_positions else None
    grad = torch.randn(3, 20, config.hidden_size)

    expected = module(ids, token_type_ids=types, position_ids=positions)
    expected_grads = _grads(module, expected, grad)
    actual = _fused(module, ids, token_type_ids=types, position_ids=positions)
    actual_grads = _grads(module, actual, grad)

    assert_close(actual, expected)
    assert actual_grads.keys() == expected_grads.keys()
    for name in expected_grads:
        assert_close(actual_grads[name], expected_grads[name], atol=2e-5, msg=name)
    assert torch.count_nonzero(actual_grads["word_embeddings.weight"][0]) == 0


def test_chunked_path_matches_on_many_chunks(monkeypatch):
    """Several row chunks (tiny CHUNK_ELEMENTS) give the same result as one."""
    import posembed.kernels.embedding as fused

    module, config = _bert()
    ids = torch.randint(0, config.vocab_size, (4, 24))
    grad = torch.randn(4, 24, config.hidden_size)
    one = _fused(module, ids)
    one_grads = _grads(module, one, grad)
    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 5 * config.hidden_size)  # 5 rows per chunk
    many = _fused(module, ids)
    many_grads = _grads(module, many, grad)
    assert_close(many, one)
    for name in one_grads:
        assert_close(many_grads[name], one_grads[name], atol=2e-5, msg=name)


def test_dropout_in_training_scales_kept_values_and_masks_the_gradient():
    module, config = _bert(width=64)
    ids = torch.randint(1, config.vocab_size, (4, 24))
    reference = module(ids)
    out = _fused(module, ids, dropout=0.25, training=True)
    kept = out != 0
    assert 0.6 < kept.float().mean().item() < 0.9
    assert_close(out[kept], reference[kept] / 0.75)
    # the gradient flows only through kept values: compare with the eager graph under the same mask
    grad = torch.randn_like(out)
    fused_grads = _grads(module, out, grad)
    eager = module(ids) * kept / 0.75
    eager_grads = _grads(module, eager, grad)
    for name in eager_grads:
        assert_close(fused_grads[name], eager_grads[name], atol=2e-5, msg=name)
    # eval ignores dropout
    assert_close(_fused(module, ids, dropout=0.25, training=False), reference)


def test_frozen_tables_get_no_gradient():
    module, config = _bert()
    module.word_embeddings.weight.requires_grad_(False)
    module.position_embeddings.weight.requires_grad_(False)
    ids = torch.randint(0, config.vocab_size, (2, 8))
    out = _fused(module, ids)
    out.sum().backward()
    assert module.word_embeddings.weight.grad is None
    assert module.position_embeddings.weight.grad is None
    assert module.token_type_embeddings.weight.grad is not None
    assert module.LayerNorm.weight.grad is not None


@settings(max_examples=15, deadline=None)
@given(
    batch=st.integers(1, 3),
    length=st.integers(1, 12),
    table=st.integers(12, 16),
    types=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_property_equals_gather_add_layer_norm(batch, length, table, types, seed):
    g = torch.Generator().manual_seed(seed)
    word, pos, typ = (
        torch.randn(7, 8, generator=g),
        torch.randn(table, 8, generator=g),
        torch.randn(types, 8, generator=g),
    )
    ids = torch.randint(0, 7, (batch, length), generator=g)
    tt = torch.randint(0, types, (batch, length), generator=g)
    pids = torch.randint(0, table, (batch, length), generator=g)
    expected = torch.nn.functional.layer_norm(word[ids] + typ[tt] + pos[pids], (8,), eps=1e-12)
    actual = fused_embedding(ids, word, pos, position_ids=pids, token_type_ids=tt, type_weight=typ)
    assert_close(actual, expected, atol=1e-5)


def test_combined_table_rows():
    pos, typ = torch.randn(5, 3), torch.randn(2, 3)
    table = combined_table(pos, typ)
    assert table.shape == (10, 3)
    assert_close(table[1 * 5 + 3], typ[1] + pos[3])
    assert combined_table(pos) is pos


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"ids": torch.tensor([[0, 10]])}, ValueError, r"input_ids holds 10, outside \[0, 10\)"),
        ({"ids": torch.tensor([0, 1])}, ValueError, r"input_ids must have shape \(B, T\)"),
        ({"ids": torch.tensor([[0.0, 1.0]])}, TypeError, "must hold integers"),
        ({"position_ids": torch.tensor([0, 8])}, ValueError, r"position_ids holds 8, outside \[0, 8\)"),
        ({"position_ids": torch.tensor([0, 1, 2])}, ValueError, r"position_ids has shape \(3,\)"),
        ({"token_type_ids": torch.tensor([[0, 2]])}, ValueError, r"token_type_ids holds 2, outside \[0, 2\)"),
        ({"ids": torch.zeros(1, 9, dtype=torch.long)}, ValueError, "sequence length 9 exceeds .* 8 rows"),
        ({"dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\), got 1.0"),
        ({"pos": torch.randn(8, 5)}, ValueError, "same C"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, error, match):
    word, pos, typ = torch.randn(10, 4), torch.randn(8, 4), torch.randn(2, 4)
    ids = kwargs.pop("ids", torch.tensor([[1, 2]]))
    pos = kwargs.pop("pos", pos)
    with pytest.raises(error, match=match):
        fused_embedding(ids, word, pos, type_weight=typ, **kwargs)


def test_compiled_inference_variant_matches_bert_embeddings():
    module, config = _bert()
    module.eval()
    ids = torch.randint(0, config.vocab_size, (3, 20))
    types = torch.randint(0, 2, (3, 20))
    with torch.no_grad():
        expected = module(ids, token_type_ids=types)
        actual = fused_embedding(
            ids,
            module.word_embeddings.weight,
            module.position_embeddings.weight,
            token_type_ids=types,
            type_weight=module.token_type_embeddings.weight,
            norm_weight=module.LayerNorm.weight,
            norm_bias=module.LayerNorm.bias,
            eps=module.LayerNorm.eps,
            compiled=True,
        )
    assert_close(actual, expected)


def test_reused_chunk_buffers_follow_width_dtype_and_threads(monkeypatch):
    """The per-thread chunk buffers are reused across calls of other widths, dtypes and threads."""
    from concurrent.futures import ThreadPoolExecutor

    import posembed.kernels.embedding as fused

    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 64)  # many chunks, buffers resized between calls

    def check(width, dtype, seed):
        g = torch.Generator().manual_seed(seed)
        word = torch.randn(9, width, generator=g, dtype=dtype)
        pos = torch.randn(12, width, generator=g, dtype=dtype)
        ids = torch.randint(0, 9, (3, 12), generator=g)
        expected = torch.nn.functional.layer_norm(word[ids] + pos, (width,), eps=1e-12)
        assert_close(fused_embedding(ids, word, pos), expected, atol=1e-5)

    for width, dtype in ((16, torch.float32), (40, torch.float64), (8, torch.float32), (40, torch.float32)):
        check(width, dtype, width)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda seed: check(8 + seed % 3 * 8, torch.float32, seed), range(8)))
    fused.clear_workspace()
    check(16, torch.float32, 0)


def test_dropout_is_reproducible_under_manual_seed():
    module, config = _bert(width=32)
    ids = torch.randint(1, config.vocab_size, (2, 16))
    torch.manual_seed(7)
    first = _fused(module, ids, dropout=0.1, training=True)
    second = _fused(module, ids, dropout=0.1, training=True)
    torch.manual_seed(7)
    again = _fused(module, ids, dropout=0.1, training=True)
    assert torch.equal(first, again)
    assert not torch.equal(first, second)


def test_frozen_layer_norm_takes_the_partial_backward():
    module, config = _bert()
    module.LayerNorm.weight.requires_grad_(False)
    ids = torch.randint(0, config.vocab_size, (2, 8))
    grad = torch.randn(2, 8, config.hidden_size)
    expected = _grads(module, module(ids), grad)
    actual = _grads(module, _fused(module, ids), grad)
    assert "LayerNorm.weight" not in actual
    for name in expected:
        assert_close(actual[name], expected[name], atol=2e-5, msg=name)
