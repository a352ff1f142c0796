"""The fused embedding block is still the module: its ``norm`` and ``dropout`` submodules run
(or turn the fast path off) when replaced or hooked, and ``torch.manual_seed`` governs dropout.

Every test compares the default block (``fused=True``) with the module path over whole tensors.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed.kernels import embedding as fused_kernel


def _pair(dropout: float = 0.0, type_vocab_size: int = 2):
    """A default (fused) block and an eager (``fused=False``) copy with the same weights."""
    torch.manual_seed(0)
    fast = TransformerEmbeddings(
        40, 16, position=LearnedAbsolute(16, 16), dropout=dropout, type_vocab_size=type_vocab_size
    )
    eager = TransformerEmbeddings(
        40, 16, position=LearnedAbsolute(16, 16), dropout=dropout, type_vocab_size=type_vocab_size, fused=False
    )
    eager.load_state_dict(fast.state_dict())
    return fast, eager


def _ids():
    generator = torch.Generator().manual_seed(1)
    return torch.randint(0, 40, (3, 12), generator=generator), torch.randint(0, 2, (3, 12), generator=generator)


def test_the_plain_block_takes_the_fast_path():
    fast, _ = _pair()
    ids, _ = _ids()
    assert fast._fused_path(torch.arange(12), ids) == "chunked"


def test_a_hook_on_norm_fires_and_its_change_is_used():
    fast, eager = _pair()
    ids, types = _ids()
    seen = []
    for block in (fast, eager):
        block.norm.register_forward_hook(lambda module, args, out: seen.append(out.shape) or out * 2)
    fast.eval(), eager.eval()
    out = fast(ids, token_type_ids=types)
    assert seen == [torch.Size([3, 12, 16])]
    assert torch.equal(out, eager(ids, token_type_ids=types))


def test_a_pre_hook_on_norm_and_a_hook_on_dropout_fire():
    fast, eager = _pair(dropout=0.1)
    ids, types = _ids()
    calls = []
    fast.norm.register_forward_pre_hook(lambda module, args: calls.append("norm") or None)
    fast.dropout.register_forward_hook(lambda module, args, out: calls.append("dropout") or None)
    fast.eval()
    fast(ids, token_type_ids=types)
    assert calls == ["norm", "dropout"]


def test_a_hook_on_dropout_alone_keeps_the_fast_path_and_fires(monkeypatch):
    fast, eager = _pair(dropout=0.1)
    ids, types = _ids()
    calls = []
    kernel = fused_kernel.fused_embedding
    monkeypatch.setattr(
        "posembed.nn.embedding.fast.fused_embedding", lambda *a, **k: calls.append("kernel") or kernel(*a, **k)
    )
    fast.dropout.register_forward_hook(lambda module, args, out: calls.append("dropout") or None)
    fast.eval(), eager.eval()
    torch.testing.assert_close(fast(ids, token_type_ids=types), eager(ids, token_type_ids=types), rtol=0, atol=1e-6)
    assert calls == ["kernel", "dropout"]


def test_a_global_module_hook_turns_the_fast_path_off():
    fast, eager = _pair()
    ids, types = _ids()
    names = []
    handle = nn.modules.module.register_module_forward_hook(
        lambda module, args, out: names.append(type(module).__name__)
    )
    try:
        assert fast._fused_path(torch.arange(12), ids) is None
        fast.eval()
        fast(ids, token_type_ids=types)
    finally:
        handle.remove()
    assert "LayerNorm" in names and "Dropout" in names and "Embedding" in names
    assert fast._fused_path(torch.arange(12), ids) == "chunked"


@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.RMSNorm(16),
        nn.Identity,
        lambda: nn.LayerNorm(16, bias=False),
        lambda: nn.LayerNorm(16, elementwise_affine=False),
    ],
)
def test_a_replaced_norm_is_used(make):
    fast, eager = _pair()
    ids, types = _ids()
    fast.norm, eager.norm = make(), make()
    for a, b in zip(fast.norm.parameters(), eager.norm.parameters()):
        nn.init.uniform_(a, 0.5, 1.5)
        b.data.copy_(a.data)
    fast.eval(), eager.eval()
    assert fast._fused_path(torch.arange(12), ids) is None
    assert torch.equal(fast(ids, token_type_ids=types), eager(ids, token_type_ids=types))


def test_a_replaced_dropout_is_used():
    fast, _ = _pair(dropout=0.1)
    ids, types = _ids()

    class Halve(nn.Module):
        def forward(self, x):
            return x / 2

    fast.eval()
    plain = fast(ids, token_type_ids=types)
    fast.dropout = Halve()
    assert torch.equal(fast(ids, token_type_ids=types), plain / 2)


def test_a_replaced_token_table_is_used():
    fast, eager = _pair()
    ids, types = _ids()

    class Doubled(nn.Embedding):
        def forward(self, x):
            return super().forward(x) * 2

    for block in (fast, eager):
        table = Doubled(40, 16, padding_idx=0)
        table.weight.data.copy_(block.token_embeddings.weight.data)
        block.token_embeddings = table
    fast.eval(), eager.eval()
    assert torch.equal(fast(ids, token_type_ids=types), eager(ids, token_type_ids=types))


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_training_draws_nn_dropouts_mask_for_the_same_seed(p):
    """torch.manual_seed governs the fused block's dropout: the same seed gives nn.Dropout's
    own mask (the eager block's, to the last bit), another seed another mask."""
    fast, eager = _pair(dropout=p)
    ids, types = _ids()
    fast.train(), eager.train()
    torch.manual_seed(3)
    out = fast(ids, token_type_ids=types)
    torch.manual_seed(3)
    reference = eager(ids, token_type_ids=types)
    assert torch.equal(out == 0, reference == 0)
    torch.testing.assert_close(out, reference, rtol=0, atol=1e-5)
    torch.manual_seed(3)
    assert torch.equal(fast(ids, token_type_ids=types), out)
    torch.manual_seed(4)
    assert not torch.equal(fast(ids, token_type_ids=types) == 0, out == 0)
    out.sum().backward()  # the fused kernel's backward through nn.Dropout's mask
    reference.sum().backward()
    for (name, a), b in zip(fast.named_parameters(), eager.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-5, msg=name)
