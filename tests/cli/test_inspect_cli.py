"""``posembed inspect`` from the command line: outputs, --json, and one clear line for bad input."""

from __future__ import annotations

import json

import pytest

from posembed.cli import main
from tests.analysis.tiny_checkpoints import save_tiny_llama, train_lab_charlm


def _error_line(capsys, argv) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("posembed inspect: error: ")
    return lines[0]


def test_scheme_json(tmp_path, capsys):
    argv = [
        "inspect",
        "--scheme",
        "sinusoidal",
        "--dim",
        "128",
        "--max-len",
        "512",
        "--out",
        str(tmp_path),
        "--json",
        "--quick",
    ]
    assert main(argv) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["properties"]["dot"]["phi_0"] == pytest.approx(64.0, abs=1e-5)
    assert metrics["properties"]["dot"]["first_nonmonotone_offset"] == 11
    assert metrics["probes"]["absolute"]["score"] == 0.0
    assert {"report.html", "metrics.json", "similarity.png"} <= {p.name for p in tmp_path.iterdir()}


def test_default_out_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "--scheme", "sinusoidal", "--dim", "16", "--max-len", "32", "--quick"]) == 0
    assert "wrote posembed-inspect/sinusoidal-d16-T32/report.html" in capsys.readouterr().out
    assert (tmp_path / "posembed-inspect" / "sinusoidal-d16-T32" / "metrics.json").exists()


def test_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / "readme.txt").write_text("hi")
    assert "is not a checkpoint folder" in _error_line(capsys, ["inspect", str(tmp_path)])
    assert "does not exist" in _error_line(capsys, ["inspect", str(tmp_path / "nope")])


def test_rotary_checkpoint_says_what_it_has(tmp_path, capsys, minilm_path):
    folder = save_tiny_llama(tmp_path / "llama", tokenizer_from=minilm_path)
    assert main(["inspect", str(folder), "--out", str(tmp_path / "out"), "--quick"]) == 0
    out = capsys.readouterr().out
    assert "rotary positions (RoPE" in out
    assert "skipped sections: similarity, probes, spectrum, decomposition, segments" in out


def test_bad_text(tmp_path, capsys, minilm_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe" + b"x" * 300)
    line = _error_line(capsys, ["inspect", str(minilm_path), "--text", str(bad), "--out", str(tmp_path / "o")])
    assert "is not UTF-8 text (byte 0xff at offset 0)" in line
    assert "does not exist" in _error_line(
        capsys, ["inspect", "--scheme", "sinusoidal", "--text", str(tmp_path / "no.txt")]
    )
    assert not (tmp_path / "o").exists()


def test_bad_arguments(capsys):
    assert "not both" in _error_line(capsys, ["inspect", "somewhere", "--scheme", "sinusoidal"])
    assert "use them with --scheme" in _error_line(capsys, ["inspect", "--dim", "64"])
    assert "unknown scheme 'sinus'" in _error_line(capsys, ["inspect", "--scheme", "sinus"])


def test_lab_checkpoint_end_to_end(tmp_path, capsys):
    from posembed.lab import checkpoint as lab
    from posembed import RotaryEmbedding
    from posembed.model import Encoder

    model = Encoder(300, dim=16, depth=2, num_heads=2, scheme=RotaryEmbedding(8), max_len=48)
    folder = lab.save_checkpoint(model, tmp_path / "ckpt", {"task": "order", "trial": "abc", "step": 9})
    assert main(["inspect", str(folder), "--quick", "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["family"] == "lab" and "trial abc" in metrics["model"]
    assert "skipped" not in metrics["properties"] and "skipped" in metrics["similarity"]
    assert len(metrics["layers"]["per_layer"]) == 3 and metrics["layers"]["window_length"] == 32


def test_lab_checkpoint_with_a_short_learned_table(tmp_path, capsys):
    """A small lab model's table (37 positions) holds fewer basis frequencies than the default 32."""
    from posembed import LearnedAbsolute
    from posembed.lab import checkpoint as lab
    from posembed.model import Decoder

    model = Decoder(40, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(37, 16), max_len=37)
    folder = lab.save_checkpoint(model, tmp_path / "ckpt", {"task": "copy", "trial": "short", "step": 3})
    assert main(["inspect", str(folder), "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["spectrum"]["num_basis_frequencies"] == 18


def test_lab_learned_table_without_max_len(tmp_path, capsys):
    """Lab models have max_len=None: the per-layer probe stays within the 24-row table."""
    from posembed import LearnedAbsolute
    from posembed.lab import checkpoint as lab
    from posembed.model import Decoder

    model = Decoder(40, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(24, 16))
    folder = lab.save_checkpoint(model, tmp_path / "ckpt", {"task": "copy", "trial": "t24", "step": 3})
    assert main(["inspect", str(folder), "--quick", "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["layers"]["window_length"] == 24 and metrics["similarity"]["positions"] == 24


def test_lab_untied_checkpoint(tmp_path, capsys):
    from posembed import LearnedAbsolute
    from posembed.lab import checkpoint as lab
    from posembed.model import Decoder

    model = Decoder(40, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(24, 16), untied=True)
    folder = lab.save_checkpoint(model, tmp_path / "ckpt", {"task": "copy", "trial": "tupe", "step": 3})
    assert main(["inspect", str(folder), "--quick", "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert "untied=True" in metrics["positions"] and metrics["similarity"]["positions"] == 24
    assert "skipped" not in metrics["probes"] and "skipped" not in metrics["layers"]


def test_lab_charlm_report_says_which_rows(tmp_path, capsys, tinyshakespeare):
    folder = train_lab_charlm(tmp_path / "lab", tinyshakespeare, variants="base")["base"]
    assert main(["inspect", str(folder), "--quick", "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["similarity"]["positions"] == 16 and metrics["layers"]["window_length"] == 16
    page = (tmp_path / "out" / "report.html").read_text()
    assert "positions 0..15 of the 128 the model holds are analysed" in page
    assert "rows 16..127 were never trained" in page


def test_corrupt_safetensors(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 64)
    line = _error_line(capsys, ["inspect", str(tmp_path), "--out", str(tmp_path / "out")])
    assert f"{str(tmp_path / 'model.safetensors')!r} is not a readable safetensors file: " in line


def test_huge_max_len(capsys):
    line = _error_line(capsys, ["inspect", "--scheme", "learned", "--max-len", "100000"])
    assert "--max-len 100000 is too many positions: the inspector handles at most 8192" in line
