"""Compiled FlexAttention is built once per shape and scheme kind, then reused by every model.

A lab sweep builds a new model (new scheme instance, new layers) for every trial; each trial
evaluates at several lengths. The compiled kernels must survive that: the second model of a
kind at a shape compiles nothing, and a sweep with more graphs than torch's default recompile
limit (8) keeps all of them compiled instead of falling back to the uncompiled reference.

Compiles are counted by dynamo with a counting backend (the same guards and caching as
inductor, no kernel built), on the CPU, forward only (no flex backward on the CPU).
"""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from posembed.nn.attention import backends as attention_backends
from posembed.nn.attention.layer import SelfAttention

LENGTHS = (8, 12, 16, 24)


def _kinds() -> dict:
    from posembed.schemes.bias.alibi import ALiBi
    from posembed.schemes.bias.dynamic import DynamicPositionBias
    from posembed.schemes.bias.kerple import Kerple
    from posembed.schemes.bias.t5 import T5RelativeBias

    return {
        "alibi": lambda: ALiBi(2),
        "alibi_symmetric": lambda: ALiBi(2, symmetric=True),
        "t5_bias": lambda: T5RelativeBias(2, num_buckets=8, max_distance=16, bidirectional=False),
        "kerple": lambda: Kerple(2),
        "dynamic_bias": lambda: DynamicPositionBias(2),
    }


@pytest.fixture
def counted_flex(monkeypatch, torch_config) -> CompileCounter:
    """The project's compiled flex with a counting backend instead of inductor."""
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.reset()
    _torch_default_limits(monkeypatch, torch_config)
    counter = CompileCounter()
    compiled = torch.compile(flex_attention, backend=counter, dynamic=False)
    monkeypatch.setattr(attention_backends, "_compiled_flex", lambda: compiled)
    yield counter
    torch._dynamo.reset()


def _torch_default_limits(monkeypatch, torch_config) -> None:
    """torch's own limits (8 graphs per frame), as in a fresh process before any flex call."""
    torch_config(torch._dynamo.config, recompile_limit=8, accumulated_recompile_limit=256)


def _trial(name: str, factory, padded: bool = False) -> None:
    """One trial's attention work: a fresh model of the kind, evaluated at every length."""
    causal = name != "alibi_symmetric"
    attn = SelfAttention(32, 2, scheme=factory(), causal=causal, backend="flex", compile_flex=True).eval()
    for length in LENGTHS:
        mask = None
        if padded:
            mask = torch.ones(2, length, dtype=torch.long)
            mask[1, -3:] = 0
        with torch.no_grad():
            x = torch.randn(2, length, 32)
            attn(x, attention_mask=mask)
            assert attn.backend_for(x, attention_mask=mask) == "flex"


@pytest.mark.slow
def test_a_second_model_of_a_kind_compiles_nothing(counted_flex, caplog) -> None:
    kinds = _kinds()
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")  # "flex_attention called without torch.compile" would be a fallback
        for name, factory in kinds.items():
            _trial(name, factory)
        first = counted_flex.frame_count
        # every kind at every length has its own graph, past torch's default limit of 8
        assert first == len(kinds) * len(LENGTHS) > 8
        for name, factory in kinds.items():  # the next trials: new instances, same kinds and shapes
            _trial(name, factory)
        assert counted_flex.frame_count == first
    assert "recompile_limit" not in caplog.text


def test_padding_masks_reuse_their_graph_across_models(counted_flex) -> None:
    """A key padding mask (a new tensor every batch, captured by the mask_mod) is a graph input,
    not a constant: one graph per length, for every model and every mask."""
    factory = _kinds()["alibi"]
    _trial("alibi", factory, padded=True)
    first = counted_flex.frame_count
    assert first == len(LENGTHS)
    _trial("alibi", factory, padded=True)
    assert counted_flex.frame_count == first


def test_trained_values_do_not_recompile(counted_flex) -> None:
    """Changing a scheme's learned values (an optimizer step between evaluations) keeps the graph:
    values are tensors read by the kernel, never constants baked into it."""
    from posembed.schemes.bias.kerple import Kerple
    from posembed.schemes.bias.t5 import T5RelativeBias

    for factory in (lambda: T5RelativeBias(2, num_buckets=8, max_distance=16, bidirectional=False), lambda: Kerple(2)):
        attn = SelfAttention(32, 2, scheme=factory(), causal=True, backend="flex", compile_flex=True).eval()
        x = torch.randn(2, 8, 32)
        with torch.no_grad():
            before = attn(x)
            count = counted_flex.frame_count
            for parameter in attn.scheme.parameters():
                parameter.mul_(1.5)
            after = attn(x)
        assert counted_flex.frame_count == count
        assert not torch.allclose(before, after)  # the new values were read


def test_a_forward_leaves_the_process_wide_limits_as_they_were(counted_flex) -> None:
    """The limits are raised around the compiled call only: dynamo sees 1024 inside it, the
    process keeps torch's 8 (and 256) before and after."""
    config = torch._dynamo.config
    seen = []
    compiled = attention_backends._compiled_flex()  # the counted one

    def spy(*args, **kwargs):
        seen.append((config.recompile_limit, config.accumulated_recompile_limit))
        return compiled(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(attention_backends, "_compiled_flex", lambda: spy)
        _trial("alibi", _kinds()["alibi"])
    limit = attention_backends.FLEX_RECOMPILE_LIMIT
    assert seen == [(limit, limit)] * len(LENGTHS)
    assert (config.recompile_limit, config.accumulated_recompile_limit) == (8, 256)


def test_the_limits_are_put_back_after_an_error_and_a_higher_one_is_kept(torch_config) -> None:
    from posembed._utils.torch_private import recompile_limits

    config = torch._dynamo.config
    torch_config(config, recompile_limit=5000, accumulated_recompile_limit=256)  # the user's own, higher
    with pytest.raises(RuntimeError, match="inside"):
        with recompile_limits(1024):
            assert (config.recompile_limit, config.accumulated_recompile_limit) == (5000, 1024)
            raise RuntimeError("inside")
    assert (config.recompile_limit, config.accumulated_recompile_limit) == (5000, 256)


def test_a_layer_compiled_whole_traces_flex_into_its_own_graph(monkeypatch) -> None:
    """``torch.compile(model, fullgraph=True)`` around a flex layer: no graph break, no cache
    wrapper traced (warnings are errors here), the same output as the layer alone."""
    from torch.nn.attention.flex_attention import flex_attention

    from posembed.schemes.bias.alibi import ALiBi

    attn = SelfAttention(32, 2, scheme=ALiBi(2), causal=True, backend="flex", compile_flex=True).eval()
    x = torch.randn(2, 16, 32)
    counter = CompileCounter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        out = torch.compile(attn, backend=counter, fullgraph=True)(x)
    assert counter.frame_count == 1
    alone = torch.compile(flex_attention, backend="eager", dynamic=False)  # dynamo's path, no kernel built
    monkeypatch.setattr(attention_backends, "_compiled_flex", lambda: alone)
    with torch.no_grad():
        expected = attn(x)
    torch.testing.assert_close(out, expected)


def test_the_shared_causal_block_mask_is_built_once_and_never_an_inference_tensor() -> None:
    attention_backends._causal_block_mask.cache_clear()
    with torch.inference_mode():
        first = attention_backends._causal_block_mask(40, torch.device("cpu"))
    assert attention_backends._causal_block_mask(40, torch.device("cpu")) is first
    assert not first.kv_num_blocks.is_inference() and not first.kv_indices.is_inference()
