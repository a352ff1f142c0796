"""``posembed inspect`` from the command line: outputs, --json, and one clear line for bad input."""

from __future__ import annotations

import json

import pytest

from posembed.cli import main
from posembed.schemes import SCHEMES
from posembed.schemes.factory import FACTORY
from tests.analysis.tiny_checkpoints import save_tiny_llama, train_lab_charlm


def _error_line(capsys, argv) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("posembed inspect: error: ")
    return lines[0]


@pytest.mark.slow
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


@pytest.mark.slow
def test_default_out_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "--scheme", "sinusoidal", "--dim", "16", "--max-len", "32", "--quick"]) == 0
    assert "wrote posembed-inspect/sinusoidal-d16-T32/report.html" in capsys.readouterr().out
    assert (tmp_path / "posembed-inspect" / "sinusoidal-d16-T32" / "metrics.json").exists()


def test_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / "readme.txt").write_text("hi")
    assert "is not a checkpoint folder" in _error_line(capsys, ["inspect", str(tmp_path)])
    assert "does not exist" in _error_line(capsys, ["inspect", str(tmp_path / "nope")])


@pytest.mark.slow
def test_rotary_checkpoint_says_what_it_has(tmp_path, capsys, minilm_path):
    folder = save_tiny_llama(tmp_path / "llama", tokenizer_from=minilm_path)
    assert main(["inspect", str(folder), "--out", str(tmp_path / "out"), "--quick"]) == 0
    out = capsys.readouterr().out
    assert "rotary positions: rotary positions (RotaryEmbedding: RoPE theta 10000, no scaling" in out
    assert "skipped sections" not in out  # the table sections do not apply: they are not "skipped"


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
    from posembed import RotaryEmbedding
    from posembed.lab.training import checkpoint as lab
    from posembed.nn.model.transformer import Encoder

    model = Encoder(300, dim=16, depth=2, num_heads=2, scheme=RotaryEmbedding(8), max_len=48)
    folder = lab.save_checkpoint(model, tmp_path / "ckpt", {"task": "order", "trial": "abc", "step": 9})
    assert main(["inspect", str(folder), "--quick", "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["family"] == "lab" and "trial abc" in metrics["model"]
    assert "skipped" not in metrics["properties"] and "skipped" in metrics["similarity"]
    assert len(metrics["layers"]["per_layer"]) == 3 and metrics["layers"]["window_length"] == 32


@pytest.mark.slow
def test_lab_checkpoint_with_a_short_learned_table(tmp_path, capsys):
    """A small lab model's table (37 positions) holds fewer basis frequencies than the default 32."""
    from posembed import LearnedAbsolute
    from posembed.lab.training import checkpoint as lab
    from posembed.nn.model.transformer import Decoder

    model = Decoder(40, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(37, 16), max_len=37)
    folder = lab.save_checkpoint(model, tmp_path / "ckpt", {"task": "copy", "trial": "short", "step": 3})
    assert main(["inspect", str(folder), "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["spectrum"]["num_basis_frequencies"] == 18


@pytest.mark.slow
def test_lab_learned_table_without_max_len(tmp_path, capsys):
    """Lab models have max_len=None: the per-layer probe stays within the 24-row table."""
    from posembed import LearnedAbsolute
    from posembed.lab.training import checkpoint as lab
    from posembed.nn.model.transformer import Decoder

    model = Decoder(40, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(24, 16))
    folder = lab.save_checkpoint(model, tmp_path / "ckpt", {"task": "copy", "trial": "t24", "step": 3})
    assert main(["inspect", str(folder), "--quick", "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["layers"]["window_length"] == 24 and metrics["similarity"]["positions"] == 24


@pytest.mark.slow
def test_lab_untied_checkpoint(tmp_path, capsys):
    from posembed import LearnedAbsolute
    from posembed.lab.training import checkpoint as lab
    from posembed.nn.model.transformer import Decoder

    model = Decoder(40, dim=16, depth=1, num_heads=2, scheme=LearnedAbsolute(24, 16), untied=True)
    folder = lab.save_checkpoint(model, tmp_path / "ckpt", {"task": "copy", "trial": "tupe", "step": 3})
    assert main(["inspect", str(folder), "--quick", "--json", "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert "untied=True" in metrics["positions"] and metrics["similarity"]["positions"] == 24
    assert "skipped" not in metrics["probes"] and "skipped" not in metrics["layers"]


@pytest.mark.slow
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


#: --set arguments each scheme needs to be inspected (the rest are filled from --dim / --max-len)
SETS = {
    "rope_linear": ["factor=2"],
    "rope_ntk": ["factor=2"],
    "rope_dynamic_ntk": ["factor=2", "original_max_len=8"],
    "rope_llama3": ["factor=8", "original_max_len=8"],
    "rope_proportional": ["rope_fraction=0.5"],
    "rope_yarn": ["factor=4", "original_max_len=8"],
    "rope_longrope": [
        "short_factor=[1, 1, 1.5, 1.5, 2, 2]",
        "long_factor=[2, 3, 4, 5, 6, 7]",
        "original_max_len=8",
        "factor=2",
    ],
    "cope": ["npos_max=8"],
}


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_every_scheme_loads_from_the_cli(name):
    """Each scheme from the command line, up to the source the report is made of (fast)."""
    from posembed.cli import build_parser
    from posembed.cli.inspect import _source

    argv = ["inspect", "--scheme", name, "--dim", "12", "--max-len", "16"]
    argv += [part for item in SETS.get(name, []) for part in ("--set", item)]
    source = _source(build_parser().parse_args(argv))
    assert source.name == f"{name}-d12-T16"
    measured = source.position_table is not None or source.closeness is not None
    assert measured or any("no closeness between positions" in note for note in source.notes)  # NoPE, Shaw


def test_sets_cover_what_schemes_need():
    assert {name for name, entry in FACTORY.items() if entry.needs} - {"shaw"} == set(SETS)  # shaw: max_distance 128


def test_scheme_with_sets_end_to_end(tmp_path, capsys):
    argv = ["inspect", "--scheme", "rope_yarn", "--dim", "8", "--max-len", "16", "--quick", "--json"]
    assert main([*argv, "--out", str(tmp_path), "--set", "factor=4", "--set", "original_max_len=8"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["model"] == "rope_yarn-d8-T16" and "skipped" not in metrics["properties"]


@pytest.mark.slow
def test_scheme_sets_reach_the_scheme(tmp_path, capsys):
    argv = ["inspect", "--scheme", "rope", "--dim", "8", "--max-len", "16", "--quick", "--json"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--set", "base=100"]) == 0
    low_base = json.loads(capsys.readouterr().out)
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert json.loads(capsys.readouterr().out)["properties"] != low_base["properties"]


def test_bad_sets(capsys):
    scheme = ["inspect", "--scheme", "rope_yarn", "--dim", "8", "--max-len", "16"]
    line = _error_line(capsys, [*scheme, "--set", "factor=4", "--set", "original_max_len=8", "--set", "fator=2"])
    assert "scheme 'rope_yarn' takes no argument 'fator'; it takes: head_dim, factor, original_max_len," in line
    assert "needs 'factor', 'original_max_len'" in _error_line(capsys, scheme)
    assert "'factor' must be a number, got 'four'" in _error_line(capsys, [*scheme, "--set", "factor=four"])
    assert "--set expects KEY=VALUE, got 'factor'" in _error_line(capsys, [*scheme, "--set", "factor"])
    assert "use them with --scheme" in _error_line(capsys, ["inspect", "--set", "factor=4"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_every_scheme_gets_a_report_of_its_kind(name, tmp_path):
    """Each scheme alone through the whole report: its kind's sections run (or say why not), each with a finding."""
    from posembed.analysis.inspect_report import PLANS, InspectOptions, run_inspect
    from posembed.analysis.sources import load_scheme
    from posembed.cli.inspect import parse_sets

    source = load_scheme(name, dim=12, max_len=16, overrides=parse_sets(SETS.get(name, [])))
    metrics = run_inspect(source, tmp_path, options=InspectOptions.small())
    for section in PLANS[metrics["kind"]]:
        assert "finding" in metrics[section] or "skipped" in metrics[section], section
    if metrics["kind"] in ("rotary", "bias"):
        ran = [s for s in PLANS[metrics["kind"]] if "finding" in metrics[s]]
        assert len(ran) >= 2, (name, metrics["kind"], ran)


@pytest.mark.slow
def test_progress_lines_per_section_and_quiet(tmp_path, capsys):
    from posembed.cli import main

    assert main(["inspect", "--scheme", "alibi", "--quick", "--out", str(tmp_path / "a")]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("inspect sections:")]
    assert lines and lines[-1].startswith(f"inspect sections: {len(lines)}/{len(lines)} done")
    assert main(["inspect", "--scheme", "alibi", "--quick", "--quiet", "--out", str(tmp_path / "b")]) == 0
    assert "inspect sections:" not in capsys.readouterr().err


@pytest.mark.slow
def test_one_progress_style_without_a_terminal(tmp_path, capsys, minilm_path):
    """A model loaded through transformers: its "Loading weights" bar stays out, no carriage return
    reaches a file, every stderr line is a section line (ETA held back until 3 sections)."""
    from transformers.utils import logging as hf_logging

    folder = save_tiny_llama(tmp_path / "llama", tokenizer_from=minilm_path)
    capsys.readouterr()
    hf_logging.enable_progress_bar()  # as transformers starts; the run must hide it and restore it
    assert main(["inspect", str(folder), "--out", str(tmp_path / "out"), "--quick"]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "Loading weights" not in err and "it/s" not in err, err
    lines = err.splitlines()
    assert lines and all(line.startswith("inspect sections: ") for line in lines), lines
    assert lines[0].endswith("ETA after 3 sections") and lines[-1].endswith("ETA 00:00")
    assert hf_logging.is_progress_bar_enabled()  # restored after the load
