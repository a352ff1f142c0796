"""Seed 001's question: without positional information self-attention cannot see order.

Bidirectional self-attention with no positional scheme (``None`` or NoPE) is permutation
equivariant: permuting the input tokens permutes the output the same way. Every real scheme
breaks that. (Causal attention is order-aware through its mask alone, so the question is asked
of bidirectional attention; xPos is causal-only and is left out here.)
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.nn.attention.layer import SelfAttention
from posembed.nn.model.transformer import Encoder
from posembed.schemes.bias.nope import NoPE
from tests.helpers import assert_close
from tests.test_attention import DIM, HEAD_DIM, HEADS, scheme_factories
from tests.test_model import absolute_factories

UNORDERED = {"none": lambda: None, "nope": NoPE}


@st.composite
def permuted_batches(draw):
    length = draw(st.integers(2, 8))
    perm = torch.tensor(draw(st.permutations(list(range(length)))))
    seed = draw(st.integers(0, 2**16))
    real = draw(st.lists(st.booleans(), min_size=length, max_size=length).filter(any))
    return length, perm, seed, torch.tensor(real).unsqueeze(0).expand(2, length)


@pytest.mark.parametrize("scheme_id", sorted(UNORDERED))
@settings(max_examples=15, deadline=None)
@given(batch=permuted_batches())
def test_attention_without_positions_is_permutation_equivariant(scheme_id, batch) -> None:
    length, perm, seed, mask = batch
    torch.manual_seed(seed)
    attn = SelfAttention(DIM, HEADS, scheme=UNORDERED[scheme_id]())
    x = torch.randn(2, length, DIM)
    out = attn(x, attention_mask=mask)
    permuted = attn(x[:, perm], attention_mask=mask[:, perm])
    assert_close(permuted, out[:, perm], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scheme_id", sorted(UNORDERED))
@settings(max_examples=5, deadline=None)
@given(batch=permuted_batches())
def test_encoder_without_positions_is_permutation_equivariant(scheme_id, batch) -> None:
    length, perm, seed, mask = batch
    torch.manual_seed(seed)
    model = Encoder(11, dim=DIM, depth=2, num_heads=HEADS, scheme=UNORDERED[scheme_id]()).eval()
    ids = torch.randint(0, 11, (2, length))
    out = model(ids, attention_mask=mask)
    assert_close(model(ids[:, perm], attention_mask=mask[:, perm]), out[:, perm], atol=1e-5, rtol=1e-5)


def _candidate_permutations(length: int) -> list[torch.Tensor]:
    swap = torch.arange(length)
    swap[[0, length - 1]] = swap[[length - 1, 0]]
    return [torch.arange(length).flip(0), torch.arange(length).roll(1), swap]


def _breaks(run, length: int) -> bool:
    """Whether some candidate permutation changes the output beyond permuting it."""
    for perm in _candidate_permutations(length):
        out, permuted = run(None), run(perm)
        if not torch.allclose(permuted, out[:, perm], atol=1e-4, rtol=1e-4):
            return True
    return False


ATTENTION_SCHEMES = {k: v for k, v in scheme_factories(causal=False).items() if k not in UNORDERED}


@pytest.mark.parametrize("scheme_id", sorted(ATTENTION_SCHEMES))
def test_every_attention_scheme_breaks_equivariance(scheme_id: str) -> None:
    attn = SelfAttention(DIM, HEADS, scheme=ATTENTION_SCHEMES[scheme_id]())
    x = torch.randn(2, 6, DIM)
    assert _breaks(lambda perm: attn(x if perm is None else x[:, perm]), 6)


@pytest.mark.parametrize("scheme_id", sorted(absolute_factories(DIM)))
def test_every_absolute_scheme_breaks_equivariance(scheme_id: str) -> None:
    model = Encoder(11, dim=DIM, depth=1, num_heads=HEADS, scheme=absolute_factories(DIM)[scheme_id]()).eval()
    ids = torch.randint(0, 11, (2, 6))
    assert _breaks(lambda perm: model(ids if perm is None else ids[:, perm]), 6)


@pytest.mark.parametrize("causal", [True, False])
def test_explicit_arange_positions_equal_default(causal: bool) -> None:
    x = torch.randn(2, 6, DIM)
    for scheme_id, factory in scheme_factories(causal, HEADS, HEAD_DIM).items():
        attn = SelfAttention(DIM, HEADS, scheme=factory(), causal=causal)
        default = attn(x)
        assert_close(attn(x, position_ids=torch.arange(6)), default, msg=scheme_id)
        assert_close(attn(x, position_ids=torch.arange(6).expand(2, 6)), default, msg=f"{scheme_id} (B, T)")
