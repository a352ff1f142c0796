"""Encoder / Decoder: every scheme kind x combine x inject x untied; config round trip; causality.

These variants are checked for shapes, gradients and round trips; the logits themselves are
compared with an independent forward in ``tests/test_model_reference.py`` (one per scheme kind).
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from posembed.nn.model.transformer import Decoder, Encoder, build_model, scheme_config
from posembed.schemes.absolute.learned import LearnedAbsolute, LearnedParameter
from tests.helpers import assert_close
from tests.test_attention import scheme_factories

VOCAB, DIM, HEADS, DEPTH, LENGTH = 13, 16, 2, 2, 9
ENCODER_KINDS = ("none", "learned", "rope", "t5", "shaw_key")


def absolute_factories(width: int = DIM) -> dict:
    from posembed.schemes.absolute.sinusoidal import ScaledSinusoidal, Sinusoidal

    return {
        "learned": lambda: LearnedAbsolute(32, width),
        "learned_parameter": lambda: LearnedParameter(32, width),
        "sinusoidal": lambda: Sinusoidal(width),
        "scaled_sinusoidal": lambda: ScaledSinusoidal(width, layout="concat"),
    }


def all_factories(causal: bool) -> dict:
    """Every real scheme of every kind for a model of width DIM with HEADS heads."""
    return {**absolute_factories(), **scheme_factories(causal, HEADS, DIM // HEADS)}


def _variants():
    """(id, causal, scheme factory, options) for every kind x combine x inject x untied."""
    for causal in (True, False):
        for scheme_id, factory in all_factories(causal).items():
            if causal or scheme_id in ENCODER_KINDS:  # every scheme once; the encoder once per kind
                yield scheme_id, causal, factory, {}
        yield "learned-concat", causal, lambda: LearnedAbsolute(32, 6), {"combine": "concat"}
        yield "sinusoidal-every_layer", causal, absolute_factories()["sinusoidal"], {"inject": "every_layer"}
        both = {"combine": "concat", "inject": "every_layer"}
        yield "learned-concat-every_layer", causal, lambda: LearnedAbsolute(32, 6), both
        yield "learned-untied", causal, absolute_factories()["learned"], {"untied": True}
        yield "sinusoidal-untied", causal, absolute_factories()["sinusoidal"], {"untied": True}


VARIANTS = list(_variants())
IDS = [f"{'decoder' if causal else 'encoder'}-{name}" for name, causal, _, _ in VARIANTS]


def _model(causal: bool, scheme, **options):
    cls = Decoder if causal else Encoder
    return cls(VOCAB, dim=DIM, depth=DEPTH, num_heads=HEADS, scheme=scheme, **options)


def _batch():
    ids = torch.randint(0, VOCAB, (3, LENGTH))
    mask = torch.ones(3, LENGTH, dtype=torch.long)
    mask[1, -3:] = 0
    return ids, mask


@pytest.mark.parametrize("name, causal, factory, options", VARIANTS, ids=IDS)
def test_shapes_gradients_and_round_trip(name, causal, factory, options) -> None:
    model = _model(causal, factory(), **options)
    ids, mask = _batch()
    logits, states = model(ids, attention_mask=mask, return_hidden_states=True)
    assert logits.shape == (3, LENGTH, VOCAB)
    assert len(states) == DEPTH + 1 and all(s.shape == (3, LENGTH, DIM) for s in states)
    logits.square().mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, missing
    assert all(p.grad.abs().sum() > 0 for n, p in model.named_parameters() if "token_embeddings" not in n)

    config = json.loads(json.dumps(model.config_dict()))
    rebuilt = build_model(config)
    rebuilt.load_state_dict(model.state_dict(), strict=True)
    model.eval(), rebuilt.eval()
    assert_close(rebuilt(ids, attention_mask=mask), model(ids, attention_mask=mask), atol=0, rtol=0)
    assert rebuilt.config_dict() == config


def test_a_shared_scheme_is_one_module_and_one_tensor_on_disk(tmp_path) -> None:
    """A scheme shared by all layers is one module; safetensors' save_model writes its table once and
    load_model fills every layer from it (``save_file`` of the state dict refuses the shared tensors)."""
    from safetensors import safe_open
    from safetensors.torch import load_model, save_model

    from posembed.schemes.bias.t5 import T5RelativeBias

    model = _model(True, T5RelativeBias(HEADS, bidirectional=False))
    assert all(block.attn.scheme is model.scheme for block in model.blocks)
    save_model(model, str(tmp_path / "model.safetensors"))
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as file:
        keys = list(file.keys())
    assert len([k for k in keys if k.endswith("relative_attention_bias.weight")]) == 1
    assert len(keys) == len({id(p) for p in model.state_dict(keep_vars=True).values()})
    rebuilt = build_model(model.config_dict())
    load_model(rebuilt, str(tmp_path / "model.safetensors"), strict=True)
    ids = torch.randint(0, VOCAB, (2, LENGTH))
    assert_close(rebuilt(ids), model(ids), atol=0, rtol=0)
    assert all(block.attn.scheme is rebuilt.scheme for block in rebuilt.blocks)


@pytest.mark.parametrize("scheme_id", sorted(all_factories(True)))
def test_decoder_is_causal(scheme_id: str) -> None:
    """The logits at position t do not depend on the tokens after t, whatever the scheme."""
    model = _model(True, all_factories(True)[scheme_id]()).eval()
    ids = torch.randint(0, VOCAB, (2, LENGTH))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % VOCAB
    before, after = model(ids), model(changed)
    assert_close(after[:, :5], before[:, :5])
    assert not torch.allclose(after[:, 5:], before[:, 5:])


def test_encoder_classifier_pools_real_tokens() -> None:
    model = Encoder(VOCAB, dim=DIM, depth=1, num_heads=HEADS, num_classes=4).eval()
    ids = torch.randint(0, VOCAB, (2, LENGTH))
    mask = torch.ones(2, LENGTH, dtype=torch.long)
    mask[0, 6:] = 0
    logits = model(ids, attention_mask=mask)
    assert logits.shape == (2, 4)
    # padding can be anything: the pooled output of row 0 only sees its 6 real tokens
    other = ids.clone()
    other[0, 6:] = (other[0, 6:] + 3) % VOCAB
    assert_close(model(other, attention_mask=mask), logits)
    alone = model(ids[:1, :6])
    assert_close(logits[:1], alone, atol=1e-5, rtol=1e-5)
    rebuilt = build_model(json.loads(json.dumps(model.config_dict())))
    assert rebuilt.num_classes == 4


def test_every_layer_adds_positions_before_each_block() -> None:
    scheme = LearnedAbsolute(32, DIM)
    model = _model(True, scheme, inject="every_layer").eval()
    ids = torch.randint(0, VOCAB, (1, LENGTH))
    _, states = model(ids, return_hidden_states=True)
    positions = scheme(torch.arange(LENGTH))
    second = model.blocks[1](states[1] + positions)
    assert_close(states[2], second)


def test_explicit_default_positions_equal_default() -> None:
    """Absolute schemes here; rotary and bias ones in tests/test_equivariance.py."""
    for scheme_id, factory in absolute_factories().items():
        model = _model(True, factory()).eval()
        ids = torch.randint(0, VOCAB, (2, LENGTH))
        assert_close(model(ids, position_ids=torch.arange(LENGTH)), model(ids), msg=scheme_id)


def test_scheme_config_names_the_registry_entry() -> None:
    assert scheme_config(LearnedAbsolute(32, 8)) == {"name": "learned", "max_len": 32, "dim": 8, "init_std": 0.02}


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "options, match",
    [
        ({"combine": "sum"}, "combine must be one of"),
        ({"inject": "twice"}, "inject must be one of"),
    ],
)
def test_unknown_options(options, match) -> None:
    with pytest.raises(ValueError, match=match):
        _model(True, LearnedAbsolute(32, DIM), **options)


@pytest.mark.parametrize("option", [{"inject": "every_layer"}, {"combine": "concat"}, {"untied": True}])
@pytest.mark.parametrize("scheme_id", ["none", "rope", "alibi"])
def test_absolute_only_options(option, scheme_id) -> None:
    scheme = scheme_factories(True, HEADS, DIM // HEADS)[scheme_id]()
    with pytest.raises(ValueError, match="needs an absolute position scheme"):
        _model(True, scheme, **option)


def test_untied_with_concat_refused() -> None:
    with pytest.raises(ValueError, match="untied=True keeps positions out of the input"):
        _model(True, LearnedAbsolute(32, 6), untied=True, combine="concat")


def test_model_bad_inputs() -> None:
    model = Decoder(VOCAB, dim=DIM, depth=1, num_heads=HEADS, max_len=8)
    with pytest.raises(ValueError, match="input length 9 exceeds max_len=8"):
        model(torch.randint(0, VOCAB, (1, 9)))
    with pytest.raises(ValueError, match=r"input_ids must have shape \(B, T\)"):
        model(torch.randint(0, VOCAB, (9,)))
    with pytest.raises(ValueError, match="dim=16 is not divisible by num_heads=3"):
        Decoder(VOCAB, dim=DIM, depth=1, num_heads=3)
    with pytest.raises(TypeError, match="PositionScheme"):
        Decoder(VOCAB, dim=DIM, depth=1, num_heads=HEADS, scheme="learned")


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape", [(2, LENGTH), (3, LENGTH - 1), (LENGTH,), (3, LENGTH, 1)])
def test_mask_shape_must_match_the_ids(causal, shape) -> None:
    model = _model(causal, LearnedAbsolute(32, DIM))
    ids = torch.randint(0, VOCAB, (3, LENGTH))
    match = rf"attention_mask has shape {re.escape(str(shape))} but input_ids has shape \(3, {LENGTH}\)"
    with pytest.raises(ValueError, match=match):
        model(ids, attention_mask=torch.ones(shape, dtype=torch.long))
    with pytest.raises(TypeError, match="attention_mask must be a tensor, got list"):
        model(ids, attention_mask=[[1] * LENGTH] * 3)


def test_build_model_bad_configs() -> None:
    config = Decoder(VOCAB, dim=DIM, depth=1, num_heads=HEADS).config_dict()
    with pytest.raises(ValueError, match="unknown model config keys: width"):
        build_model({**config, "width": 3})
    with pytest.raises(ValueError, match="'architecture' must be"):
        build_model({**config, "architecture": "gpt"})
    with pytest.raises(ValueError, match="unknown scheme 'nope_nope'"):
        build_model({**config, "scheme": {"name": "nope_nope"}})


def test_constructor_keeps_a_given_schemes_parameters() -> None:
    from posembed.schemes.bias.t5 import T5RelativeBias

    scheme = T5RelativeBias(HEADS, bidirectional=False)
    before = {k: v.clone() for k, v in scheme.state_dict().items()}
    model = _model(True, scheme)
    for key, value in before.items():
        assert_close(model.scheme.state_dict()[key], value, atol=0, rtol=0)
    model.reset_parameters()
    assert any(not torch.equal(model.scheme.state_dict()[k], v) for k, v in before.items())
