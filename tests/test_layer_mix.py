"""Layer-wise scheme mixes (``schemes=[...]``, one rotary / bias scheme or None per layer).

Each layer of a mixed model equals, layer by layer, the attention of a single-scheme model with
the same weights; mixes train, round-trip through their config and the lab checkpoint (equal
outputs, shared schemes saved once), and a Gemma 3 / Llama 4 config's per-layer schemes from the
zoo reach the right layers with transformers' own per-layer frequencies.
"""

from __future__ import annotations

import json
import tempfile

import pytest
import torch

from posembed.lab.training.checkpoint import load_checkpoint, save_checkpoint
from posembed.nn.model.transformer import Decoder, Encoder, build_model
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.bias.nope import NoPE
from posembed.schemes.bias.t5 import T5RelativeBias
from posembed.schemes.rotary.rope import RotaryEmbedding

VOCAB, DIM, HEADS, LENGTH = 13, 16, 2, 9
HEAD_DIM = DIM // HEADS


def _mix(causal: bool = True) -> list:
    return [RotaryEmbedding(HEAD_DIM), NoPE(), ALiBi(HEADS, symmetric=not causal)]


def _ids(batch: int = 2) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, LENGTH), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("cls", [Decoder, Encoder])
def test_each_layer_gets_its_scheme_and_equals_a_single_scheme_model(cls):
    torch.manual_seed(0)
    schemes = _mix(cls.causal)
    model = cls(VOCAB, dim=DIM, depth=3, num_heads=HEADS, schemes=schemes).eval()
    assert model.layer_schemes == schemes and model.scheme is None
    assert all(block.attn.scheme is scheme for block, scheme in zip(model.blocks, schemes))
    _, states = model(_ids(), return_hidden_states=True)
    for layer, scheme in enumerate(schemes):
        single = cls(VOCAB, dim=DIM, depth=3, num_heads=HEADS, scheme=scheme).eval()
        single.load_state_dict(model.state_dict(), strict=False)  # the blocks' weights; schemes hold none
        block = single.blocks[layer]
        torch.testing.assert_close(block(states[layer]), states[layer + 1], rtol=0, atol=0)
        ref = cls(VOCAB, dim=DIM, depth=3, num_heads=HEADS, scheme=None).eval()  # a NoPE layer differs from it
        ref.load_state_dict(single.state_dict(), strict=False)
        if isinstance(scheme, NoPE):
            assert torch.equal(ref.blocks[layer](states[layer]), states[layer + 1])
        else:
            assert not torch.allclose(ref.blocks[layer](states[layer]), states[layer + 1])


def test_forward_backward_and_absolute_scheme_beside_the_mix():
    torch.manual_seed(0)
    table = LearnedAbsolute(32, DIM)
    model = Decoder(VOCAB, dim=DIM, depth=3, num_heads=HEADS, scheme=table, schemes=_mix())
    assert model.embeddings.position is table and model.layer_schemes[0] is not None
    logits = model(_ids())
    assert logits.shape == (2, LENGTH, VOCAB)
    logits.logsumexp(-1).mean().backward()
    assert table.weight.grad is not None and table.weight.grad.abs().sum() > 0
    assert all(p.grad is not None for p in model.blocks.parameters())
    assert "schemes=[RotaryEmbedding, NoPE, ALiBi]" in repr(model)


def test_shared_scheme_objects_are_saved_once_and_not_reinitialised():
    torch.manual_seed(0)
    t5, other = T5RelativeBias(HEADS), T5RelativeBias(HEADS)
    before = t5.relative_attention_bias.weight.clone()
    model = Decoder(VOCAB, dim=DIM, depth=4, num_heads=HEADS, schemes=[t5, None, t5, other])
    assert torch.equal(t5.relative_attention_bias.weight, before)  # the constructor keeps a scheme's weights
    assert model.blocks[2].attn.scheme is model.blocks[0].attn.scheme is t5
    with tempfile.TemporaryDirectory() as folder:
        from safetensors import safe_open
        from safetensors.torch import save_model

        save_model(model, f"{folder}/model.safetensors")  # each shared tensor once on disk
        with safe_open(f"{folder}/model.safetensors", "pt") as file:
            keys = [key for key in file.keys() if "relative_attention_bias" in key]
    assert sorted(keys) == ["blocks.0.attn.scheme.relative_attention_bias.weight",
                            "blocks.3.attn.scheme.relative_attention_bias.weight"]  # fmt: skip
    config = model.config_dict()["layer_schemes"]
    assert config[1] is None and config[2] == {"same_as": 0} and config[3]["name"] == config[0]["name"]


