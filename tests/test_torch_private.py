"""Each private torch API posembed uses has a public fallback that computes the same thing.

Every test forces the fallback (the private symbol monkeypatched away) and compares it with the
private path over the whole tensor; the checks that pick a path are tested on their own.
"""

from __future__ import annotations

import logging
import shutil
import sys
import types

import pytest
import torch
from torch import nn

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed._utils import torch_private as _torch_private
from posembed.kernels import attention as fused_attention
from posembed.kernels import embedding as fused_embedding
from posembed.schemes.bias.alibi import ALiBi


def test_the_private_ops_are_found_on_this_torch():
    assert _torch_private.flash_cpu_ops() is not None
    assert _torch_private._layer_norm_backward_op() is not None


def test_an_op_that_is_missing_or_takes_other_arguments_is_not_used(caplog):
    with caplog.at_level(logging.INFO, logger="posembed._utils.torch_private"):
        assert _torch_private._aten_op("_no_such_op_anywhere", ("x",)) is None
        assert _torch_private._aten_op("native_layer_norm_backward", ("grad_out", "input")) is None
    assert "has no aten._no_such_op_anywhere" in caplog.text
    assert "takes ('grad_out', 'input', 'normalized_shape'" in caplog.text


@pytest.fixture
def no_flash(monkeypatch):
    monkeypatch.setattr(fused_attention, "flash_cpu_ops", lambda: None)


def _attention(causal: bool, dtype=torch.float32):
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 70, 16, generator=generator, dtype=dtype).requires_grad_() for _ in range(3))
    out = fused_attention.bias_attention(q, k, v, ALiBi(4), causal=causal, block_size=32)
    grads = torch.autograd.grad(out, (q, k, v), torch.randn(out.shape, generator=generator, dtype=dtype))
    return out, grads


