"""The fused embedding's dropout behaves like ``nn.Dropout``: rate ``p``, scale exactly ``1/(1-p)``;
and the block sends inputs the fused path does not cover to its eager path."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed.fused import embedding as fused
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


def test_keep_probability_is_p_to_within_2_to_the_minus_32():
    for p in (0.1, 0.25, 1 / 3, 0.999):
        mask = fused._KeepMask(p, torch.device("cpu"))
        assert abs(mask.keep_prob - (1 - p)) <= 2.0**-33


class _FixedBits:
    """A stand-in for numpy's generator: every 16-bit draw is the tie value, then ``second``."""

    def __init__(self, tie: int, second: np.ndarray) -> None:
        self.tie, self.second, self.calls = tie, second, 0

    def random_raw(self, size: int) -> np.ndarray:
        self.calls += 1
        if self.calls == 1:
            return np.full(size * 4, self.tie, dtype=np.int16).view(np.uint64)
        return self.second[:size]


def test_tied_16_bit_draws_are_decided_by_16_more_bits():
    """``u == t_hi`` (one draw in 65536) drops with probability ``t_lo / 65536``: the tie branch."""
    mask = fused._KeepMask(0.5 + 2.0**-17, torch.device("cpu"))
    assert (mask.high, mask.low) == (32768, 32768)
    second = np.arange(0, 65536, 256, dtype=np.uint64)  # 256 lower-16-bit values, evenly spread
    mask.bits = _FixedBits(mask.high - 32768, second)
    keep = torch.empty(16, 16, dtype=torch.bool)
    mask.fill(keep, fused._scratch())
    assert torch.equal(keep.reshape(-1), torch.from_numpy(second >= mask.low))
    assert keep.float().mean().item() == 0.5  # exactly 1 - t_lo / 65536 of the ties kept


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
    reference = eager.dropout(eager.norm(eager.combine(eager.token_vectors(ids), eager.position(torch.arange(6)), None)))
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
