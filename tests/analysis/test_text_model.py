"""The probe text (shipped and user-given), windows of token ids, and the models' hidden states."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from posembed.analysis.sources import load_hf
from posembed.analysis.text_model import DEFAULT_TEXT, load_probe_text, make_windows
from tests.helpers import assert_close


def test_shipped_text_is_packaged_english_prose():
    text = load_probe_text(None)
    assert DEFAULT_TEXT.parent.name == "data" and DEFAULT_TEXT.parent.parent.name == "posembed"
    assert len(text.split()) > 3000
    assert "positional encoding" in text


def test_bad_text_files(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="missing.txt' does not exist"):
        load_probe_text(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="is a directory"):
        load_probe_text(tmp_path)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\u00e9 ".encode("latin-1") * 100)
    with pytest.raises(ValueError, match=r"latin1.txt' is not UTF-8 text \(byte 0xe9 at offset 3\)"):
        load_probe_text(latin1)
    short = tmp_path / "short.txt"
    short.write_text("too short")
    with pytest.raises(ValueError, match="has 9 characters; the probe needs at least 200"):
        load_probe_text(short)
    locked = tmp_path / "locked.txt"
    locked.write_text("x" * 500)

    def refuse(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(ValueError, match="locked.txt' cannot be read: Permission denied"):
        load_probe_text(locked)


def test_make_windows():
    windows = make_windows(list(range(20)), length=6, prefix=[101], suffix=[102], limit=3)
    assert windows.tolist() == [[101, 0, 1, 2, 3, 102], [101, 4, 5, 6, 7, 102], [101, 8, 9, 10, 11, 102]]
    with pytest.raises(ValueError, match="fewer than 2 windows of 4"):
        make_windows(list(range(5)), length=6, prefix=[1], suffix=[2])
    with pytest.raises(ValueError, match="leaves 1 text tokens"):
        make_windows(list(range(50)), length=3, prefix=[1], suffix=[2])


def test_minilm_hidden_states_match_transformers(minilm_path):
    from transformers import AutoTokenizer, BertModel

    model = load_hf(minilm_path).text_model
    text = "Position is a small part of a transformer, yet it decides whether the model reads a sentence."
    reference = AutoTokenizer.from_pretrained(str(minilm_path))(text)["input_ids"]
    ids = model.prefix + model.encode(text) + model.suffix
    assert ids == reference
    states = model.hidden_states(torch.tensor([ids]))
    with torch.no_grad():
        expected = BertModel.from_pretrained(str(minilm_path)).eval()(torch.tensor([ids]), output_hidden_states=True)
    assert len(states) == 7
    for found, wanted in zip(states, expected.hidden_states):
        assert_close(found, wanted)
