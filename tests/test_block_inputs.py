"""Bad inputs to the blocks are refused early, with a message naming the value and the limit."""

from __future__ import annotations

import pytest
import torch

from posembed._utils import checks as _checks
from posembed.nn.attention.layer import SelfAttention
from posembed.nn.embedding.block import TransformerEmbeddings
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.positions import positions_from_documents, positions_from_mask, positions_with_offset


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"layer_norm_eps": 0.0}, ValueError, r"layer_norm_eps must be > 0 \(BERT: 1e-12\), got 0.0"),
        ({"layer_norm_eps": -1e-5}, ValueError, r"layer_norm_eps must be a finite number >= 0.0, got -1e-05"),
        ({"layer_norm_eps": float("nan")}, ValueError, r"layer_norm_eps must be a finite number >= 0.0, got nan"),
        ({"token_scale": float("nan")}, ValueError, r"token_scale must be a finite number, got nan"),
        ({"token_scale": float("inf")}, ValueError, r"token_scale must be a finite number, got inf"),
        ({"dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\), got 1.0"),
        ({"dropout": -0.1}, ValueError, r"dropout must be in \[0, 1\), got -0.1"),
        ({"dropout": float("nan")}, ValueError, r"dropout must be in \[0, 1\), got nan"),
        ({"dropout": "0.1"}, TypeError, r"dropout must be a number in \[0, 1\), got '0.1'"),
    ],
)
def test_embedding_constructor_refuses(kwargs, error, match):
    with pytest.raises(error, match=match):
        TransformerEmbeddings(10, 8, position=LearnedAbsolute(8, 8), **kwargs)


def test_an_absurd_token_table_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(_checks, "device_memory_bytes", lambda device: 16 * 10**9)
    with pytest.raises(MemoryError, match=r"token table .* of shape \(1000000000000, 8\) float32 would need 32.0 TB"):
        TransformerEmbeddings(10**12, 8, position=None, pad_token_id=None)
    with pytest.raises(MemoryError, match=r"segment table .* would need 64.0 GB, more than the 16.0 GB"):
        TransformerEmbeddings(10, 8, position=None, type_vocab_size=2 * 10**9)


def test_the_meta_device_allocates_nothing_and_is_not_checked():
    TransformerEmbeddings(10**12, 8, position=None, pad_token_id=None, device="meta")


def test_check_table_size_is_the_helper_for_learned_tables(monkeypatch):
    monkeypatch.setattr(_checks, "device_memory_bytes", lambda device: 16 * 10**9)
    with pytest.raises(
        MemoryError, match=r"position table of shape \(1000000000000, 768\) bfloat16 would need 1536.0 TB"
    ):
        _checks.check_table_size(10**12, 768, "position table", dtype=torch.bfloat16)
    _checks.check_table_size(512, 768, "position table")


def test_attention_refuses_a_dtype_other_than_its_weights():
    attn = SelfAttention(16, 4)
    with pytest.raises(TypeError, match=r"x has dtype torch.float64 but this layer's weights are torch.float32"):
        attn(torch.randn(1, 3, 16, dtype=torch.float64))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts for the matmuls: allowed
        assert attn(torch.randn(1, 3, 16, dtype=torch.bfloat16)).shape == (1, 3, 16)


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_a_materialised_bias_at_65536_tokens_is_refused_before_allocating(monkeypatch, backend):
    monkeypatch.setattr(_checks, "device_memory_bytes", lambda device: 16 * 10**9)
    attn = SelfAttention(8, 1, scheme=ALiBi(1), causal=True, backend=backend)
    copies, need = {"eager": (3, "51.5"), "sdpa": (2, "34.4")}[backend]
    with (
        torch.no_grad(),
        pytest.raises(
            MemoryError,
            match=rf"backend '{backend}' at T=65536: {copies} float32 tensors "
            rf"of shape \(B, H, T, T\) = \(1, 1, 65536, 65536\) would need "
            rf"{need} GB, more than the 16.0 GB",
        ),
    ):
        attn(torch.randn(1, 65536, 8))


def test_positions_with_offset_refuses_positions_past_int64():
    top = torch.iinfo(torch.int64).max
    assert positions_with_offset(1, top).tolist() == [top]
    with pytest.raises(
        ValueError, match=rf"offset {top - 1} \+ length 3 - 1 = {top + 1} is past the largest torch.long"
    ):
        positions_with_offset(3, top - 1)
    with pytest.raises(ValueError, match=r"is past the largest torch.long position"):
        positions_with_offset(3, torch.tensor([0, top - 1]))


def test_position_helpers_take_python_lists():
    assert positions_from_mask([[0, 1, 1], [1, 1, 0]]).tolist() == [[0, 0, 1], [0, 1, 0]]
    assert positions_from_documents([0, 0, 1, 1, 1]).tolist() == [0, 1, 0, 1, 2]
    assert positions_with_offset(2, [0, 4]).tolist() == [[0, 1], [4, 5]]
    with pytest.raises(TypeError, match="attention_mask must be a tensor or a \\(nested\\) list of integers, got str"):
        positions_from_mask("1 1 0")
    with pytest.raises(TypeError, match="document_ids must be a tensor or a \\(nested\\) list of integers"):
        positions_from_documents([[0, 1], [2]])
