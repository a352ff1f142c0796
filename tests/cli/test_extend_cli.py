"""``posembed extend`` and ``posembed extend-eval``: thin over the library, exit 2 on bad input."""

import json
import shutil

import pytest
import torch

from posembed.cli import main

transformers = pytest.importorskip("transformers")


def _run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def roberta(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.RobertaConfig(
        num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32, vocab_size=60,
        max_position_embeddings=34,
    )
    folder = tmp_path_factory.mktemp("cli") / "roberta"
    transformers.RobertaModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def small_bert(minilm_path, tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=512,
    )
    folder = tmp_path_factory.mktemp("cli") / "bert"
    transformers.BertModel(config).save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(minilm_path / name, folder / name)
    return folder


def test_extend_json(capsys, roberta, tmp_path):
    code, out, err = _run(capsys, "extend", str(roberta), "--to", "100", "--method", "hierarchical", "--out", str(tmp_path / "o"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["positions"] == 100 and result["table_rows"] == 102 and result["original_positions"] == 32
    assert result["method"] == "hierarchical" and "model.safetensors" in result["rewritten"]
    assert json.loads((tmp_path / "o" / "config.json").read_text())["max_position_embeddings"] == 102


def test_extend_text_then_refusals_exit_2_with_one_line(capsys, roberta, tmp_path):
    code, out, err = _run(capsys, "extend", str(roberta), "--to", "64", "--out", str(tmp_path / "a"))
    assert code == 0 and "roberta with 64 positions (was 32, copy)" in out
    cases = {
        "already extended": (str(tmp_path / "a"), "--to", "128", "--out", str(tmp_path / "b")),
        "must be larger": (str(roberta), "--to", "32", "--out", str(tmp_path / "c")),
        "does not exist": (str(tmp_path / "none"), "--to", "64", "--out", str(tmp_path / "d")),
        "not an empty folder": (str(roberta), "--to", "64", "--out", str(tmp_path / "a")),
    }
    for expected, argv in cases.items():
        code, out, err = _run(capsys, "extend", *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith("posembed extend: error:") and expected in err
    code, out, err = _run(capsys, "extend", str(tmp_path / "a"), "--to", "128", "--out", str(tmp_path / "b"), "--force")
    assert code == 0, err


def test_help_has_examples(capsys):
    for command in ("extend", "extend-eval"):
        with pytest.raises(SystemExit) as stop:
            main([command, "--help"])
        assert stop.value.code == 0
        assert f"posembed {command} " in capsys.readouterr().out.split("example:")[1]


def test_extend_eval_tiny_json_and_report(capsys, small_bert, tinyshakespeare, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text(tinyshakespeare.read_text(encoding="utf-8")[:100_000], encoding="utf-8")
    argv = ["extend-eval", str(small_bert), "--lengths", "128", "600", "--depths", "0", "1", "--queries-per-depth", "2",
            "--targets", "640", "--text", str(text), "--no-progress"]
    code, out, err = _run(capsys, *argv, "--json", "--out", str(tmp_path / "r"))
    assert code == 0, err
    result = json.loads(out)
    assert {r["system"] for r in result["rows"]} == {"truncate-256", "truncate-512", "chunk-512", "copy", "interpolate", "hierarchical"}
    assert all(0 <= r["accuracy"] <= 1 for r in result["rows"])
    assert (tmp_path / "r" / "extend_eval.html").is_file() and (tmp_path / "r" / "extend_eval.json").is_file()
    code, out, err = _run(capsys, *argv[:-1], "--targets", "256")
    assert code == 2 and "extension targets [256] must be larger" in err
