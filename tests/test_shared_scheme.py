"""Attention layers own their scheme as a submodule; a model sharing one saves it once; the
masking rule has one definition; attention inputs are built once; ``adds_bias`` is declared."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest
import torch

from posembed.kernels import attention as fused_attention
from posembed.kernels.masks import visibility_mod, visible_keys
from posembed.nn.attention import backends as attention_backends
from posembed.nn.attention.backends import AttentionInputs
from posembed.nn.attention.layer import SelfAttention
from posembed.nn.model.transformer import Decoder, Encoder, build_model
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.base import BiasScheme
from posembed.schemes.bias.t5 import T5RelativeBias
from tests.helpers import assert_close

VOCAB, DIM, HEADS = 13, 16, 4


def _t5_decoder():
    torch.manual_seed(0)
    return Decoder(VOCAB, dim=DIM, depth=2, num_heads=HEADS, scheme=T5RelativeBias(HEADS, bidirectional=False))


def _every_alias(model, state):
    """``state`` plus the keys torch lists for the scheme under every layer (no dedup hook)."""
    extra = {
        f"blocks.{i}.attn.{key}": value
        for key, value in state.items()
        if key.startswith("scheme.")
        for i in range(len(model.blocks))
    }
    return {**state, **extra}


def test_layers_hold_the_shared_scheme_as_a_submodule():
    model = _t5_decoder()
    for block in model.blocks:
        assert block.attn._modules["scheme"] is model.scheme
    names = [name for name, _ in model.named_parameters()]
    assert [n for n in names if "scheme" in n] == [f"scheme.{n}" for n, _ in model.scheme.named_parameters()]
    model.to(torch.float64)
    assert all(p.dtype == torch.float64 for p in model.blocks[1].attn.scheme.parameters())


def _file_keys(path):
    from safetensors import safe_open

    with safe_open(str(path), "pt") as file:
        return sorted(file.keys())


def test_the_state_dict_lists_every_name_and_the_file_holds_a_shared_scheme_once(tmp_path):
    """As torch (and transformers, for tied weights) do: every name in ``state_dict()``, each tensor once on disk."""
    from safetensors.torch import save_model

    model = _t5_decoder()
    table = "relative_attention_bias.weight"
    assert [k for k in model.state_dict() if k.endswith(table)] == [
        f"scheme.{table}",
        f"blocks.0.attn.scheme.{table}",
        f"blocks.1.attn.scheme.{table}",
    ]
    save_model(model, str(tmp_path / "model.safetensors"))
    assert [k for k in _file_keys(tmp_path / "model.safetensors") if k.endswith(table)] == [
        f"blocks.0.attn.scheme.{table}"
    ]  # safetensors keeps the first name in sorted order
    learned = Decoder(VOCAB, dim=DIM, depth=1, num_heads=HEADS, scheme=LearnedAbsolute(8, DIM))
    assert learned.scheme is learned.embeddings.position
    save_model(learned, str(tmp_path / "learned.safetensors"))
    assert not [k for k in _file_keys(tmp_path / "learned.safetensors") if k.startswith("scheme.")]


def test_a_checkpoint_written_with_the_scheme_under_scheme_only_still_loads(tmp_path):
    """Files from before (the shared scheme saved once, under ``scheme.``) load strictly, every layer filled."""
    from safetensors.torch import load_model, save_file

    model = _t5_decoder()
    old = {k: v.contiguous() for k, v in model.state_dict().items() if ".attn.scheme." not in k}
    save_file(old, str(tmp_path / "old.safetensors"))
    rebuilt = build_model(model.config_dict())
    load_model(rebuilt, str(tmp_path / "old.safetensors"), strict=True)
    ids = torch.randint(0, VOCAB, (2, 7))
    assert rebuilt.blocks[1].attn.scheme is rebuilt.scheme
    assert_close(rebuilt(ids), model(ids), atol=0, rtol=0)


def test_checkpoints_load_with_or_without_alias_keys(tmp_path):
    from safetensors.torch import load_model, save_model

    model = _t5_decoder()
    ids = torch.randint(0, VOCAB, (2, 7))
    for state in (model.state_dict(), _every_alias(model, model.state_dict())):  # saved once / every alias
        rebuilt = build_model(model.config_dict())
        rebuilt.load_state_dict(state, strict=True)
        assert rebuilt.blocks[1].attn.scheme is rebuilt.scheme
        assert_close(rebuilt(ids), model(ids), atol=0, rtol=0)
    save_model(model, str(tmp_path / "model.safetensors"))
    rebuilt = build_model(model.config_dict())
    load_model(rebuilt, str(tmp_path / "model.safetensors"), strict=True)
    assert_close(rebuilt(ids), model(ids), atol=0, rtol=0)


def test_an_encoder_state_dict_round_trips_strictly():
    torch.manual_seed(0)
    model = Encoder(VOCAB, dim=DIM, depth=2, num_heads=HEADS, scheme=T5RelativeBias(HEADS), num_classes=3)
    rebuilt = build_model(model.config_dict())
    rebuilt.load_state_dict(model.state_dict(), strict=True)
    ids = torch.randint(0, VOCAB, (2, 5))
    assert_close(rebuilt(ids), model(ids), atol=0, rtol=0)


def test_attention_inputs_are_frozen():
    q = torch.randn(1, 1, 2, 4)
    inp = AttentionInputs(q, q, q, scale=0.5, causal=True, positions=torch.arange(2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        inp.scale = 1.0


class _Silent(BiasScheme):
    """A bias scheme that declares it adds nothing; its bias must never be asked for."""

    adds_bias = False

    def __init__(self) -> None:
        super().__init__()
        self.num_heads = HEADS

    def bias(self, q_positions, k_positions, q=None, k=None):
        raise AssertionError("bias() was called on a scheme that declares adds_bias = False")

    def score_mod(self, q_positions, k_positions, q=None, k=None):
        raise AssertionError("score_mod() was called on a scheme that declares adds_bias = False")


@pytest.mark.parametrize("backend", ["auto", "sdpa", "eager", "chunked", "fused"])
def test_adds_bias_is_declared_by_the_scheme_not_probed(backend):
    attn = SelfAttention(DIM, HEADS, scheme=_Silent(), causal=True, backend=backend)
    plain = SelfAttention(DIM, HEADS, causal=True, backend="eager")
    plain.load_state_dict(attn.state_dict())
    x = torch.randn(2, 6, DIM)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, :2] = 0
    assert_close(attn(x, attention_mask=mask), plain(x, attention_mask=mask), atol=1e-6, rtol=1e-5)
    assert attention_backends.adds_bias(T5RelativeBias(HEADS)) and not attention_backends.adds_bias(None)


def test_the_masking_rule_has_one_definition_and_the_kernel_does_not_import_its_dispatcher():
    tree = ast.parse(inspect.getsource(fused_attention))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "posembed.nn.attention.backends" not in imported
    assert attention_backends.visible_keys is visible_keys
    key_mask = torch.tensor([[True, False, True, True], [False, True, True, False]])
    for causal in (False, True):
        dense = visible_keys(torch.arange(4), 4, causal, key_mask)[:, 0]  # (B, Tq, Tk)
        mod = visibility_mod(causal, key_mask)
        b, q, k = torch.meshgrid(torch.arange(2), torch.arange(4), torch.arange(4), indexing="ij")
        assert torch.equal(mod(b, 0, q, k), dense)