def test_config_round_trip_equal_outputs():
    torch.manual_seed(0)
    nope = NoPE()
    local, full = RotaryEmbedding(HEAD_DIM, base=10.0), RotaryEmbedding(HEAD_DIM, base=1e6)
    schemes = [local, full, nope, local, T5RelativeBias(HEADS, bidirectional=False), ALiBi(HEADS), None]
    model = Decoder(VOCAB, dim=DIM, depth=len(schemes), num_heads=HEADS, schemes=schemes).eval()
    config = json.loads(json.dumps(model.config_dict()))
    rebuilt = build_model(config).eval()
    assert rebuilt.config_dict() == config
    layers = rebuilt.layer_schemes
    assert layers[0] is layers[3] and layers[0] is not layers[1] and layers[-1] is None
    assert [getattr(s, "base", None) for s in layers[:2]] == [10.0, 1e6]
    rebuilt.load_state_dict(model.state_dict())
    ids = _ids()
    assert torch.equal(rebuilt(ids), model(ids))


def test_configs_without_layer_schemes_still_build():
    model = Decoder(VOCAB, dim=DIM, depth=2, num_heads=HEADS, scheme=RotaryEmbedding(HEAD_DIM))
    config = model.config_dict()
    assert "layer_schemes" not in config  # single-scheme configs are as before
    rebuilt = build_model(config)
    assert rebuilt.layer_schemes[0] is rebuilt.layer_schemes[1] is rebuilt.scheme


@pytest.mark.parametrize("cls", [Decoder, Encoder])
def test_lab_checkpoint_round_trip_equal_outputs(cls, tmp_path):
    torch.manual_seed(0)
    t5 = T5RelativeBias(HEADS)
    with torch.no_grad():
        t5.relative_attention_bias.weight.normal_()  # not the init: the load must bring it back
    schemes = [RotaryEmbedding(HEAD_DIM), t5, NoPE(), t5]
    model = cls(VOCAB, dim=DIM, depth=4, num_heads=HEADS, schemes=schemes).eval()
    folder = save_checkpoint(model, tmp_path / "ckpt", {"step": 1})
    loaded, meta = load_checkpoint(folder)
    assert meta == {"step": 1}
    assert loaded.layer_schemes[1] is loaded.layer_schemes[3]
    assert torch.equal(loaded.layer_schemes[1].relative_attention_bias.weight, t5.relative_attention_bias.weight)
    ids = _ids()
    assert torch.equal(loaded(ids), model(ids))


def test_bad_inputs_give_clear_errors():
    kwargs = dict(dim=DIM, depth=3, num_heads=HEADS)
    with pytest.raises(ValueError, match=r"schemes has 2 entries but depth=3"):
        Decoder(VOCAB, schemes=[NoPE(), None], **kwargs)
    with pytest.raises(ValueError, match=r"schemes\[1\] is LearnedAbsolute, an absolute scheme.*scheme="):
        Decoder(VOCAB, schemes=[None, LearnedAbsolute(32, DIM), None], **kwargs)
    with pytest.raises(ValueError, match=r"either scheme=RotaryEmbedding .* or schemes=\[...\]"):
        Decoder(VOCAB, scheme=RotaryEmbedding(HEAD_DIM), schemes=[None] * 3, **kwargs)
    with pytest.raises(TypeError, match=r"schemes\[2\] must be a posembed PositionScheme or None, got str"):
        Decoder(VOCAB, schemes=[None, None, "rope"], **kwargs)
    with pytest.raises(TypeError, match="schemes must be a list of one scheme"):
        Decoder(VOCAB, schemes=NoPE(), **kwargs)
    with pytest.raises(ValueError, match="num_heads"):  # each layer's scheme is checked against the attention
        Decoder(VOCAB, schemes=[None, ALiBi(HEADS + 1), None], **kwargs)
    config = Decoder(VOCAB, schemes=[NoPE(), None, None], **kwargs).config_dict()
    for bad in ({"same_as": 1}, {"same_as": 0, "name": "nope"}, {"same_as": 3}):
        with pytest.raises(ValueError, match=r"layer_schemes\[2\].*same_as"):
            build_model({**config, "layer_schemes": [{"name": "nope"}, None, bad]})
    with pytest.raises(ValueError, match=r"layer_schemes\[1\] must be a scheme config"):
        build_model({**config, "layer_schemes": [None, "nope", None]})
    with pytest.raises(ValueError, match="unknown model config keys: schemes"):
        build_model({**config, "schemes": [None] * 3})


