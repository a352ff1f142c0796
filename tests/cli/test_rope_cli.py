"""``posembed rope check``: text, JSON, plot, exit codes."""

from __future__ import annotations

import json

import pytest

from posembed.cli import main

transformers = pytest.importorskip("transformers")


def _folder(tmp_path, **rope):
    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, intermediate_size=64,
                                      vocab_size=100, **rope)  # fmt: skip
    config.save_pretrained(tmp_path)
    return tmp_path


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["rope", "check", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out and "posembed rope check" in out and "--length" in out


def test_text_report_of_a_clean_folder(tmp_path, capsys):
    folder = _folder(
        tmp_path,
        max_position_embeddings=1024,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256},
    )
    assert main(["rope", "check", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "YaRNRotary" in out and "vs transformers" in out and "result: OK" in out


def test_json_plot_and_exit_1_on_a_warning(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    raw = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 32768,
           "rope_theta": 10000.0, "rope_scaling": {"type": "yarn", "factor": 4.0}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(raw))
    png = tmp_path / "rope.png"
    assert (
        main(["rope", "check", str(tmp_path / "config.json"), "--json", "--plot", str(png), "--length", "65536"]) == 1
    )
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["target_length"] == 65536
    assert "original_missing" in {t["code"] for t in data["traps"]}
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rope", "check", "{tmp}"], "not a checkpoint"),
        (["rope", "check", "{tmp}/missing"], "does not exist"),
        (["rope", "check", "{bert}"], "has no RoPE"),
        (["rope", "check", "{bert}", "--length", "1"], "--length"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, message):
    bert = tmp_path / "bert"
    transformers.BertConfig(hidden_size=32, num_attention_heads=4).save_pretrained(bert)
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = [a.format(tmp=empty, bert=bert) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("posembed rope: error:") and message in err and "\n" not in err


LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 1024}


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"rope_theta": 10000.0, "rope_scaling": {"factor": 4.0}}, "WARNING factor_unread [all]: factor=4 is set"),
        ({"rope_theta": "1e4"}, "ERROR   not_a_number [*]: rope_theta is '1e4'"),
        (
            {
                "rope_theta": 10000.0,
                "rope_scaling": {"rope_type": "linear", "factor": 4.0, "original_max_position_embeddings": 1024},
            },
            "WARNING factor_compounds [all]: original_max_position_embeddings equals max_position_embeddings (1024)",
        ),
        (
            {
                "max_position_embeddings": 4096,
                "rope_theta": 10000.0,
                "rope_scaling": {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 1024},
            },
            "WARNING factor_compounds [all]: max_position_embeddings=4096 is already factor x",
        ),
    ],
    ids=["factor_unread", "theta_string", "linear_compounds", "dynamic_compounds"],
)
def test_the_users_mistakes_exit_1_with_their_trap(tmp_path, capsys, fields, line):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, **fields}))
    assert main(["rope", "check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert any(row.strip().startswith(line) for row in out.splitlines()), out
    assert "result: CHECK THE WARNINGS ABOVE" in out and "traps: none" not in out


def test_a_field_no_number_is_read_from_exits_2_naming_it(tmp_path, capsys):
    (tmp_path / "config.json").write_text(
        json.dumps({**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": "four"}})
    )
    assert main(["rope", "check", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "posembed rope: error: rope_scaling.factor must be a number, got 'four'"


def test_part_vision_reads_the_vision_tower(tmp_path, capsys):
    config = transformers.Qwen2VLConfig(
        text_config={"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
                     "intermediate_size": 64, "vocab_size": 100},
        vision_config={"embed_dim": 64, "num_heads": 4, "depth": 1},
    )  # fmt: skip
    config.save_pretrained(tmp_path)
    assert main(["rope", "check", str(tmp_path), "--part", "vision", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    layer = data["layers"][0]
    assert layer["scheme"] == "AxialRotary" and layer["settings"]["rope_type"] == "axial"
    assert layer["settings"]["head_dim"] == 16 and layer["comparisons"][0]["max_inv_freq_rel_diff"] == 0.0
    assert main(["rope", "check", str(tmp_path)]) == 0  # the language model by default
    assert "rope_type=default" in capsys.readouterr().out


def test_part_vision_of_a_text_model_exits_2(tmp_path, capsys):
    folder = _folder(tmp_path)
    assert main(["rope", "check", str(folder), "--part", "vision"]) == 2
    err = capsys.readouterr().err
    assert "has no vision_config" in err
    with pytest.raises(SystemExit):
        main(["rope", "check", str(folder), "--part", "audio"])
