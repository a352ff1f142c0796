"""M-RoPE on the meta device: built under ``with torch.device("meta")`` (as the lab's checkpoint check
and trial check build models), shape-only forwards, and meta init then materialised equals real init."""

from __future__ import annotations

import pytest
import torch

from posembed.lab.training.checkpoint import load_checkpoint, save_checkpoint
from posembed.nn.attention.layer import SelfAttention
from posembed.nn.model.transformer import Decoder, Encoder, build_model
from posembed.schemes.rotary.mrope import MRoPE, mrope_frequencies
from tests.helpers import assert_close

SECTION = (2, 3, 3)  # head_dim 16


def test_frequencies_under_the_meta_device():
    with torch.device("meta"):
        inv_freq, axis_of = mrope_frequencies(16, SECTION)
    assert inv_freq.is_meta and axis_of.is_meta and axis_of.shape == (8,) and axis_of.dtype == torch.long
    assert mrope_frequencies(16, SECTION)[1].tolist() == [0, 0, 1, 1, 1, 2, 2, 2]
    assert mrope_frequencies(16, (8, 0, 0))[1].tolist() == [0] * 8  # an empty section


@pytest.mark.parametrize("model_class", [Decoder, Encoder])
def test_models_build_and_run_on_meta(model_class):
    with torch.device("meta"):
        model = model_class(40, dim=32, depth=2, num_heads=2, scheme=MRoPE(16, mrope_section=SECTION))
    assert all(t.is_meta for t in model.state_dict().values())
    assert model.scheme.axis_of.is_meta and model.scheme.inv_freq.is_meta
    ids = torch.zeros(2, 7, dtype=torch.long, device="meta")
    logits = model(ids, attention_mask=torch.ones(2, 7, dtype=torch.long, device="meta"))
    assert logits.is_meta and logits.shape == (2, 7, 40)
    real = model_class(40, dim=32, depth=2, num_heads=2, scheme=MRoPE(16, mrope_section=SECTION))
    with torch.device("meta"):
        rebuilt = build_model(real.config_dict())  # what the checkpoint check does
    assert {k: t.shape for k, t in rebuilt.state_dict().items()} == {k: t.shape for k, t in real.state_dict().items()}


def test_attention_and_three_axis_rotation_on_meta():
    with torch.device("meta"):
        mrope = MRoPE(16, mrope_section=SECTION)
        attn = SelfAttention(32, 2, scheme=mrope, causal=True)
        out = attn(torch.empty(2, 5, 32), torch.arange(5))  # text positions
        q, k = mrope(torch.empty(2, 2, 5, 16), torch.empty(2, 2, 5, 16), torch.zeros(2, 5, 3, dtype=torch.long))
    assert out.is_meta and out.shape == (2, 5, 32)
    assert q.is_meta and q.shape == k.shape == (2, 2, 5, 16)


def test_meta_init_then_materialised_equals_real_init():
    real = MRoPE(16, mrope_section=SECTION, base=1e6)
    with torch.device("meta"):
        meta = MRoPE(16, mrope_section=SECTION, base=1e6)
    meta.to_empty(device="cpu")
    meta.reset_parameters()
    assert torch.equal(meta.axis_of, real.axis_of) and torch.equal(meta.inv_freq, real.inv_freq)
    q, k = torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
    positions = torch.tensor([[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3], [2, 3, 2], [4, 4, 4]])
    for ours, theirs in zip(meta(q, k, positions), real(q, k, positions)):
        assert torch.equal(ours, theirs)


def test_lab_checkpoint_of_an_mrope_decoder_loads(tmp_path):
    """The lab's loader builds the model on the meta device to check the file's shapes first."""
    model = Decoder(40, dim=32, depth=1, num_heads=2, scheme=MRoPE(16, mrope_section=SECTION))
    folder = save_checkpoint(model, tmp_path / "mrope", {"step": 1})
    loaded, meta = load_checkpoint(folder)
    ids = torch.randint(0, 40, (2, 6))
    with torch.no_grad():
        assert_close(loaded(ids), model(ids))
    assert meta == {"step": 1} and loaded.config_dict() == model.config_dict()
