"""posembed.interop.extend on the real all-MiniLM-L6-v2 and on small random BERT-family models."""

import json
import logging
import shutil

import pytest
import torch

from posembed.interop.extend import (
    AlreadyExtended,
    ExtensionError,
    UnsupportedCheckpoint,
    extend_checkpoint,
    read_layout,
)

transformers = pytest.importorskip("transformers")

SMALL = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=120)


def _save(tmp_path, name, model):
    folder = tmp_path / name
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def roberta(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.RobertaConfig(max_position_embeddings=66, **SMALL)
    return _save(tmp_path_factory.mktemp("roberta"), "roberta", transformers.RobertaModel(config).eval())


@pytest.fixture(scope="module")
def minilm_copy(minilm_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("minilm") / "minilm-1024"
    return extend_checkpoint(minilm_path, out, to=1024, method="copy")


def _reload(folder):
    model, info = transformers.AutoModel.from_pretrained(str(folder), output_loading_info=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set() and info["mismatched_keys"] == set()
    return model.eval()


def _hidden(model, ids, **kwargs):
    with torch.no_grad():
        return model(input_ids=ids, **kwargs).last_hidden_state


def test_minilm_copy_reloads_and_is_bit_identical_within_512(minilm_path, minilm_copy):
    extended = _reload(minilm_copy.out)
    original = transformers.AutoModel.from_pretrained(str(minilm_path)).eval()
    assert extended.config.max_position_embeddings == 1024
    assert extended.embeddings.position_embeddings.weight.shape == (1024, 384)
    ids = torch.randint(1000, 20000, (2, 512))
    types = torch.randint(0, 2, (2, 512))
    assert torch.equal(_hidden(extended, ids), _hidden(original, ids))
    assert torch.equal(
        _hidden(extended, ids[:, :77], token_type_ids=types[:, :77]),
        _hidden(original, ids[:, :77], token_type_ids=types[:, :77]),
    )
    assert _hidden(extended, torch.randint(1000, 20000, (1, 1024))).shape == (1, 1024, 384)


def test_minilm_copy_files(minilm_path, minilm_copy):
    out = minilm_copy.out
    config = json.loads((out / "config.json").read_text())
    assert config["posembed_extension"] == {
        "method": "copy",
        "original_positions": 512,
        "positions": 1024,
        "original_max_position_embeddings": 512,
    }
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 1024
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 1024
    for name in ("vocab.txt", "tokenizer.json", "modules.json", "1_Pooling/config.json", "README.md"):
        assert (out / name).read_bytes() == (minilm_path / name).read_bytes()
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as handle:
        ids = handle.get_tensor("embeddings.position_ids")
        table = handle.get_tensor("embeddings.position_embeddings.weight")
    assert torch.equal(ids, torch.arange(1024)[None])
    with safe_open(str(minilm_path / "model.safetensors"), "pt") as handle:
        trained = handle.get_tensor("embeddings.position_embeddings.weight")
    assert torch.equal(table, torch.cat([trained, trained]))
    assert not list(out.parent.glob(".*.tmp"))


def test_minilm_reloads_in_sentence_transformers(minilm_path, minilm_copy):
    st = pytest.importorskip("sentence_transformers")
    extended = st.SentenceTransformer(str(minilm_copy.out), device="cpu")
    original = st.SentenceTransformer(str(minilm_path), device="cpu")
    assert extended.max_seq_length == 1024 and original.max_seq_length == 256
    text = ["The secret harbour of Lord Arden is called Velmora."]
    assert torch.equal(torch.as_tensor(extended.encode(text)), torch.as_tensor(original.encode(text)))


def test_roberta_keeps_padding_rows_and_tiles_trained_rows(roberta, tmp_path):
    result = extend_checkpoint(roberta, tmp_path / "out", to=200, method="copy")
    assert (result.original_positions, result.positions, result.table_rows) == (64, 200, 202)
    original, extended = _reload(roberta), _reload(result.out)
    old = original.embeddings.position_embeddings.weight
    new = extended.embeddings.position_embeddings.weight
    assert extended.config.max_position_embeddings == 202 and new.shape == (202, 32)
    assert torch.equal(new[:66], old)
    for p in range(200):  # position p lives in row 2 + p and copies trained row 2 + p % 64
        assert torch.equal(new[2 + p], old[2 + p % 64])
    ids = torch.randint(3, 120, (2, 64))
    ids[1, -4:] = 1  # padding
    mask = (ids != 1).long()
    assert torch.equal(_hidden(extended, ids, attention_mask=mask), _hidden(original, ids, attention_mask=mask))
    assert _hidden(extended, torch.randint(3, 120, (1, 200))).shape == (1, 200, 32)


@pytest.mark.parametrize("method", ["interpolate", "hierarchical"])
def test_roberta_other_methods(roberta, tmp_path, method):
    result = extend_checkpoint(roberta, tmp_path / method, to=150, method=method)
    old = _reload(roberta).embeddings.position_embeddings.weight
    model = _reload(result.out)
    new = model.embeddings.position_embeddings.weight
    assert new.shape == (152, 32)
    assert torch.equal(new[:2], old[:2])
    if method == "interpolate":
        assert torch.equal(new[2], old[2]) and torch.equal(new[-1], old[-1])
        x = 10 * 63 / 149  # position 10 reads the trained table between positions 4 and 5
        expected = old[2 + 4] * (5 - x) + old[2 + 5] * (x - 4)
        torch.testing.assert_close(new[2 + 10], expected, atol=1e-6, rtol=0)
    else:
        assert torch.equal(new[:66], old)
        basis = (old[2:].double() - 0.4 * old[2].double()) / 0.6
        torch.testing.assert_close(new[2 + 64 * 2 + 5].double(), 0.4 * basis[2] + 0.6 * basis[5], atol=1e-6, rtol=0)
        assert len({tuple(row.tolist()) for row in new[2:]}) == 150  # every position distinct
    assert _hidden(model, torch.randint(3, 120, (1, 150))).shape == (1, 150, 32)


@pytest.mark.parametrize("family", ["distilbert", "electra", "albert", "xlm-roberta", "mpnet"])
def test_other_families_reload_and_copy_is_exact(tmp_path, family):
    configs = {
        "distilbert": lambda: transformers.DistilBertConfig(
            n_layers=2, dim=32, n_heads=2, hidden_dim=64, vocab_size=120, max_position_embeddings=40
        ),
        "electra": lambda: transformers.ElectraConfig(embedding_size=16, max_position_embeddings=40, **SMALL),
        "albert": lambda: transformers.AlbertConfig(embedding_size=16, max_position_embeddings=40, **SMALL),
        "xlm-roberta": lambda: transformers.XLMRobertaConfig(max_position_embeddings=42, **SMALL),
        "mpnet": lambda: transformers.MPNetConfig(max_position_embeddings=42, **SMALL),
    }
    src = _save(tmp_path, family, transformers.AutoModel.from_config(configs[family]()).eval())
    assert read_layout(src).positions == 40
    result = extend_checkpoint(src, tmp_path / "out", to=100, method="copy")
    original, extended = _reload(src), _reload(result.out)
    ids = torch.randint(3, 120, (2, 40))
    assert torch.equal(_hidden(extended, ids), _hidden(original, ids))
    assert _hidden(extended, torch.randint(3, 120, (1, 100))).shape[1] == 100


def test_pytorch_bin_is_converted(tmp_path):
    config = transformers.BertConfig(max_position_embeddings=32, **SMALL)
    src = tmp_path / "bert"
    transformers.BertForMaskedLM(config).save_pretrained(src)
    state = dict(_read_safetensors(src / "model.safetensors"))
    # older checkpoints stored the buffers too
    state["bert.embeddings.position_ids"] = torch.arange(32)[None]
    state["bert.embeddings.token_type_ids"] = torch.zeros(1, 32, dtype=torch.long)
    (src / "model.safetensors").unlink()
    torch.save(state, src / "pytorch_model.bin")
    result = extend_checkpoint(src, tmp_path / "out", to=64, method="interpolate")
    assert "pytorch_model.bin" in result.left_out and "model.safetensors" in result.rewritten
    model, info = transformers.BertForMaskedLM.from_pretrained(str(result.out), output_loading_info=True)
    _, before = transformers.BertForMaskedLM.from_pretrained(str(src), output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"]
    # transformers 5 no longer reads a stored token_type_ids buffer: the source reports it as well
    assert info["unexpected_keys"] == before["unexpected_keys"] <= {"bert.embeddings.token_type_ids"}
    assert model.bert.embeddings.position_embeddings.weight.shape == (64, 32)
    written = _read_safetensors(result.out / "model.safetensors")
    assert torch.equal(written["bert.embeddings.position_ids"], torch.arange(64)[None])
    assert torch.equal(written["bert.embeddings.token_type_ids"], torch.zeros(1, 64, dtype=torch.long))
    assert written.keys() == state.keys()
    grown = {
        "bert.embeddings.position_ids",
        "bert.embeddings.token_type_ids",
        "bert.embeddings.position_embeddings.weight",
    }
    assert all(torch.equal(written[k], state[k]) for k in state.keys() - grown)


def _read_safetensors(path):
    from safetensors.torch import load_file

    return load_file(str(path))


def test_foreign_weights_are_left_out(roberta, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for path in roberta.iterdir():
        (src / path.name).write_bytes(path.read_bytes())
    (src / "onnx").mkdir()
    (src / "onnx" / "model.onnx").write_bytes(b"stale")
    (src / "notes.txt").write_text("kept")
    result = extend_checkpoint(src, tmp_path / "out", to=100)
    assert result.left_out == ("onnx/model.onnx",)
    assert (result.out / "notes.txt").read_text() == "kept" and not (result.out / "onnx").exists()


# ---------------------------------------------------------------------- refusals


def test_refuses_a_size_not_larger(roberta, tmp_path):
    for to in (64, 10):
        with pytest.raises(ExtensionError, match="larger than the checkpoint's 64 positions"):
            extend_checkpoint(roberta, tmp_path / "out", to=to)
    with pytest.raises(ExtensionError, match="unknown extension method 'rope'"):
        extend_checkpoint(roberta, tmp_path / "out", to=100, method="rope")
    with pytest.raises(ExtensionError, match="more than the 1048576 positions"):
        extend_checkpoint(roberta, tmp_path / "out", to=2**21)
    with pytest.raises(ExtensionError, match="at most 4096"):
        extend_checkpoint(roberta, tmp_path / "out", to=5000, method="hierarchical")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "config_class, kwargs",
    [
        ("GPT2Config", dict(n_layer=1, n_embd=16, n_head=2, vocab_size=50, n_positions=32)),
        (
            "LlamaConfig",
            dict(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32, vocab_size=50),
        ),
    ],
)
def test_refuses_other_families(tmp_path, config_class, kwargs):
    config = getattr(transformers, config_class)(**kwargs)
    src = _save(tmp_path, "model", transformers.AutoModel.from_config(config))
    with pytest.raises(UnsupportedCheckpoint, match="supports the BERT family.*bert, electra, distilbert"):
        extend_checkpoint(src, tmp_path / "out", to=4096)


def test_refuses_relative_positions_and_missing_things(tmp_path, roberta):
    config = transformers.BertConfig(max_position_embeddings=32, position_embedding_type="relative_key", **SMALL)
    src = _save(tmp_path, "relative", transformers.BertModel(config))
    with pytest.raises(UnsupportedCheckpoint, match="position_embedding_type='relative_key'"):
        extend_checkpoint(src, tmp_path / "out", to=64)
    with pytest.raises(ExtensionError, match="does not exist"):
        extend_checkpoint(tmp_path / "nowhere", tmp_path / "out", to=64)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ExtensionError, match="needs config.json"):
        extend_checkpoint(tmp_path / "empty", tmp_path / "out", to=64)
    with pytest.raises(ExtensionError, match="outside the checkpoint folder"):
        extend_checkpoint(roberta, roberta / "inside", to=100)


def test_out_must_be_new_or_empty(roberta, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ExtensionError, match="exists and is not an empty folder"):
        extend_checkpoint(roberta, tmp_path / "full", to=100)
    (tmp_path / "empty").mkdir()
    assert extend_checkpoint(roberta, tmp_path / "empty", to=100).out == (tmp_path / "empty").resolve()


def test_second_extension_needs_force(roberta, tmp_path):
    first = extend_checkpoint(roberta, tmp_path / "a", to=100)
    with pytest.raises(AlreadyExtended, match=r"already extended by posembed \(copy: 64 -> 100 positions\).*--force"):
        extend_checkpoint(first.out, tmp_path / "b", to=200)
    second = extend_checkpoint(first.out, tmp_path / "b", to=200, method="interpolate", force=True)
    record = json.loads((second.out / "config.json").read_text())["posembed_extension"]
    assert record["original_positions"] == 100 and record["previous"]["original_positions"] == 64
    assert _reload(second.out).embeddings.position_embeddings.weight.shape == (202, 32)


def _state(folder):
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        return load_file(str(folder / "model.safetensors"))
    state = {}
    for shard in sorted(set(json.loads(index.read_text())["weight_map"].values())):
        state.update(load_file(str(folder / shard)))
    return state


def test_a_sharded_checkpoint_is_extended_and_reloads(tmp_path):
    torch.manual_seed(3)
    config = transformers.BertConfig(max_position_embeddings=64, **SMALL)
    source = tmp_path / "sharded"
    transformers.BertModel(config).eval().save_pretrained(source, max_shard_size="20KB")
    index = json.loads((source / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 2  # really sharded
    result = extend_checkpoint(source, tmp_path / "out", to=200, method="copy")
    out_index = json.loads((result.out / "model.safetensors.index.json").read_text())
    assert "model.safetensors.index.json" in result.rewritten
    assert out_index["weight_map"] == index["weight_map"]
    # total_size is the bytes of tensor data, which the table grows by (200 - 64) rows of 32 float32
    assert out_index["metadata"]["total_size"] == index["metadata"]["total_size"] + (200 - 64) * 32 * 4
    before, after = _state(source), _state(result.out)
    assert out_index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in after.values())
    assert set(before) == set(after)
    for key, tensor in before.items():
        if "position" not in key:
            assert torch.equal(after[key], tensor), key
    table = after["embeddings.position_embeddings.weight"]
    old = before["embeddings.position_embeddings.weight"]
    assert table.shape == (200, 32) and torch.equal(table[:64], old) and torch.equal(table[64:128], old)
    original, extended = _reload(source), _reload(result.out)
    ids = torch.randint(3, 120, (2, 64))
    assert torch.equal(_hidden(extended, ids), _hidden(original, ids))
    assert _hidden(extended, torch.randint(3, 120, (1, 200))).shape == (1, 200, 32)


@pytest.mark.parametrize("method", ["recurrent", "grouped"])
def test_longembed_methods_write_reloadable_checkpoints(roberta, tmp_path, method):
    result = extend_checkpoint(roberta, tmp_path / method, to=130, method=method)
    old = _reload(roberta).embeddings.position_embeddings.weight
    model = _reload(result.out)
    new = model.embeddings.position_embeddings.weight
    assert new.shape == (132, 32) and torch.equal(new[:2], old[:2])
    for p in range(130):
        row = p % 64 if method == "recurrent" else p // 3  # s = ceil(130 / 64) = 3
        assert torch.equal(new[2 + p], old[2 + row])
    assert json.loads((result.out / "config.json").read_text())["posembed_extension"]["method"] == method


@pytest.mark.slow
def test_finetune_tunes_only_new_rows_and_short_inputs_stay_bit_identical(minilm_path, tmp_path):
    result = extend_checkpoint(minilm_path, tmp_path / "tuned", to=640, method="copy", finetune=3, seed=1)
    original, tuned = _reload(minilm_path), _reload(result.out)
    old = original.embeddings.position_embeddings.weight
    new = tuned.embeddings.position_embeddings.weight
    assert torch.equal(new[:512], old)  # the original rows, bit for bit
    assert not torch.equal(new[512:], old[:128])  # the new rows moved away from their copy
    for key, value in original.state_dict().items():
        if "position_embeddings" not in key and "position_ids" not in key and "token_type_ids" not in key:
            assert torch.equal(tuned.state_dict()[key], value), key
    ids = torch.randint(1000, 20000, (2, 300))
    mask = torch.ones_like(ids)
    mask[1, -50:] = 0
    assert torch.equal(_hidden(tuned, ids, attention_mask=mask), _hidden(original, ids, attention_mask=mask))
    record = json.loads((result.out / "config.json").read_text())["posembed_extension"]
    assert record["method"] == "copy" and record["finetune"]["steps"] == 3 and record["finetune"]["seed"] == 1
    assert record["finetune"]["loss_first"] > 0


def test_finetune_is_refused_where_it_would_change_the_trained_rows(roberta, tmp_path):
    with pytest.raises(ExtensionError, match="'interpolate' changes them"):
        extend_checkpoint(roberta, tmp_path / "a", to=130, method="interpolate", finetune=5)
    with pytest.raises(ExtensionError, match="--finetune takes a number of steps >= 0, got -2"):
        extend_checkpoint(roberta, tmp_path / "b", to=130, method="copy", finetune=-2)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# ---------------------------------------------------------------------- what read_layout refuses, exactly


def _edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("configured", [40, 24])
def test_a_bin_whose_table_disagrees_with_the_config_is_refused(tmp_path, configured):
    src = tmp_path / "bert"
    transformers.BertModel(transformers.BertConfig(max_position_embeddings=32, **SMALL)).save_pretrained(src)
    torch.save(
        _read_safetensors(src / "model.safetensors"), src / "pytorch_model.bin"
    )  # a .bin's shapes are read here only
    (src / "model.safetensors").unlink()
    _edit_config(src, max_position_embeddings=configured)
    message = f"has a 32-row position table but config.json says max_position_embeddings={configured}$"
    with pytest.raises(UnsupportedCheckpoint, match=message):
        read_layout(src)


def test_a_table_with_no_row_past_the_padding_rows_is_refused(tmp_path):
    src = tmp_path / "roberta"
    config = transformers.RobertaConfig(max_position_embeddings=3, pad_token_id=1, **SMALL)
    transformers.RobertaModel(config).save_pretrained(src)
    assert read_layout(src).positions == 1  # rows 0 and 1 below the first position, one position
    _edit_config(src, pad_token_id=2)
    with pytest.raises(UnsupportedCheckpoint, match="a 3-row table leaves no positions after the first 3 rows"):
        read_layout(src)


def test_a_roberta_config_without_pad_token_id_numbers_from_row_2(tmp_path):
    src = tmp_path / "roberta"
    config = transformers.RobertaConfig(max_position_embeddings=34, pad_token_id=1, **SMALL)
    transformers.RobertaModel(config).save_pretrained(src)
    _edit_config(src, pad_token_id=None)  # transformers' default padding_idx is 1: positions from row 2
    layout = read_layout(src)
    assert (layout.offset, layout.positions) == (2, 32)
    _edit_config(src, pad_token_id=0)
    assert (read_layout(src).offset, read_layout(src).positions) == (1, 33)


def test_no_position_embedding_type_is_not_absolute(tmp_path):
    src = tmp_path / "bert"
    transformers.BertModel(transformers.BertConfig(max_position_embeddings=32, **SMALL)).save_pretrained(src)
    _edit_config(src, position_embedding_type=None)
    with pytest.raises(UnsupportedCheckpoint, match="position_embedding_type=None; only 'absolute' tables extend"):
        read_layout(src)


def _sharded_bin(tmp_path, name="bert-bin"):
    """A BERT checkpoint saved as two pytorch_model .bin shards and their index, as transformers 4 wrote them."""
    torch.manual_seed(5)
    model = transformers.BertModel(transformers.BertConfig(max_position_embeddings=32, **SMALL)).eval()
    src = tmp_path / name
    model.save_pretrained(src)
    (src / "model.safetensors").unlink()
    state = {key: value.clone() for key, value in model.state_dict().items()}
    names = sorted(state)
    shards = {
        "pytorch_model-00001-of-00002.bin": names[: len(names) // 2],
        "pytorch_model-00002-of-00002.bin": names[len(names) // 2 :],
    }
    for shard, keys in shards.items():
        torch.save({key: state[key] for key in keys}, src / shard)
    weight_map = {key: shard for shard, keys in shards.items() for key in keys}
    (src / "pytorch_model.bin.index.json").write_text(
        json.dumps({"metadata": {"total_size": 1}, "weight_map": weight_map})
    )
    return src, model, shards


def test_a_sharded_pytorch_bin_is_read_by_the_one_rule_and_converted(tmp_path):
    from posembed.interop.hf.checks import weight_shapes

    src, model, shards = _sharded_bin(tmp_path)
    # the one rule of posembed.interop.hf.checks: a sharded .bin is found, and read where shapes are asked for
    assert read_layout(src).weights == src / "pytorch_model.bin.index.json"
    assert weight_shapes(src) is None
    assert weight_shapes(src, read_bin=True) == {key: tuple(value.shape) for key, value in model.state_dict().items()}
    result = extend_checkpoint(src, tmp_path / "out", to=80, method="copy")
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert set(result.rewritten) == {*names, "model.safetensors.index.json", "config.json"}
    assert set(result.left_out) == {*shards, "pytorch_model.bin.index.json"}
    assert not list(result.out.glob("*.bin*"))
    index = json.loads((result.out / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(names)
    after = _state(result.out)
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in after.values())
    table = after["embeddings.position_embeddings.weight"]
    old = model.embeddings.position_embeddings.weight.detach()
    assert table.shape == (80, 32) and torch.equal(table[:32], old) and torch.equal(table[32:64], old)
    ids = torch.randint(3, 120, (2, 32))
    assert torch.equal(_hidden(_reload(result.out), ids), _hidden(model, ids))


def test_a_sharded_pytorch_bin_with_a_missing_shard_is_named(tmp_path):
    from posembed.errors import CheckpointError

    src, _, shards = _sharded_bin(tmp_path)
    (src / next(iter(shards))).unlink()
    with pytest.raises(
        CheckpointError, match="maps '.*' to 'pytorch_model-00001-of-00002.bin', which is not in the folder"
    ):
        read_layout(src)


@pytest.mark.parametrize(
    "tensors, message",
    [
        ({"embeddings.word_embeddings.weight": torch.zeros(120, 4)}, "found no key$"),
        (
            {
                "embeddings.position_embeddings.weight": torch.zeros(32, 4),
                "bert.embeddings.position_embeddings.weight": torch.zeros(32, 4),
            },
            r"found 2 keys \(bert.embeddings.position_embeddings.weight, embeddings.position_embeddings.weight\)$",
        ),
        ({"embeddings.position_embeddings.weight": torch.zeros(32)}, r"has shape \(32,\), expected \(rows, width\)$"),
        (
            {"embeddings.position_embeddings.weight": torch.zeros(32, 4, 1)},
            r"has shape \(32, 4, 1\), expected \(rows, width\)$",
        ),
    ],
)
def test_weights_need_exactly_one_2d_position_table(tmp_path, tensors, message):
    from safetensors.torch import save_file

    src = tmp_path / "bert"
    src.mkdir()
    (src / "config.json").write_text(
        json.dumps({"model_type": "bert", "max_position_embeddings": 32, "vocab_size": 120})
    )
    save_file(tensors, str(src / "model.safetensors"))
    with pytest.raises(UnsupportedCheckpoint, match=message):
        read_layout(src)


# ---------------------------------------------------------------------- the request's bounds


def test_the_largest_sizes_accepted(roberta, tmp_path):
    from posembed.interop.extend.checkpoint import MAX_POSITIONS, _check_request

    layout = read_layout(roberta)
    assert MAX_POSITIONS == 2**20
    assert (
        _check_request(layout, tmp_path / "a", 2**20, "copy", False) == (tmp_path / "a").resolve()
    )  # checked, not written
    with pytest.raises(ExtensionError, match=r"^--to 1048577 is more than the 1048576 positions extend writes$"):
        _check_request(layout, tmp_path / "a", 2**20 + 1, "copy", False)
    result = extend_checkpoint(roberta, tmp_path / "h", to=64 * 64, method="hierarchical")  # L**2 exactly
    assert result.table_rows == 2 + 4096
    with pytest.raises(ExtensionError, match=r"^hierarchical extension reaches at most 4096 positions, got --to 4097$"):
        extend_checkpoint(roberta, tmp_path / "h2", to=4097, method="hierarchical")


def test_out_may_lie_in_folders_that_do_not_exist_yet(roberta, tmp_path):
    result = extend_checkpoint(roberta, tmp_path / "a" / "b" / "out", to=70)
    assert result.out == (tmp_path / "a" / "b" / "out").resolve() and (result.out / "config.json").is_file()


def test_weights_in_other_formats_are_left_out_wherever_they_are(roberta, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for path in roberta.iterdir():
        (src / path.name).write_bytes(path.read_bytes())
    (src / "tf_model.h5").write_bytes(b"stale")  # a foreign format by name
    (src / "exports").mkdir()
    (src / "exports" / "model_int8.onnx").write_bytes(b"stale")  # an ONNX file outside an onnx folder
    (src / "pytorch_model.bin").write_bytes(b"stale")  # beside model.safetensors: the old table
    (src / "extra").mkdir()
    (src / "extra" / "pytorch_model.bin").write_bytes(b"kept")  # not the checkpoint's weights: copied
    result = extend_checkpoint(src, tmp_path / "out", to=100)
    assert result.left_out == ("exports/model_int8.onnx", "pytorch_model.bin", "tf_model.h5")
    assert (
        "extra/pytorch_model.bin" in result.copied
        and (result.out / "extra" / "pytorch_model.bin").read_bytes() == b"kept"
    )
    assert not (result.out / "pytorch_model.bin").exists() and not (result.out / "tf_model.h5").exists()


@pytest.fixture(scope="module")
def small_bert(minilm_path, tmp_path_factory):
    """A 1-layer, 16-wide random BERT with 32 positions and MiniLM's tokenizer (fine-tunes in a second)."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    folder = tmp_path_factory.mktemp("small") / "bert"
    transformers.BertModel(config).save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(minilm_path / name, folder / name)
    return folder


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_finetune_reads_the_table_from_either_format_with_seed_0_and_no_progress(
    small_bert, tinyshakespeare, tmp_path, caplog, weights
):
    src = tmp_path / "src"
    shutil.copytree(small_bert, src)
    if weights == "bin":
        torch.save(_read_safetensors(src / "model.safetensors"), src / "pytorch_model.bin")
        (src / "model.safetensors").unlink()
    text = tmp_path / "text.txt"
    text.write_text(tinyshakespeare.read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="posembed.interop.extend.finetune"):
        result = extend_checkpoint(src, tmp_path / "out", to=100, finetune=1, text=text)
    record = json.loads((result.out / "config.json").read_text())["posembed_extension"]["finetune"]
    assert record["seed"] == 0 and record["steps"] == 1 and record["text"] == str(text)
    assert not [r for r in caplog.records if "tuning new rows" in r.getMessage()]  # progress is off by default
    trained = transformers.BertModel.from_pretrained(str(small_bert)).embeddings.position_embeddings.weight
    table = _read_safetensors(result.out / "model.safetensors")["embeddings.position_embeddings.weight"]
    assert table.shape == (100, 16) and torch.equal(table[:32], trained)
    assert not torch.equal(table[32:64], trained)  # tuned away from the copy


@pytest.mark.parametrize(
    "stored, written",
    [
        ({"model_max_length": 64, "do_lower_case": True}, {"model_max_length": 100, "do_lower_case": True}),
        ({"max_len": 64}, {"max_len": 100, "model_max_length": 100}),  # a legacy config gets both
        ({"do_lower_case": True}, {"do_lower_case": True, "model_max_length": 100}),
    ],
)
def test_tokenizer_config_gets_model_max_length_and_keeps_a_legacy_max_len(roberta, tmp_path, stored, written):
    src = tmp_path / "src"
    shutil.copytree(roberta, src)
    (src / "tokenizer_config.json").write_text(json.dumps(stored))
    (src / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64, "do_lower_case": False}))
    result = extend_checkpoint(src, tmp_path / "out", to=100)
    assert json.loads((result.out / "tokenizer_config.json").read_text()) == written
    assert json.loads((result.out / "sentence_bert_config.json").read_text()) == {
        "max_seq_length": 100,
        "do_lower_case": False,
    }
    assert {"tokenizer_config.json", "sentence_bert_config.json", "config.json", "model.safetensors"} == set(
        result.rewritten
    )


def test_files_in_nested_folders_are_copied(roberta, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(roberta, src)
    (src / "deep" / "er").mkdir(parents=True)
    (src / "deep" / "er" / "a.txt").write_text("a")
    (src / "deep" / "er" / "b.txt").write_text("b")
    result = extend_checkpoint(src, tmp_path / "out", to=100)
    assert (result.out / "deep" / "er" / "a.txt").read_text() == "a" and (
        result.out / "deep" / "er" / "b.txt"
    ).read_text() == "b"
    assert {"deep/er/a.txt", "deep/er/b.txt"} <= set(result.copied)


def test_safetensors_metadata_is_kept(roberta, tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_file

    src = tmp_path / "src"
    shutil.copytree(roberta, src)
    state = _read_safetensors(src / "model.safetensors")
    save_file(state, str(src / "model.safetensors"), metadata={"format": "pt", "note": "kept"})
    result = extend_checkpoint(src, tmp_path / "out", to=100)
    with safe_open(str(result.out / "model.safetensors"), "pt") as handle:
        assert handle.metadata() == {"format": "pt", "note": "kept"}


def test_one_dimensional_buffers_grow_too(tmp_path):
    """Buffers are rebuilt whatever their leading shape: ``(N,)`` as well as the usual ``(1, N)``."""
    src = tmp_path / "bert"
    transformers.BertModel(transformers.BertConfig(max_position_embeddings=32, **SMALL)).save_pretrained(src)
    state = _read_safetensors(src / "model.safetensors")
    state["embeddings.position_ids"] = torch.arange(32)
    state["embeddings.token_type_ids"] = torch.zeros(32, dtype=torch.long)
    torch.save(state, src / "pytorch_model.bin")
    (src / "model.safetensors").unlink()
    written = _read_safetensors(extend_checkpoint(src, tmp_path / "out", to=48).out / "model.safetensors")
    assert torch.equal(written["embeddings.position_ids"], torch.arange(48))
    assert torch.equal(written["embeddings.token_type_ids"], torch.zeros(48, dtype=torch.long))


def test_tensor_bytes_counts_every_tensor_whatever_its_name(tmp_path):
    from safetensors.torch import save_file

    from posembed.interop.extend.checkpoint import _tensor_bytes

    path = tmp_path / "x.safetensors"
    save_file(
        {"A.weight": torch.zeros(3), "0.bias": torch.zeros(2, dtype=torch.float64), "b": torch.zeros(2, 2)},
        str(path),
        metadata={"format": "pt"},
    )
    assert _tensor_bytes(path) == 3 * 4 + 2 * 8 + 4 * 4


def test_a_tied_legacy_bin_keeps_every_name_and_loads_as_head_and_base(tmp_path):
    """A ``.bin`` saved by ``torch.save(model.state_dict())`` holds the MLM decoder tied to the word
    embeddings (one storage). Each name is written (safetensors' ``save_model`` would keep only
    ``lm_head.decoder.weight``, the first in sorted order, and ``RobertaModel`` would then start
    from random word embeddings); both the head model and the base model load it whole."""
    torch.manual_seed(0)
    model = transformers.RobertaForMaskedLM(transformers.RobertaConfig(max_position_embeddings=34, **SMALL)).eval()
    src = tmp_path / "roberta-mlm"
    model.config.save_pretrained(src)
    state = model.state_dict()
    tied = ("lm_head.decoder.weight", "roberta.embeddings.word_embeddings.weight")
    assert state[tied[0]].data_ptr() == state[tied[1]].data_ptr()
    torch.save(state, src / "pytorch_model.bin")
    result = extend_checkpoint(src, tmp_path / "out", to=66, method="copy")
    written = _read_safetensors(result.out / "model.safetensors")
    assert written.keys() == state.keys()
    ids = torch.randint(3, 120, (2, 30))
    head, info = transformers.RobertaForMaskedLM.from_pretrained(str(result.out), output_loading_info=True)
    assert not any(info.values()), info
    with torch.no_grad():
        assert torch.equal(head.eval()(input_ids=ids).logits, model(input_ids=ids).logits)
    base, info = transformers.AutoModel.from_pretrained(str(result.out), output_loading_info=True)  # RobertaModel
    assert info["missing_keys"] == {"pooler.dense.weight", "pooler.dense.bias"}  # an MLM checkpoint has no pooler
    assert torch.equal(base.embeddings.word_embeddings.weight, state[tied[1]])


def test_untie_copies_only_tensors_that_share_memory():
    from posembed.interop.extend.checkpoint import _untie

    weight, alone = torch.randn(4, 3), torch.randn(5)
    out = _untie({"a": weight, "b": weight, "c": alone, "d": weight.t()})
    assert out["c"].data_ptr() == alone.data_ptr()  # not copied
    assert len({out[k].data_ptr() for k in "abd"} | {weight.data_ptr()}) == 4  # each tied one copied apart
    for name, expected in (("a", weight), ("b", weight), ("d", weight.t())):
        assert torch.equal(out[name], expected) and out[name].is_contiguous()
