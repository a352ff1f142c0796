import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed.interop.hf import load_embeddings, save_embeddings
from posembed.schemes.base import AbsoluteScheme
from tests.helpers import assert_close, max_abs_diff

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def bert_embeddings(minilm_path):
    """transformers' own BertEmbeddings with the real all-MiniLM-L6-v2 weights, loaded by transformers."""
    model = transformers.BertModel.from_pretrained(str(minilm_path)).eval()
    return model.embeddings


@pytest.fixture(scope="module")
def minilm_block(minilm_path):
    return load_embeddings(minilm_path).eval()


def _random_inputs(batch=4, length=96, vocab=30522):
    ids = torch.randint(0, vocab, (batch, length))
    ids[:, -5:] = 0  # a few [PAD]s (padding_idx row)
    return ids, torch.randint(0, 2, (batch, length))


@pytest.mark.parametrize(
    "positions",
    ["default", "offset", "per_row", "end_of_table"],
)
def test_parity_with_transformers_bert_embeddings_on_minilm(bert_embeddings, minilm_block, positions):
    ids, types = _random_inputs()
    position_ids = {
        "default": None,
        "offset": (torch.arange(96) + 300)[None],
        "per_row": torch.randint(0, 512, (4, 96)),
        "end_of_table": (torch.arange(96) + 512 - 96).expand(4, 96),
    }[positions]
    with torch.no_grad():
        for token_types in (None, types):
            ours = minilm_block(ids, token_types, position_ids)
            ref = bert_embeddings(input_ids=ids, token_type_ids=token_types, position_ids=position_ids)
            assert ours.shape == ref.shape == (4, 96, 384)
            assert max_abs_diff(ours, ref) <= 1e-6
            assert_close(ours, ref, atol=1e-6, rtol=0)


def test_loaded_weights_are_the_checkpoint_tensors(bert_embeddings, minilm_block):
    ref = bert_embeddings.state_dict()
    ours = minilm_block.state_dict()
    assert torch.equal(ours["token_embeddings.weight"], ref["word_embeddings.weight"])
    assert torch.equal(ours["position.embedding.weight"], ref["position_embeddings.weight"])
    assert torch.equal(ours["token_type_embeddings.weight"], ref["token_type_embeddings.weight"])
    assert torch.equal(ours["norm.weight"], ref["LayerNorm.weight"])
    assert torch.equal(ours["norm.bias"], ref["LayerNorm.bias"])
    assert minilm_block.norm.eps == 1e-12 and minilm_block.pad_token_id == 0 and minilm_block.max_positions == 512


def test_save_hf_round_trips_through_transformers(minilm_block, bert_embeddings, tmp_path):
    save_embeddings(minilm_block, tmp_path)
    reloaded = transformers.BertModel.from_pretrained(str(tmp_path)).eval().embeddings
    for key, value in bert_embeddings.state_dict().items():
        assert torch.equal(reloaded.state_dict()[key], value), key
    # the bare BertEmbeddings module loads the same file strictly
    config = transformers.BertConfig.from_pretrained(str(tmp_path))
    bare = transformers.models.bert.modeling_bert.BertEmbeddings(config).eval()
    state = {k.removeprefix("embeddings."): v for k, v in load_file(tmp_path / "model.safetensors").items()}
    bare.load_state_dict(state, strict=True)
    ids, types = _random_inputs(2, 40)
    with torch.no_grad():
        assert torch.equal(bare(ids, types), minilm_block(ids, types))
    again = load_embeddings(tmp_path)
    for key, value in minilm_block.state_dict().items():
        assert torch.equal(again.state_dict()[key], value), key


def _small_block(type_vocab_size=2):
    emb = TransformerEmbeddings(50, 8, position=LearnedAbsolute(20, 8), type_vocab_size=type_vocab_size, pad_token_id=1)
    with torch.no_grad():
        emb.norm.weight.normal_()
        emb.norm.bias.normal_()
    return emb.eval()


def test_block_without_segments_saves_a_zero_segment_row(tmp_path):
    emb = _small_block(type_vocab_size=0)
    save_embeddings(emb, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["type_vocab_size"] == 1 and config["pad_token_id"] == 1
    ref = transformers.BertModel.from_pretrained(str(tmp_path)).eval().embeddings
    ids = torch.randint(0, 50, (3, 20))
    with torch.no_grad():
        assert torch.equal(ref(ids), emb(ids))


def test_only_learned_add_blocks_save(tmp_path):
    class Ramp(AbsoluteScheme):
        dim = 8

        def forward(self, position_ids):
            return position_ids.float().unsqueeze(-1).expand(*position_ids.shape, 8)

    with pytest.raises(ValueError, match="only learned absolute positions.*Ramp"):
        save_embeddings(TransformerEmbeddings(50, 8, position=Ramp()), tmp_path)
    with pytest.raises(ValueError, match="only learned absolute positions.*no position scheme"):
        save_embeddings(TransformerEmbeddings(50, 8, position=None), tmp_path)
    concat = TransformerEmbeddings(50, 8, position=LearnedAbsolute(20, 3), combine="concat")
    with pytest.raises(ValueError, match="combine='concat'"):
        save_embeddings(concat, tmp_path)
    assert not (tmp_path / "model.safetensors").exists()


def _write_checkpoint(folder, state, config=None, fmt="safetensors"):
    folder.mkdir(parents=True, exist_ok=True)
    base = {"model_type": "bert", "vocab_size": 50, "hidden_size": 8, "max_position_embeddings": 20, "pad_token_id": 1}
    (folder / "config.json").write_text(json.dumps({**base, **(config or {})}))
    state = {k: v.contiguous() for k, v in state.items()}
    if fmt == "safetensors":
        save_file(state, folder / "model.safetensors")
    else:  # "bin": the zip format of torch >= 1.6; "legacy_bin": the older non-zip pickle
        torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=fmt == "bin")
    return folder


