"""Broken Hugging Face checkpoint files: one CheckpointError from the API naming the file, one line and
exit 2 from the CLI, and nothing allocated for absurd sizes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import save_file

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed.analysis.sources import load_hf
from posembed.cli import main
from posembed.errors import CheckpointError
from posembed.interop.hf import load_embeddings, save_embeddings

#: refusals take ~0.02 s here; the bound leaves room for a loaded CI machine's first torch imports
REFUSAL_SECONDS = 30


def _folder(path):
    """A small BERT embedding checkpoint (config.json + model.safetensors)."""
    save_embeddings(TransformerEmbeddings(50, 8, position=LearnedAbsolute(20, 8)), path)
    return path


def _to_bin(folder, legacy=False):
    state = dict(_read(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=not legacy)
    return folder / "pytorch_model.bin"


def _read(path):
    from safetensors.torch import load_file

    return load_file(path)


class _RunsCode:
    """A pickle that asks to call a function when loaded (a harmless one, refused all the same)."""

    def __reduce__(self):
        return (os.getcwd, ())


def _damage(folder, how):
    """Break the folder one way; returns the file the error must name and a regex for what is wrong."""
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    if how == "empty":
        weights.write_bytes(b"")
        return weights, "is empty"
    if how == "truncated":
        weights.write_bytes(data[: len(data) // 2])
        return weights, "not a readable safetensors file: .*(incomplete|covered)"
    if how == "garbage":
        weights.write_bytes(b"\x00garbage, not safetensors" * 9)
        return weights, "not a readable safetensors file"
    if how == "truncated_header":
        weights.write_bytes(data[:20])
        return weights, "not a readable safetensors file"
    if how == "truncated_bin":
        path = _to_bin(folder)
        path.write_bytes(path.read_bytes()[:300])
        return path, "not a readable PyTorch file"
    if how == "unsafe_pickle":
        weights.unlink()
        torch.save({"embeddings.word_embeddings.weight": _RunsCode()}, folder / "pytorch_model.bin")
        return folder / "pytorch_model.bin", "refused as unsafe.*weights_only=True"
    if how == "index_without_weight_map":
        weights.rename(folder / "model-00001-of-00001.safetensors")
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}}))
        return folder / "model.safetensors.index.json", "no 'weight_map'"
    if how == "bin_index_without_weight_map":
        _to_bin(folder).rename(folder / "pytorch_model-00001.bin")
        (folder / "pytorch_model.bin.index.json").write_text("[]")
        return folder / "pytorch_model.bin.index.json", "no 'weight_map'"
    if how in ("shard_outside", "shard_absolute"):
        outside = folder.parent / f"elsewhere-{how}.safetensors"
        weights.rename(outside)  # a whole, readable file: it must be refused, not loaded
        shard = str(outside) if how == "shard_absolute" else f"../{outside.name}"
        names = list(_read(outside))
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": dict.fromkeys(names, shard)}))
        return folder / "model.safetensors.index.json", "outside the checkpoint folder; refused"
    if how == "config_list":
        (folder / "config.json").write_text("[1, 2]")
        return folder / "config.json", "holds a JSON list; config.json must be an object"
    if how == "config_bad_json":
        (folder / "config.json").write_text('{"vocab_size": 50,')
        return folder / "config.json", "is not valid JSON"
    if how == "config_not_utf8":
        (folder / "config.json").write_bytes(b'{"model_type": "b\xe9rt"}')
        return folder / "config.json", r"is not UTF-8 text \(byte 0xe9"
    raise AssertionError(how)


DAMAGES = [
    "empty",
    "truncated",
    "garbage",
    "truncated_header",
    "truncated_bin",
    "unsafe_pickle",
    "index_without_weight_map",
    "bin_index_without_weight_map",
    "shard_outside",
    "shard_absolute",
    "config_list",
    "config_bad_json",
    "config_not_utf8",
]
#: the inspector reads single-file safetensors checkpoints; the others it names as unsupported (one line too)
SAFETENSORS_DAMAGES = [
    "empty",
    "truncated",
    "garbage",
    "truncated_header",
    "config_list",
    "config_bad_json",
    "config_not_utf8",
]


@pytest.mark.parametrize("how", DAMAGES)
def test_load_embeddings_raises_one_checkpoint_error_naming_the_file(tmp_path, how):
    folder = _folder(tmp_path / "ckpt")
    path, problem = _damage(folder, how)
    with pytest.raises(CheckpointError, match=problem) as info:
        load_embeddings(folder)
    assert info.value.path == str(path)
    assert str(info.value).startswith(repr(str(path)))


@pytest.mark.parametrize("how", SAFETENSORS_DAMAGES)
def test_inspector_raises_the_same_error(tmp_path, how):
    folder = _folder(tmp_path / "ckpt")
    path, problem = _damage(folder, how)
    with pytest.raises(CheckpointError, match=problem) as info:
        load_hf(folder)
    assert info.value.path == str(path)


def _cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_refusal(code, err, *fragments):
    assert code == 2, err
    assert "Traceback" not in err and err.endswith("\n") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("command", ["encode", "inspect"])
def test_cli_one_line_and_exit_2(tmp_path, capsys, how, command):
    folder = _folder(tmp_path / "ckpt")
    path, _ = _damage(folder, how)
    argv = (
        ["encode", "hi", "--model", str(folder)]
        if command == "encode"
        else ["inspect", str(folder), "--out", str(tmp_path / "o")]
    )
    code, out, err = _cli(capsys, *argv)
    no_safetensors = how in (
        "truncated_bin",
        "unsafe_pickle",
        "bin_index_without_weight_map",
        "shard_outside",
        "shard_absolute",
    )
    expected = "not a checkpoint folder" if command == "inspect" and no_safetensors else path.name
    _one_line_refusal(code, err, f"posembed {command}: error:", expected)
    assert out == ""


def test_shards_inside_the_folder_still_load(tmp_path):
    folder = _folder(tmp_path / "ckpt")
    (folder / "model.safetensors").rename(folder / "sub-shard.safetensors")
    names = list(_read(folder / "sub-shard.safetensors"))
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": dict.fromkeys(names, "./sub-shard.safetensors")})
    )
    assert load_embeddings(folder).vocab_size == 50


def test_sharded_bin_checkpoint_loads(tmp_path):
    folder = _folder(tmp_path / "ckpt")
    reference = load_embeddings(folder)
    _to_bin(folder).rename(folder / "pytorch_model-00001-of-00001.bin")
    names = list(torch.load(folder / "pytorch_model-00001-of-00001.bin", weights_only=True))
    (folder / "pytorch_model.bin.index.json").write_text(
        json.dumps({"weight_map": dict.fromkeys(names, "pytorch_model-00001-of-00001.bin")})
    )
    loaded = load_embeddings(folder)
    assert torch.equal(loaded.token_embeddings.weight, reference.token_embeddings.weight)


# ---------------------------------------------------------------------- sizes before allocation

#: (config change, what load_embeddings says, what the inspector says)
BAD_SIZES = [
    (
        {"vocab_size": 10**12},
        "word_embeddings.weight has shape (50, 8), config.json implies (1000000000000, 8)",
        "says vocab_size=1000000000000, but the weights' embeddings.word_embeddings.weight has shape (50, 8)",
    ),
    ({"vocab_size": -5}, "says vocab_size=-5; it must be a positive integer", None),
    ({"vocab_size": "lots"}, "says vocab_size='lots'; it must be a positive integer", None),
    ({"vocab_size": True}, "says vocab_size=True; it must be a positive integer", None),
    (
        {"max_position_embeddings": 10**9},
        "position_embeddings.weight has shape (20, 8), config.json implies (1000000000, 8)",
        "says max_position_embeddings=1000000000, but the weights' embeddings.position_embeddings.weight",
    ),
    (
        {"hidden_size": 10**6},
        "LayerNorm.weight has shape (8,), config.json implies (1000000,)",
        "says hidden_size=1000000, but the weights' embeddings.word_embeddings.weight has shape (50, 8)",
    ),
    ({"layer_norm_eps": "small"}, "says layer_norm_eps='small'; it must be a number", None),
]


def _with_config(folder, change):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))


@pytest.mark.parametrize(("change", "api_message", "inspect_message"), BAD_SIZES)
def test_sizes_are_checked_against_the_weights_before_building(tmp_path, change, api_message, inspect_message):
    folder = _folder(tmp_path / "ckpt")
    _with_config(folder, change)
    for load, message in ((load_embeddings, api_message), (load_hf, inspect_message or api_message)):
        if load is load_hf and "layer_norm_eps" in change:
            continue  # the inspector reads no embedding LayerNorm setting here
        start = time.perf_counter()
        with pytest.raises(CheckpointError, match=re.escape(message)):
            load(folder)
        assert time.perf_counter() - start < REFUSAL_SECONDS


def test_layer_count_against_the_weights(tmp_path):
    """A BERT folder whose config asks for more layers than the weights hold: transformers would build them."""
    folder = _folder(tmp_path / "ckpt")
    state = _read(folder / "model.safetensors")
    state["encoder.layer.0.attention.self.query.weight"] = torch.zeros(8, 8)
    save_file(state, folder / "model.safetensors")
    _with_config(folder, {"num_hidden_layers": 10**6})
    with pytest.raises(CheckpointError, match="num_hidden_layers=1000000, but the weights hold 1 layers"):
        load_hf(folder)


@pytest.mark.parametrize("value", [10**12, -5, "lots"])
@pytest.mark.parametrize("command", ["encode", "inspect"])
def test_cli_refuses_bad_sizes_in_one_line(tmp_path, capsys, value, command):
    folder = _folder(tmp_path / "ckpt")
    _with_config(folder, {"vocab_size": value})
    argv = (
        ["encode", "hi", "--model", str(folder)]
        if command == "encode"
        else ["inspect", str(folder), "--out", str(tmp_path / "o")]
    )
    start = time.perf_counter()
    code, _, err = _cli(capsys, *argv)
    assert time.perf_counter() - start < REFUSAL_SECONDS
    _one_line_refusal(code, err, "vocab_size=" if value != 10**12 else "1000000000000")


@pytest.mark.slow
def test_no_memory_is_allocated_for_an_absurd_vocabulary(tmp_path):
    """Measured in a fresh process: the peak resident memory grows by less than 500 MB."""
    folder = _folder(tmp_path / "ckpt")
    _with_config(folder, {"vocab_size": 10**10, "max_position_embeddings": 10**8})
    script = (
        "import resource, sys\n"
        "from posembed.analysis.sources import load_source\n"
        "from posembed.errors import CheckpointError\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n    load_source(sys.argv[1])\nexcept CheckpointError:\n    pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 500_000  # KiB


def test_relative_key_checkpoint_is_refused_by_the_inspector(tmp_path, capsys):
    folder = _folder(tmp_path / "ckpt")
    _with_config(folder, {"position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match="position_embedding_type='relative_key'.*Shaw-style relative.*never used"):
        load_hf(folder)
    code, _, err = _cli(capsys, "inspect", str(folder), "--out", str(tmp_path / "o"))
    _one_line_refusal(code, err, "relative_key")
