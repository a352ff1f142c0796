"""Lab checkpoints whose JSON disagrees with the weights: refused before anything is built, naming the key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
import torch

from posembed.analysis.sources import load_source
from posembed.cli import main
from posembed.errors import CheckpointError
from posembed.lab.training.checkpoint import load_checkpoint, save_checkpoint
from posembed.nn.model.transformer import Decoder, Encoder
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.rotary.rope import RotaryEmbedding

#: refusals take ~0.02 s here; the bound leaves room for a loaded CI machine's first torch imports
REFUSAL_SECONDS = 30


def _decoder_checkpoint(folder, scheme=None):
    model = Decoder(11, dim=8, depth=2, num_heads=2, scheme=scheme or LearnedAbsolute(16, 8))
    return save_checkpoint(model, folder, {"task": "copy", "trial": "t", "step": 1})


def _edit(folder, **changes):
    path = folder / "posembed_model.json"
    document = json.loads(path.read_text())
    document["model"].update(changes)
    path.write_text(json.dumps(document))
    return path


BAD_CONFIGS = [
    ({"depth": 1_000_000}, "says model.depth=1000000 but model.safetensors holds 2 (blocks 0..1)"),
    ({"vocab_size": 10**7}, "says model.vocab_size=10000000, which implies embeddings.token_embeddings.weight"),
    ({"vocab_size": "lots"}, "says model.vocab_size must be a positive integer, got 'lots'"),
    ({"vocab_size": -5}, "says model.vocab_size must be a positive integer, got -5"),
    (
        {"dim": 4096},
        "says model.dim=4096, which implies norm.weight of shape (4096,), but model.safetensors holds (8,)",
    ),
    ({"mlp_ratio": 10**6}, "says model.mlp_ratio=1000000, which implies blocks.0.mlp.0.weight"),
    ({"num_heads": 3}, "says model.dim=8, not divisible by model.num_heads=3"),
    ({"num_heads": True}, "says model.num_heads must be a positive integer, got True"),
    ({"max_len": 0}, "says model.max_len must be a positive integer or null, got 0"),
    ({"dropout": "high"}, "says model.dropout must be a number in [0, 1], got 'high'"),
    ({"architecture": "gpt"}, "says model.architecture must be 'decoder' or 'encoder', got 'gpt'"),
    (
        {"scheme": {"name": "learned", "max_len": 4096, "dim": 8}},
        "embeddings.position.embedding.weight is (16, 8) in the file, (4096, 8) by the config",
    ),
    (
        {"scheme": {"name": "learned", "max_len": 10**12, "dim": 8}},
        "holds a model config that does not build: the position table",
    ),
    ({"scheme": "learned"}, "says model.scheme must be null or an object with a 'name', got 'learned'"),
    ({"scheme": {"name": "nope_such"}}, "holds a model config that does not build"),
    ({"combine": "concat"}, "holds a model config that does not build: combine='concat'"),
    ({"untied": True}, "model.safetensors' does not match posembed_model.json"),
]


@pytest.mark.parametrize(("change", "message"), BAD_CONFIGS)
def test_lab_config_refused_before_building(tmp_path, change, message):
    folder = _decoder_checkpoint(tmp_path / "ckpt")
    _edit(folder, **change)
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_checkpoint(folder)
    assert time.perf_counter() - start < REFUSAL_SECONDS


def test_encoder_head_is_checked_against_num_classes(tmp_path):
    model = Encoder(11, dim=8, depth=1, num_heads=2, scheme=RotaryEmbedding(4), num_classes=3)
    folder = save_checkpoint(model, tmp_path, {"task": "sort"})
    _edit(folder, num_classes=10**8)
    with pytest.raises(CheckpointError, match=re.escape("says model.num_classes=100000000, which implies head.weight")):
        load_checkpoint(folder)


def test_derived_rotary_tables_must_fit_in_memory(tmp_path):
    folder = _decoder_checkpoint(tmp_path, scheme=RotaryEmbedding(4))
    _edit(folder, scheme={"name": "rope", "head_dim": 4, "max_len": 10**13})
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match="implies .* of derived tables .*cos_cached.*more than the .* of memory"):
        load_checkpoint(folder)
    assert time.perf_counter() - start < REFUSAL_SECONDS


def test_valid_checkpoints_still_load_exactly(tmp_path):
    for index, scheme in enumerate((LearnedAbsolute(16, 8), RotaryEmbedding(4), None)):
        model = Decoder(11, dim=8, depth=2, num_heads=2, scheme=scheme, untied=index == 0)
        folder = save_checkpoint(model, tmp_path / str(index), {"task": "copy"})
        loaded, _ = load_checkpoint(folder)
        for name, tensor in model.state_dict().items():
            assert torch.equal(loaded.state_dict()[name], tensor), name


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("json_list", "holds a JSON list, not an object"),
        ("json_broken", "is not valid JSON"),
        ("json_not_utf8", "is not UTF-8 text (byte 0xff"),
        ("weights_empty", "model.safetensors' is empty (0 bytes)"),
        ("weights_truncated", "model.safetensors' is not a readable safetensors file: "),
        ("weights_garbage", "model.safetensors' is not a readable safetensors file: "),
    ],
)
def test_broken_lab_files(tmp_path, capsys, damage, message):
    folder = _decoder_checkpoint(tmp_path / "ckpt")
    config, weights = folder / "posembed_model.json", folder / "model.safetensors"
    data = weights.read_bytes()
    {
        "json_list": lambda: config.write_text("[]"),
        "json_broken": lambda: config.write_text('{"model": '),
        "json_not_utf8": lambda: config.write_bytes(b'{"model": "\xff"}'),
        "weights_empty": lambda: weights.write_bytes(b""),
        "weights_truncated": lambda: weights.write_bytes(data[: len(data) - 100]),
        "weights_garbage": lambda: weights.write_bytes(b"garbage" * 50),
    }[damage]()
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_source(folder)
    code = main(["inspect", str(folder), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and message in err, err


@pytest.mark.parametrize("change", [{"depth": 1_000_000}, {"vocab_size": 10**7}])
def test_inspect_cli_refuses_in_one_line_quickly(tmp_path, capsys, change):
    folder = _decoder_checkpoint(tmp_path / "ckpt")
    _edit(folder, **change)
    start = time.perf_counter()
    code = main(["inspect", str(folder), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert time.perf_counter() - start < REFUSAL_SECONDS
    key = next(iter(change))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and f"model.{key}=" in err, err


@pytest.mark.slow
def test_no_memory_is_allocated_for_the_issue_examples(tmp_path):
    """The issue's depth 1000000 (11.4 GB) and vocab_size 10**7 (2.8 GB): in a fresh process, < 500 MB growth."""
    folders = []
    for index, change in enumerate(({"depth": 1_000_000}, {"vocab_size": 10**7})):
        folders.append(str(_decoder_checkpoint(tmp_path / str(index))))
        _edit(tmp_path / str(index), **change)
    script = (
        "import resource, sys\n"
        "from posembed.analysis.sources import load_source\n"
        "from posembed.errors import CheckpointError\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "for folder in sys.argv[1:]:\n"
        "    try:\n        load_source(folder)\n    except CheckpointError:\n        pass\n"
        "    else:\n        raise SystemExit('not refused: ' + folder)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, *folders], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 500_000  # KiB
