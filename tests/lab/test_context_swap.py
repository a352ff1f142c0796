"""swap_scheme, rope_base and rotary_head_dim on models with one scheme per layer (``schemes=[...]``)."""

from __future__ import annotations

import pytest
import torch

from posembed.lab.context import method_scheme, rope_base, rotary_head_dim, swap_scheme
from posembed.lab.context.extend import reevaluate_checkpoint
from posembed.lab.training.checkpoint import load_checkpoint, save_checkpoint
from posembed.nn.model.transformer import Decoder, build_model
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.rotary.rope import RotaryEmbedding
from posembed.schemes.rotary.scaling import LinearScalingRotary
from posembed.schemes.rotary.yarn import YaRNRotary

V, L = 13, 16


def _model(schemes, scheme=None) -> Decoder:
    torch.manual_seed(0)
    return Decoder(V, dim=16, depth=len(schemes), num_heads=2, schemes=schemes, scheme=scheme).eval()


def _names(model) -> list[str]:
    return [type(s).__name__ for s in model.layer_schemes]


def test_one_scheme_swaps_only_the_rotary_layers_and_keeps_their_sharing():
    rope = RotaryEmbedding(8)
    model = _model([rope, None, rope, ALiBi(2)])
    ids = torch.randint(0, V, (2, 4 * L))
    before = model(ids)
    linear = LinearScalingRotary(8, factor=4.0)
    swapped = swap_scheme(model, linear)
    assert _names(swapped) == ["LinearScalingRotary", "NoneType", "LinearScalingRotary", "ALiBi"]
    assert swapped.layer_schemes[0] is swapped.layer_schemes[2] and swapped.scheme is None
    assert torch.equal(model(ids), before) and _names(model)[0] == "RotaryEmbedding"  # the original is untouched
    shared = LinearScalingRotary(8, factor=4.0)
    reference = _model([shared, None, shared, ALiBi(2)])
    reference.load_state_dict(model.state_dict(), strict=True)
    assert torch.equal(swapped(ids), reference.eval()(ids))
    rebuilt = build_model(swapped.config_dict())
    assert rebuilt.config_dict() == swapped.config_dict() and rebuilt.layer_schemes[0] is rebuilt.layer_schemes[2]


def test_rope_base_and_head_dim_read_the_rotary_layers():
    model = _model([None, RotaryEmbedding(8, base=500.0), RotaryEmbedding(8, base=500.0, max_len=64)])
    assert (rope_base(model), rotary_head_dim(model)) == (500.0, 8)
    assert _names(swap_scheme(model, LinearScalingRotary(8, factor=2.0, base=500.0)))[1:] == ["LinearScalingRotary"] * 2


def test_local_and_global_bases_need_one_scheme_per_layer():
    model = _model([RotaryEmbedding(8, base=10000.0), RotaryEmbedding(8, base=1e6)])
    with pytest.raises(ValueError, match=r"disagree on their base \(10000 in layers 0; 1e\+06 in layers 1\)"):
        rope_base(model)
    assert rotary_head_dim(model) == 8  # they agree on this one
    with pytest.raises(ValueError, match="rotary layers of this model differ .* give a list"):
        swap_scheme(model, LinearScalingRotary(8, factor=2.0))
    swapped = swap_scheme(
        model, [LinearScalingRotary(8, factor=2.0, base=1e4), LinearScalingRotary(8, factor=2.0, base=1e6)]
    )
    assert [s.base for s in swapped.layer_schemes] == [1e4, 1e6] and swapped.scheme is None


def test_a_list_keeps_layers_given_none_and_refuses_to_give_a_nope_layer_positions():
    model = _model([RotaryEmbedding(8), None, ALiBi(2)])
    swapped = swap_scheme(model, [YaRNRotary(8, factor=2.0, original_max_len=L), None, None])
    assert _names(swapped) == ["YaRNRotary", "NoneType", "ALiBi"]
    with pytest.raises(ValueError, match="layer 1 has no positions \\(NoPE\\) and stays so: its entry must be None"):
        swap_scheme(model, [None, RotaryEmbedding(8), None])
    with pytest.raises(ValueError, match="new_scheme has 2 entries but the model has 3 layers"):
        swap_scheme(model, [RotaryEmbedding(8), None])
    with pytest.raises(ValueError, match="only None: nothing to swap"):
        swap_scheme(model, [None, None, None])
    with pytest.raises(
        TypeError, match="the scheme for layer 0 must be a rotary or bias PositionScheme, got LearnedAbsolute"
    ):
        swap_scheme(model, [LearnedAbsolute(32, 16), None, None])