def _hf_state(emb, prefix="embeddings.", old_layer_norm_names=False):
    gamma, beta = ("gamma", "beta") if old_layer_norm_names else ("weight", "bias")
    return {
        prefix + "word_embeddings.weight": emb.token_embeddings.weight.detach(),
        prefix + "position_embeddings.weight": emb.position.weight.detach(),
        prefix + "token_type_embeddings.weight": emb.token_type_embeddings.weight.detach(),
        prefix + "LayerNorm." + gamma: emb.norm.weight.detach(),
        prefix + "LayerNorm." + beta: emb.norm.bias.detach(),
        prefix + "position_ids": torch.arange(20)[None],
        "encoder.layer.0.attention.self.query.weight": torch.zeros(8, 8),
    }


@pytest.mark.parametrize(
    ("prefix", "old_names", "fmt"),
    [
        ("bert.embeddings.", False, "safetensors"),
        ("model.embeddings.", True, "safetensors"),
        ("", False, "safetensors"),
        ("electra.embeddings.", False, "bin"),
        ("my_encoder.embeddings.", False, "bin"),
        ("bert.embeddings.", False, "legacy_bin"),
    ],
)
def test_prefixes_aliases_and_formats_load_the_same_block(tmp_path, prefix, old_names, fmt):
    emb = _small_block()
    _write_checkpoint(tmp_path, _hf_state(emb, prefix, old_names), fmt=fmt)
    loaded = load_embeddings(tmp_path).eval()
    for key, value in emb.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert loaded.pad_token_id == 1


def test_legacy_non_zip_bin_is_read_without_mmap(tmp_path):
    """torch.load(mmap=True) refuses pre-1.6 (non-zip) files; those are read whole, still weights_only."""
    import zipfile

    emb = _small_block()
    _write_checkpoint(tmp_path, _hf_state(emb), fmt="legacy_bin")
    assert not zipfile.is_zipfile(tmp_path / "pytorch_model.bin")
    loaded = load_embeddings(tmp_path)
    assert_close(loaded.token_embeddings.weight, emb.token_embeddings.weight, atol=0, rtol=0)
    assert_close(loaded.position.weight, emb.position.weight, atol=0, rtol=0)
    assert_close(loaded.norm.weight, emb.norm.weight, atol=0, rtol=0)


def test_sharded_safetensors_checkpoint(tmp_path):
    emb = _small_block()
    state = _hf_state(emb, "bert.embeddings.")
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[:3], "model-00002-of-00002.safetensors": names[3:]}
    for shard, keys in shards.items():
        save_file({k: state[k].contiguous() for k in keys}, tmp_path / shard)
    weight_map = {k: shard for shard, keys in shards.items() for k in keys}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (tmp_path / "config.json").write_text(
        json.dumps({"vocab_size": 50, "hidden_size": 8, "max_position_embeddings": 20})
    )
    loaded = load_embeddings(tmp_path)
    assert torch.equal(loaded.token_embeddings.weight, emb.token_embeddings.weight)
    assert torch.equal(loaded.norm.bias, emb.norm.bias)


def test_missing_and_misshaped_keys_are_all_listed(tmp_path):
    state = _hf_state(_small_block())
    del state["embeddings.token_type_embeddings.weight"]
    del state["embeddings.LayerNorm.bias"]
    state["embeddings.position_embeddings.weight"] = torch.zeros(10, 8)
    _write_checkpoint(tmp_path, state)
    with pytest.raises(ValueError) as info:
        load_embeddings(tmp_path)
    message = str(info.value)
    assert "missing token_type_embeddings.weight" in message
    assert "missing LayerNorm.bias" in message
    assert "position_embeddings.weight has shape (10, 8), config.json implies (20, 8)" in message


def test_bad_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_embeddings(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_embeddings(tmp_path)
    (tmp_path / "config.json").write_text(
        json.dumps({"vocab_size": 50, "hidden_size": 8, "max_position_embeddings": 20})
    )
    with pytest.raises(FileNotFoundError, match="no weights.*model.safetensors"):
        load_embeddings(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 50, "hidden_size": 8}))
    with pytest.raises(ValueError, match="BERT-family.*without max_position_embeddings"):
        load_embeddings(tmp_path)
    relative = {
        "vocab_size": 50,
        "hidden_size": 8,
        "max_position_embeddings": 20,
        "position_embedding_type": "relative_key",
    }
    (tmp_path / "config.json").write_text(json.dumps(relative))
    with pytest.raises(ValueError, match="relative_key.*ShawRelative"):
        load_embeddings(tmp_path)


def test_checkpoint_without_an_embedding_block(tmp_path):
    _write_checkpoint(tmp_path, {"encoder.weight": torch.zeros(2, 2)})
    with pytest.raises(ValueError, match="BERT-family.*hold none .no key ends in 'word_embeddings.weight'"):
        load_embeddings(tmp_path)


def test_load_in_another_dtype(minilm_path):
    emb = load_embeddings(minilm_path, dtype=torch.bfloat16).eval()
    assert emb.token_embeddings.weight.dtype == torch.bfloat16 == emb.norm.weight.dtype
    assert emb(torch.tensor([[101, 7592, 102]])).dtype == torch.bfloat16
