"""Attention backends as a type: :class:`~posembed.nn.attention.backends.Backend`, dispatch by table,
and :meth:`SelfAttention.backend_for` (the decision ``forward`` takes, asked without running it)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posembed.nn.attention.layer as attention
from posembed.nn.attention import backends as attention_backends
from posembed.nn.attention.backends import BACKENDS, Backend, choose_backend, run_backend
from posembed.nn.attention.layer import SelfAttention
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.rotary.rope import RotaryEmbedding

DIM, HEADS = 16, 2


def test_backend_is_a_str_enum_of_the_documented_names() -> None:
    assert BACKENDS == ("auto", "sdpa", "flex", "fused", "chunked", "eager")
    assert tuple(Backend) == tuple(Backend(name) for name in BACKENDS)
    for name in BACKENDS:
        assert Backend.parse(name) is Backend(name) and Backend(name) == name and f"{Backend(name)}" == name


@pytest.mark.parametrize("given_backend", ["sdpa", Backend.SDPA])
def test_a_name_or_a_member_configures_the_layer(given_backend) -> None:
    attn = SelfAttention(DIM, HEADS, backend=given_backend)
    assert attn.backend is Backend.SDPA
    assert "backend='sdpa'" in repr(attn)  # the repr as before the enum


@pytest.mark.parametrize("bad", ["dense", "SDPA", "", 3, None])
def test_an_unknown_backend_is_refused_with_its_value_and_the_choices(bad) -> None:
    message = f"unknown backend {bad!r}; choose one of auto, sdpa, flex, fused, chunked, eager"
    with pytest.raises(ValueError, match=f"^{message}$".replace("(", r"\(").replace(")", r"\)")):
        SelfAttention(DIM, HEADS, backend=bad)
    attn = SelfAttention(DIM, HEADS)
    with pytest.raises(ValueError, match="unknown backend"):
        attn.backend = bad  # assignment is checked too
    assert attn.backend is Backend.AUTO
    with pytest.raises(ValueError, match="unknown backend"):
        run_backend(bad, None)


def test_run_backend_dispatches_every_backend_but_auto_and_refuses_auto() -> None:
    assert set(attention_backends._RUNNERS) == set(Backend) - {Backend.AUTO}
    with pytest.raises(ValueError, match="not 'auto'"):
        run_backend("auto", None)


def test_choose_backend_answers_a_backend() -> None:
    q = torch.zeros(1, HEADS, 4, 8)
    inp = attention_backends.AttentionInputs(q, q, q, scale=1.0, causal=True, positions=torch.arange(4))
    for name in BACKENDS:
        assert isinstance(choose_backend(name, inp, False, training=False), Backend)


def test_forward_writes_no_backend_state_and_backend_for_writes_none() -> None:
    attn = SelfAttention(DIM, HEADS, scheme=ALiBi(HEADS), causal=True).eval()
    x = torch.randn(2, 5, DIM)
    before = dict(vars(attn))
    attn(x)
    assert attn.backend_for(x) is Backend.SDPA
    assert dict(vars(attn)) == before
    assert not hasattr(attn, "last_backend")


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@settings(max_examples=25, deadline=None)
@given(
    requested=st.sampled_from(BACKENDS),
    scheme=st.sampled_from(["none", "alibi", "rope"]),
    length=st.integers(1, 9),
    per_row_positions=st.booleans(),
    padded=st.booleans(),
    training=st.booleans(),
    dropout=st.sampled_from([0.0, 0.1]),
    grad=st.booleans(),
)
def test_backend_for_names_the_backend_forward_runs(
    monkeypatch_module, requested, scheme, length, per_row_positions, padded, training, dropout, grad
) -> None:
    """Whatever the request, mode, grad mode, positions and mask: the backend ``forward`` hands to
    ``run_backend`` is the one :meth:`backend_for` names (threshold lowered so ``auto`` varies)."""
    schemes = {"none": lambda: None, "alibi": lambda: ALiBi(HEADS), "rope": lambda: RotaryEmbedding(DIM // HEADS)}
    attn = SelfAttention(DIM, HEADS, scheme=schemes[scheme](), causal=True, dropout=dropout, backend=requested)
    attn.train(training)
    x = torch.randn(2, length, DIM)
    positions = torch.arange(length).expand(2, length) if per_row_positions else None
    mask = torch.ones(2, length, dtype=torch.long)
    if padded:
        mask[1, : length // 2] = 0
    ran = []
    real_run = attention_backends.run_backend

    def spy(name, *args, **kwargs):
        ran.append(name)
        return real_run(name, *args, **kwargs)

    monkeypatch_module.setattr(attention, "run_backend", spy)
    with torch.set_grad_enabled(grad):
        named = attn.backend_for(x, position_ids=positions, attention_mask=mask if padded else None)
        attn(x, position_ids=positions, attention_mask=mask if padded else None)
    assert ran == [named] and named is not Backend.AUTO


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    patch.setattr(attention_backends, "AUTO_SDPA_MAX_LENGTH", 4)
    yield patch
    patch.undo()