def test_what_a_per_layer_model_cannot_take_is_refused_clearly():
    no_rotary = _model([ALiBi(2), None])
    with pytest.raises(ValueError, match="none of them is rotary"):
        swap_scheme(no_rotary, RotaryEmbedding(8))
    with pytest.raises(ValueError, match="needs a RoPE model, this one has ALiBi and no scheme \\(NoPE\\)"):
        rope_base(no_rotary)
    with pytest.raises(ValueError, match="one ALiBi \\(bias\\) for a model with one scheme per layer"):
        swap_scheme(_model([RotaryEmbedding(8), None]), ALiBi(2))
    with pytest.raises(TypeError, match="new_scheme must be a rotary or bias PositionScheme, got LearnedAbsolute"):
        swap_scheme(_model([RotaryEmbedding(8), None]), LearnedAbsolute(32, 16))
    with pytest.raises(TypeError, match="or a list of them, got str"):
        swap_scheme(_model([RotaryEmbedding(8), None]), "yarn")
    absolute = Decoder(V, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(32, 16))
    with pytest.raises(ValueError, match="needs a RoPE model, this one has an absolute LearnedAbsolute"):
        rope_base(absolute)


def test_an_absolute_table_beside_rotary_layers_is_kept():
    model = _model([RotaryEmbedding(8), None], scheme=LearnedAbsolute(4 * L, 16))
    swapped = swap_scheme(model, LinearScalingRotary(8, factor=2.0))
    assert type(swapped.scheme).__name__ == "LearnedAbsolute" and _names(swapped) == ["LinearScalingRotary", "NoneType"]
    assert swapped.state_dict().keys() == model.state_dict().keys()


def test_a_shared_model_given_different_schemes_per_layer_becomes_per_layer():
    model = Decoder(V, dim=16, depth=2, num_heads=2, scheme=RotaryEmbedding(8))
    swapped = swap_scheme(model, [LinearScalingRotary(8, factor=2.0), None])
    assert swapped.scheme is None and _names(swapped) == ["LinearScalingRotary", "RotaryEmbedding"]
    assert build_model(swapped.config_dict()).config_dict() == swapped.config_dict()
    same = LinearScalingRotary(8, factor=2.0)
    shared = swap_scheme(model, [same, same])  # one object everywhere: one scheme again
    assert shared.scheme is same and not shared.per_layer and all(block.attn.scheme is same for block in shared.blocks)
    ids = torch.randint(0, V, (1, 12))
    reference = Decoder(V, dim=16, depth=2, num_heads=2, scheme=LinearScalingRotary(8, factor=2.0))
    reference.load_state_dict(shared.state_dict())
    assert torch.equal(shared.eval()(ids), reference.eval()(ids))  # the model a shared scheme would have built


def test_extend_a_per_layer_checkpoint(tmp_path):
    from posembed.lab.tasks.charlm import load_corpus

    corpus = load_corpus("tinyshakespeare", L)
    model = Decoder(corpus.vocab_size, dim=8, depth=2, num_heads=2, schemes=[RotaryEmbedding(4), None])
    save_checkpoint(model, tmp_path / "src", {"task": "charlm", "config": {"task": "charlm", "context": L}})
    rows = reevaluate_checkpoint(
        tmp_path / "src", "yarn", 2.0, windows=1, finetune_steps=1, batch=2, save_to=tmp_path / "out", device="cpu"
    )
    assert [(r["length"], r["metric"]) for r in rows] == [
        (L, "perplexity"),
        (2 * L, "perplexity"),
    ]  # charlm: no passkey
    loaded, meta = load_checkpoint(tmp_path / "out")
    assert _names(loaded) == ["YaRNRotary", "NoneType"] and loaded.scheme is None
    assert meta["config"]["context"] == 2 * L and meta["extended"] == {"method": "yarn", "factor": 2.0, "steps": 1}
    for row in rows:  # the fine-tuned, saved model's perplexity: one window of the held-out text at each length
        window = corpus.val[: row["length"] + 1]
        with torch.no_grad():
            loss = torch.nn.functional.cross_entropy(loaded.eval()(window[None, :-1])[0].double(), window[1:])
        assert row["value"] == pytest.approx(float(loss.exp()), rel=1e-5)
    assert method_scheme("yarn", head_dim=4, factor=2.0, original_len=L).factor == loaded.layer_schemes[0].factor