@pytest.mark.parametrize("causal", [False, True])
def test_bias_attention_without_the_flash_kernel_equals_it(causal, monkeypatch):
    flash = _attention(causal)
    assert fused_attention._use_flash(torch.zeros(1), ())
    monkeypatch.setattr(fused_attention, "flash_cpu_ops", lambda: None)
    assert not fused_attention._use_flash(torch.zeros(1), ())
    public = _attention(causal)
    torch.testing.assert_close(public[0], flash[0], rtol=1e-5, atol=1e-5)
    for a, b in zip(public[1], flash[1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def _embedding_grads(width=48):
    generator = torch.Generator().manual_seed(0)
    word = torch.randn(30, width, generator=generator, requires_grad=True)
    pos = torch.randn(20, width, generator=generator, requires_grad=True)
    typ = torch.randn(2, width, generator=generator, requires_grad=True)
    weight = (torch.rand(width, generator=generator) + 0.5).requires_grad_()
    bias = torch.randn(width, generator=generator, requires_grad=True)
    ids = torch.randint(0, 30, (3, 20), generator=generator)
    types_ = torch.randint(0, 2, (3, 20), generator=generator)
    out = fused_embedding.fused_embedding(
        ids,
        word,
        pos,
        token_type_ids=types_,
        type_weight=typ,
        norm_weight=weight,
        norm_bias=bias,
        eps=1e-5,
        padding_idx=0,
    )
    tensors = (word, pos, typ, weight, bias)
    return out, torch.autograd.grad(out, tensors, torch.randn(out.shape, generator=generator))


def test_layer_norm_backward_through_autograd_equals_atens(monkeypatch):
    out, private = _embedding_grads()
    monkeypatch.setattr(_torch_private, "_layer_norm_backward_op", lambda: None)
    same, public = _embedding_grads()
    assert torch.equal(same, out)
    for a, b in zip(public, private):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask", [[True, False, False], [False, True, True], [True, True, False]])
def test_layer_norm_backward_fallback_returns_only_what_is_asked(mask, monkeypatch):
    generator = torch.Generator().manual_seed(1)
    x, grad = torch.randn(5, 8, generator=generator), torch.randn(5, 8, generator=generator)
    weight, bias = torch.rand(8, generator=generator), torch.randn(8, generator=generator)
    _, mean, rstd = torch.native_layer_norm(x, (8,), weight, bias, 1e-5)
    private = _torch_private.layer_norm_backward(grad, x, 8, mean, rstd, weight, bias, mask, 1e-5)
    monkeypatch.setattr(_torch_private, "_layer_norm_backward_op", lambda: None)
    public = _torch_private.layer_norm_backward(grad, x, 8, mean, rstd, weight, bias, mask, 1e-5)
    for want, a, b in zip(mask, public, private):
        if want:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        else:
            assert a is None


def test_the_padding_row_is_zeroed_as_nn_embeddings_private_helper_does():
    torch.manual_seed(0)
    block = TransformerEmbeddings(40, 16, position=LearnedAbsolute(16, 16), pad_token_id=3)
    with torch.no_grad():
        block.token_embeddings.weight.fill_(1.0)
    expected = block.token_embeddings.weight.detach().clone()
    reference = nn.Embedding(40, 16, padding_idx=3)
    reference.weight.data.copy_(expected)
    reference._fill_padding_idx_with_zero()
    torch.manual_seed(1)
    block.reset_parameters()
    assert not block.token_embeddings.weight[3].any()
    assert torch.equal(block.token_embeddings.weight[3], reference.weight[3])


def test_cpp_compiler_without_inductors_builder_looks_on_path(monkeypatch):
    private = _torch_private.cpp_compiler()
    monkeypatch.setitem(sys.modules, "torch._inductor.cpp_builder", None)  # the import fails
    public = _torch_private.cpp_compiler()
    if private is None:
        pytest.skip("no C++ compiler here")
    assert public is not None and shutil.which(private) is not None
    assert shutil.which(private) == shutil.which(public) or public.endswith(("c++", "g++", "clang++"))
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CXX", raising=False)
    assert _torch_private.cpp_compiler() is None


def test_inductor_cache_dir_without_cache_dir_utils_reads_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    private = _torch_private.inductor_cache_dir()
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.cache_dir_utils", None)
    assert _torch_private.inductor_cache_dir() == private == str(tmp_path)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    assert _torch_private.inductor_cache_dir() is None


def test_inductor_caches_off_reads_the_config_and_is_false_without_one(monkeypatch):
    from torch._inductor import config

    assert _torch_private.inductor_caches_off() is bool(config.force_disable_caches or not config.fx_graph_cache)
    with config.patch(force_disable_caches=True):
        assert _torch_private.inductor_caches_off()
    monkeypatch.setitem(sys.modules, "torch._inductor.config", None)
    monkeypatch.delattr(torch._inductor, "config")
    assert _torch_private.inductor_caches_off() is False


def test_recompile_limits_under_the_names_older_torches_use(monkeypatch):
    """torch before 2.6 called them ``cache_size_limit`` and ``accumulated_cache_size_limit``."""
    old = types.SimpleNamespace(cache_size_limit=8, accumulated_cache_size_limit=64)
    monkeypatch.setattr(torch, "_dynamo", types.SimpleNamespace(config=old))
    with _torch_private.recompile_limits(1024):
        assert (old.cache_size_limit, old.accumulated_cache_size_limit) == (1024, 1024)
    assert (old.cache_size_limit, old.accumulated_cache_size_limit) == (8, 64)
    monkeypatch.setattr(torch, "_dynamo", types.SimpleNamespace(config=types.SimpleNamespace()))
    with _torch_private.recompile_limits(1024):  # no such settings: nothing to do
        pass


def test_has_hooks_sees_module_and_global_hooks_and_counts_an_unknown_torch_as_hooked(monkeypatch):
    plain, other = nn.Linear(2, 2), nn.Linear(2, 2)
    assert not _torch_private.has_hooks(plain, other)
    for register in (
        "register_forward_hook",
        "register_forward_pre_hook",
        "register_full_backward_hook",
        "register_full_backward_pre_hook",
    ):
        handle = getattr(other, register)(lambda *args: None)
        assert _torch_private.has_hooks(plain, other), register
        handle.remove()
    handle = nn.modules.module.register_module_forward_pre_hook(lambda *args: None)
    assert _torch_private.has_hooks(plain)
    handle.remove()
    assert not _torch_private.has_hooks(plain)
    monkeypatch.delattr(nn.modules.module, "_global_forward_hooks")
    assert _torch_private.has_hooks(plain)
