"""The fused embedding's dropout behaves like ``nn.Dropout``: rate ``p``, scale exactly ``1/(1-p)``;
and the block sends inputs the fused path does not cover to its eager path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed.kernels import dropout
from posembed.kernels import embedding as fused
from posembed.kernels.dropout import KeepMask, sparse_positions
from tests.helpers import assert_close


def _tables(width=64, vocab=50, positions=32):
    torch.manual_seed(0)
    return torch.randn(vocab, width), torch.randn(positions, width), torch.randn(2, width)


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5])
def test_kept_values_are_scaled_by_exactly_one_over_one_minus_p(p):
    word, pos, typ = _tables()
    ids = torch.randint(0, 50, (4, 32))
    normed = fused.fused_embedding(ids, word, pos, type_weight=typ)  # eval: no dropout
    out = fused.fused_embedding(ids, word, pos, type_weight=typ, dropout=p, training=True)
    kept = out != 0
    assert torch.equal(out[kept], (normed * (1.0 / (1.0 - p)))[kept])
    ratio = (out[kept] / normed[kept]).double()
    assert_close(ratio, torch.full_like(ratio, 1.0 / (1.0 - p)), atol=0, rtol=2e-7)


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_keep_rate_is_within_a_binomial_bound_of_one_minus_p(p):
    word, pos, typ = _tables(width=256)
    torch.manual_seed(1)
    ids = torch.randint(0, 50, (32, 32))
    kept = 0
    count = 0
    for _ in range(4):
        out = fused.fused_embedding(ids, word, pos, type_weight=typ, dropout=p, training=True)
        kept += int((out != 0).sum())
        count += out.numel()
    sigma = math.sqrt(p * (1 - p) / count)
    assert abs(kept / count - (1 - p)) < 5 * sigma, (kept / count, 1 - p, sigma)


def test_the_two_kinds_of_drop_add_up_to_exactly_p():
    """16-bit draws below ``floor(p * 2**16)`` plus independent sparse drops: ``a + (1 - a) e = p``."""
    for p in (0.1, 0.25, 1 / 3, 0.5 + 2.0**-17, 0.999):
        mask = KeepMask(p, torch.device("cpu"))
        covered = mask.threshold / 65536
        assert 0.0 <= mask.extra <= 2.0**-16 / (1 - covered)
        assert abs(covered + (1 - covered) * mask.extra - p) < 1e-15


def test_sparse_positions_are_bernoulli_at_the_rate():
    torch.manual_seed(0)
    count, rate, total = 200_000, 1e-3, 0
    for _ in range(10):
        picks = sparse_positions(rate, count)
        assert picks.numel() == 0 or (bool(torch.all(picks.diff() > 0)) and 0 <= picks[0] and picks[-1] < count)
        total += picks.numel()
    expected = 10 * count * rate
    assert abs(total - expected) < 5 * math.sqrt(expected * (1 - rate))


def test_sparse_positions_top_up_a_short_batch(monkeypatch):
    """Geometric gaps that are all 1: the first batch falls short and is topped up."""
    monkeypatch.setattr(dropout, "_gaps", lambda rate, size, device: torch.ones(size, dtype=torch.long))
    assert sparse_positions(1e-6, 100).tolist() == list(range(100))


@pytest.mark.parametrize("p", [0.1, 0.5 + 2.0**-17])
def test_the_masks_come_from_torchs_generator(p):
    """The same ``torch.manual_seed`` gives the same mask, another seed another one, and the
    draws advance torch's default generator (numpy's global state plays no part)."""
    word, pos, typ = _tables()
    ids = torch.randint(0, 50, (4, 32))

    def run(seed):
        torch.manual_seed(seed)
        np.random.seed(seed + 1000)  # numpy's state must not matter
        out = fused.fused_embedding(ids, word, pos, type_weight=typ, dropout=p, training=True)
        return out, torch.rand(())

    first, after_first = run(7)
    np.random.seed(0)
    again, after_again = run(7)
    assert torch.equal(first, again) and torch.equal(after_first, after_again)
    other, _ = run(8)
    assert not torch.equal(first != 0, other != 0)
    torch.manual_seed(7)
    assert not torch.equal(after_first, torch.rand(()))  # the mask consumed torch's stream


def _block(**kwargs):
    torch.manual_seed(0)
    return TransformerEmbeddings(40, 16, position=LearnedAbsolute(16, 16), **kwargs)


def test_fused_switch_runs_the_eager_layer_norm_and_dropout():
    eager = _block(fused=False, dropout=0.1).train()
    ids = torch.randint(0, 40, (2, 6))
    assert not eager._fused_applies(torch.arange(6), ids)
    assert "fused=False" in repr(eager)
    torch.manual_seed(3)
    out = eager(ids)
    torch.manual_seed(3)
    reference = eager.dropout(
        eager.norm(eager.combine(eager.token_vectors(ids), eager.position(torch.arange(6)), None))
    )
    assert torch.equal(out, reference)  # nn.Dropout's own mask for the same seed
    default = _block()
    assert default.fused and default._fused_applies(torch.arange(6), ids) and "fused=True" in repr(default)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16])
def test_narrow_integer_ids_take_the_eager_path(dtype):
    block = _block(dropout=0.0).eval()
    ids = torch.randint(0, 40, (2, 6))
    types = torch.randint(0, 2, (2, 6))
    assert not block._fused_applies(torch.arange(6), ids.to(dtype), types)
    out = block(ids.to(dtype), token_type_ids=types.to(dtype), position_ids=torch.arange(6).to(dtype))
    assert_close(out, block(ids, token_type_ids=types), atol=1e-6, rtol=1e-6)


def test_a_float64_position_table_takes_the_eager_path():
    torch.manual_seed(0)
    table = LearnedAbsolute(16, 16, dtype=torch.float64)
    block = TransformerEmbeddings(40, 16, position=table, dropout=0.0).eval()
    ids = torch.randint(0, 40, (2, 6))
    assert not block._fused_applies(torch.arange(6), ids)
    out = block(ids)
    assert out.dtype == torch.float32
    single = TransformerEmbeddings(40, 16, position=LearnedAbsolute(16, 16), dropout=0.0).eval()
    single.load_state_dict({k: v.float() for k, v in block.state_dict().items()})
    assert single._fused_applies(torch.arange(6), ids)
    assert_close(out, single(ids), atol=1e-5, rtol=1e-5)


def test_fused_embedding_names_dtypes_it_does_not_take():
    word, pos, typ = _tables()
    ids = torch.randint(0, 50, (2, 4))
    with pytest.raises(TypeError, match="int64 or int32 input_ids, got torch.uint8"):
        fused.fused_embedding(ids.to(torch.uint8), word, pos)
    with pytest.raises(TypeError, match="every table in one dtype: word torch.float32, another torch.float64"):
        fused.fused_embedding(ids, word, pos.double())
