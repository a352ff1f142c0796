"""Lab checkpoint checks on models with one scheme per layer: the messages name ``model.layer_schemes``."""

from __future__ import annotations

import json
import re

import pytest
import torch

from posembed.errors import CheckpointError
from posembed.lab.training.checkpoint import load_checkpoint, save_checkpoint
from posembed.nn.model.transformer import Decoder
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.rotary.rope import RotaryEmbedding


def _per_layer_checkpoint(folder, scheme=None):
    rope = RotaryEmbedding(4)
    model = Decoder(
        11, dim=8, depth=4, num_heads=2, scheme=scheme, schemes=[rope, None, RotaryEmbedding(4, base=1e6), rope]
    )
    save_checkpoint(model, folder, {"task": "copy"})
    return model, folder / "posembed_model.json"


def _edit(path, edit):
    document = json.loads(path.read_text())
    edit(document["model"])
    path.write_text(json.dumps(document))


def test_a_valid_per_layer_checkpoint_loads_exactly(tmp_path):
    model, _ = _per_layer_checkpoint(tmp_path, scheme=LearnedAbsolute(16, 8))
    loaded, _ = load_checkpoint(tmp_path)
    assert loaded.config_dict() == model.config_dict()
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())


def test_a_layer_table_too_large_names_its_layer_not_model_scheme(tmp_path):
    _, path = _per_layer_checkpoint(tmp_path)
    _edit(path, lambda m: m["layer_schemes"][2].update(max_len=10**13))
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(tmp_path)
    message = str(error.value)
    assert "says model.layer_schemes[2]={" in message and "'max_len': 10000000000000" in message
    assert "of derived tables (the largest blocks.2.attn.scheme.cos_cached" in message
    assert "model.scheme=None" not in message


def test_a_shared_layer_table_is_counted_once_and_the_sum_of_distinct_ones_is_checked(tmp_path, monkeypatch):
    import posembed.lab.training.checkpoint_checks as checks

    table = 2 * 10**6 * 2 * 4  # cos and sin, (10**6, 2) float32 each: 16 MB
    monkeypatch.setattr(checks, "device_memory_bytes", lambda device: table * 3 // 2)
    _, path = _per_layer_checkpoint(tmp_path)
    assert json.loads(path.read_text())["model"]["layer_schemes"][3] == {"same_as": 0}  # layers 0 and 3 share one
    _edit(path, lambda m: m["layer_schemes"][0].update(max_len=10**6))
    load_checkpoint(tmp_path)  # one table, held by two layers: 16 MB, within the 24 MB
    _edit(path, lambda m: m["layer_schemes"][2].update(max_len=10**6))
    with pytest.raises(CheckpointError, match=re.escape("implies 32.0 MB of derived tables")):
        load_checkpoint(tmp_path)  # two distinct tables: 32 MB together


def test_a_single_scheme_table_still_names_model_scheme(tmp_path):
    model = Decoder(11, dim=8, depth=2, num_heads=2, scheme=RotaryEmbedding(4))
    save_checkpoint(model, tmp_path, {"task": "copy"})
    _edit(tmp_path / "posembed_model.json", lambda m: m["scheme"].update(max_len=10**13))
    with pytest.raises(CheckpointError, match=re.escape("says model.scheme={") + ".*'max_len': 10000000000000"):
        load_checkpoint(tmp_path)


def test_a_shape_mismatch_names_the_layer_schemes(tmp_path):
    _, path = _per_layer_checkpoint(tmp_path)
    _edit(
        path,
        lambda m: m.update(
            layer_schemes=[
                {"name": "alibi", "num_heads": 2, "symmetric": False},
                None,
                {"name": "t5_bias", "num_heads": 2},
                None,
            ]
        ),
    )
    with pytest.raises(
        CheckpointError,
        match=re.escape(
            "(model.scheme=null, model.layer_schemes=[alibi, null, t5_bias, "
            "null]): missing blocks.2.attn.scheme.relative_attention_bias"
        ),
    ):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        (
            "rope",
            "model.layer_schemes must be a list of model.depth=4 entries (one scheme or null per layer), got 'rope'",
        ),
        (
            [None, None],
            "model.layer_schemes must be a list of model.depth=4 entries (one scheme or null per layer), got 2 entries",
        ),
        ([None, 3, None, None], "model.layer_schemes[1] must be null, an object with a 'name' or"),
        (
            [{"same_as": 2}, None, None, None],
            "model.layer_schemes[0] must be null, an object with a 'name' or "
            "{\"same_as\": j} with j an earlier layer, got {'same_as': 2}",
        ),
    ],
)
def test_malformed_layer_schemes_are_named(tmp_path, layers, message):
    _, path = _per_layer_checkpoint(tmp_path)
    _edit(path, lambda m: m.update(layer_schemes=layers))
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_checkpoint(tmp_path)


def test_alibi_layers_round_trip(tmp_path):
    model = Decoder(11, dim=8, depth=2, num_heads=2, schemes=[ALiBi(2), None])
    save_checkpoint(model, tmp_path, {"task": "copy"})
    assert load_checkpoint(tmp_path)[0].config_dict() == model.config_dict()


def test_a_shared_table_is_read_under_any_one_of_its_names_and_missing_names_it(tmp_path):
    """safetensors writes a shared tensor once (first name in sorted order); files from before hold it
    under ``scheme.``: both load strictly; a file without it names the table."""
    from safetensors.torch import save_file

    from posembed.schemes.bias.t5 import T5RelativeBias

    torch.manual_seed(0)
    model = Decoder(11, dim=8, depth=2, num_heads=2, scheme=T5RelativeBias(2, bidirectional=False))
    save_checkpoint(model, tmp_path, {"task": "copy"})
    ids = torch.randint(0, 11, (2, 5))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    for keep in ("scheme.", "blocks.1.attn.scheme."):
        table = f"{keep}relative_attention_bias.weight"
        save_file(
            {k: v for k, v in state.items() if ".scheme." not in f".{k}" or k == table},
            str(tmp_path / "model.safetensors"),
        )
        loaded, _ = load_checkpoint(tmp_path)
        assert torch.equal(loaded(ids), model.eval()(ids)), keep
    save_file(
        {k: v for k, v in state.items() if "relative_attention_bias" not in k}, str(tmp_path / "model.safetensors")
    )
    with pytest.raises(CheckpointError, match=r"missing scheme\.relative_attention_bias\.weight$"):
        load_checkpoint(tmp_path)