def _cos_sin_equal(scheme, cos, sin, positions):
    """posembed's cos/sin (``(…, D/2)``) equal transformers' ``(…, D)`` halves, bit for bit."""
    ours_cos, ours_sin = scheme.cos_sin(positions)
    half = ours_cos.shape[-1]
    assert torch.equal(cos[..., :half], ours_cos) and torch.equal(cos[..., half:], ours_cos)
    assert torch.equal(sin[..., :half], ours_sin) and torch.equal(sin[..., half:], ours_sin)


def test_gemma3_layer_types_reach_a_decoder():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    from posembed.interop.zoo import zoo_schemes

    config = transformers.Gemma3TextConfig(
        hidden_size=DIM,
        num_attention_heads=HEADS,
        head_dim=HEAD_DIM,
        num_key_value_heads=1,
        num_hidden_layers=6,
        intermediate_size=16,
        vocab_size=VOCAB,
        sliding_window_pattern=3,
    )
    model = Decoder(VOCAB, dim=DIM, depth=6, num_heads=HEADS, schemes=zoo_schemes(config, angles="fp32"))
    reference = Gemma3RotaryEmbedding(config)
    positions = torch.arange(LENGTH)[None] + 500
    layers = model.layer_schemes
    assert len({id(s) for s in layers}) == 2  # one object per layer type, shared
    for layer, layer_type in enumerate(config.layer_types):
        cos, sin = reference(torch.zeros(1), positions, layer_type)
        _cos_sin_equal(model.blocks[layer].attn.scheme, cos, sin, positions)
        assert layers[layer].base == config.rope_parameters[layer_type]["rope_theta"]
    rebuilt = build_model(json.loads(json.dumps(model.config_dict())))
    rebuilt.load_state_dict(model.state_dict())
    assert [s.base for s in rebuilt.layer_schemes] == [s.base for s in layers]
    assert torch.equal(rebuilt(_ids()), model(_ids()))


def test_llama4_nope_layers_reach_a_decoder():
    transformers = pytest.importorskip("transformers")
    from posembed.interop.zoo import zoo_schemes

    config = transformers.Llama4TextConfig(
        hidden_size=DIM,
        num_attention_heads=HEADS,
        head_dim=HEAD_DIM,
        num_key_value_heads=1,
        num_hidden_layers=8,
        intermediate_size=16,
        vocab_size=VOCAB,
    )
    model = Decoder(VOCAB, dim=DIM, depth=8, num_heads=HEADS, schemes=zoo_schemes(config))
    kinds = [isinstance(block.attn.scheme, NoPE) for block in model.blocks]
    assert kinds == [not use for use in config.no_rope_layers] and any(kinds) and not all(kinds)
    model(_ids()).sum().backward()


def test_zoo_decoder_takes_the_configs_sizes_and_layer_schemes():
    transformers = pytest.importorskip("transformers")
    from posembed.interop.zoo import zoo_decoder, zoo_schemes

    gemma = transformers.Gemma3TextConfig(
        hidden_size=32,
        num_attention_heads=HEADS,
        head_dim=HEAD_DIM,
        num_key_value_heads=1,
        num_hidden_layers=4,
        intermediate_size=16,
        vocab_size=VOCAB,
        sliding_window_pattern=2,
    )
    model = zoo_decoder(gemma, mlp_ratio=2)
    assert (model.dim, model.depth, model.num_heads, model.vocab_size) == (HEADS * HEAD_DIM, 4, HEADS, VOCAB)
    assert [s.base for s in model.layer_schemes] == [s.base for s in zoo_schemes(gemma)]
    assert model(_ids()).shape == (2, LENGTH, VOCAB)
    gpt2 = transformers.GPT2Config(n_embd=DIM, n_head=HEADS, n_layer=2, n_positions=40, vocab_size=VOCAB)
    absolute = zoo_decoder(gpt2, vocab_size=7)
    assert isinstance(absolute.embeddings.position, LearnedAbsolute) and absolute.layer_schemes == [None, None]
    assert absolute.vocab_size == 7 and "layer_schemes" not in absolute.config_dict()
    deberta = transformers.DebertaV2Config(hidden_size=DIM, num_attention_heads=HEADS, num_hidden_layers=1)
    with pytest.raises(ValueError, match="DeBERTa-v2 is an encoder family"):
        zoo_decoder(deberta)
