"""``posembed lab context`` and ``posembed lab extend``: end to end in a reduced form, and bad input."""

from __future__ import annotations

import json
import math

import pytest
import torch

from posembed.cli import main

REDUCED = [
    "--set",
    "steps=12",
    "--set",
    "passkey_only_steps=4",
    "--set",
    "passkey_adjacent_steps=2",
    "--set",
    "finetune_steps=2",
    "--set",
    "scales=1,2",
]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("context") / "study"
    assert main(["lab", "context", "--preset", "context-smoke", "--out", str(out), "--device", "cpu", *REDUCED]) == 0
    return out


@pytest.mark.slow
def test_context_study_writes_store_models_and_report(study):
    assert (study / "context.sqlite").is_file()
    assert (study / "report" / "context.md").is_file() and (study / "report" / "context.html").is_file()
    assert "Which context extension works?" in (study / "report" / "context.md").read_text()
    models = {p.name for p in study.glob("models/*/*")}
    assert {"rope", "alibi", "nope", "fire"} <= models
    assert "| fire |" in (study / "report" / "context.md").read_text()


def test_context_study_resumes_without_retraining(study, capsys):
    before = {p: p.stat().st_mtime_ns for p in study.glob("models/*/rope/*")}
    assert main(["lab", "context", "--preset", "context-smoke", "--out", str(study), *REDUCED]) == 0
    assert {p: p.stat().st_mtime_ns for p in study.glob("models/*/rope/*")} == before


def _perplexity(model, val: torch.Tensor, length: int, windows: int) -> float:
    """exp(mean next-char cross-entropy) over the first ``windows`` held-out windows, one window at a time."""
    total, count = 0.0, 0
    with torch.no_grad():
        for r in range(min((len(val) - 1) // length, windows)):
            window = val[r * length : r * length + length + 1]
            logits = model(window[None, :-1])[0]  # (T, V)
            total += float(torch.nn.functional.cross_entropy(logits.double(), window[1:], reduction="sum"))
            count += length
    return math.exp(total / count)


def test_lab_extend_reevaluates_a_stored_rope_model(study, capsys):
    from posembed.lab.context import method_scheme, rope_base, rotary_head_dim, swap_scheme
    from posembed.lab.context.evaluate import ContextData
    from posembed.lab.tasks.passkey import depth_grid, min_length
    from posembed.lab.training.checkpoint import load_checkpoint

    checkpoint = next(study.glob("models/*/rope"))
    assert (
        main(["lab", "extend", str(checkpoint), "--method", "yarn", "--factor", "2", "--device", "cpu", "--json"]) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert {(row["method"], row["factor"], row["finetune_steps"]) for row in rows} == {("yarn", 2.0, 0)}
    depths = list(depth_grid(5))  # lab extend's default grid: 5 depths, 8 documents each
    for length in (96, 192):  # the trained context L = 96 and 2 L
        found = {(row["metric"], row["depth"]): row["value"] for row in rows if row["length"] == length}
        expected = {("perplexity", None)} | (
            {("passkey", d) for d in depths} | {("passkey_mean", None)} if length >= min_length(5) else set()
        )
        assert set(found) == expected and len(found) == len([r for r in rows if r["length"] == length])
        passkey = [found[("passkey", d)] for d in depths]
        assert all(value * 8 == round(value * 8) and 0 <= value <= 1 for value in passkey)  # k of 8 documents
        assert found[("passkey_mean", None)] == pytest.approx(sum(passkey) / len(passkey), abs=1e-12)
        # the perplexity is the swapped model's: YaRN at factor 2 over L = 96, recomputed here window by window
        model, meta = load_checkpoint(checkpoint, device="cpu")
        data = ContextData.load("tinyshakespeare")
        plain = _perplexity(model.eval(), data.val, length, windows=16)
        scheme = method_scheme(
            "yarn", head_dim=rotary_head_dim(model), factor=2.0, original_len=96, base=rope_base(model)
        )
        swapped = _perplexity(swap_scheme(model, scheme).eval(), data.val, length, windows=16)
        assert found[("perplexity", None)] == pytest.approx(swapped, rel=1e-6)  # fp32 sums against float64: ~5e-8
        # the method was applied: YaRN's frequencies differ from the model's (~6e-5 apart on this 12-step model,
        # 10x the tolerance)
        assert abs(swapped - plain) > 2e-5 * plain


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lab", "extend", "no-such-folder", "--method", "yarn", "--factor", "2"], "not a posembed lab checkpoint"),
        (
            ["lab", "extend", ".", "--method", "yarn", "--factor", "0.5"],
            "factor must be a finite number >= 1.0, got 0.5",
        ),
        (["lab", "context", "--preset", "contxt"], "unknown context preset 'contxt'"),
        (["lab", "context", "--preset", "context-smoke", "--set", "step=3"], "unknown context key 'step'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
@pytest.mark.parametrize(
    "action", [["context", "--preset", "context-smoke"], ["extend", ".", "--method", "yarn", "--factor", "2"]]
)
def test_device_cuda_without_cuda_is_one_line_and_exit_2(action, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["lab", *action, "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device: device 'cuda' asked for CUDA" in err[0] and "use --device cpu" in err[0], err
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_unknown_device_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["lab", "context", "--preset", "context-smoke", "--device", "tpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown device 'tpu'" in err[0], err


def test_context_study_reports_one_line_per_step_off_a_terminal(study, capsys):
    """A resumed run still counts every step (stored ones finish at once); --quiet says nothing."""
    from posembed.lab.context.presets import get_context_preset, with_overrides
    from posembed.lab.context.run import study_steps

    capsys.readouterr()
    assert main(["lab", "context", "--preset", "context-smoke", "--out", str(study), *REDUCED]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("context study: ")]
    cfg = with_overrides(get_context_preset("context-smoke"), REDUCED[1::2])
    total = study_steps(cfg) * len(cfg.per_seed())
    assert [line.split(" done")[0] for line in lines] == [f"context study: {i}/{total}" for i in range(1, total + 1)]
    assert "\r" not in err and "(seed 0: trained rope" in lines[0] and lines[-1].split(", ")[-1].startswith("ETA")
    assert main(["lab", "context", "--preset", "context-smoke", "--out", str(study), "--quiet", *REDUCED]) == 0
    assert "context study:" not in capsys.readouterr().err


def test_lab_extend_reports_its_steps_off_a_terminal_and_quiet_says_nothing(study, capsys):
    checkpoint = next(study.glob("models/*/rope"))
    capsys.readouterr()
    assert (
        main(
            [
                "lab",
                "extend",
                str(checkpoint),
                "--method",
                "yarn",
                "--factor",
                "2",
                "--finetune",
                "1",
                "--device",
                "cpu",
                "--json",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    lines = [line.split(";")[0] for line in err.splitlines() if line.startswith("lab extend: ")]
    assert lines == [
        "lab extend: 1/3 done (fine-tuned 1 steps at 192)",
        "lab extend: 2/3 done (evaluated yarn at 96)",
        "lab extend: 3/3 done (evaluated yarn at 192)",
    ], err
    assert "\r" not in err
    assert (
        main(
            [
                "lab",
                "extend",
                str(checkpoint),
                "--method",
                "yarn",
                "--factor",
                "2",
                "--device",
                "cpu",
                "--json",
                "--quiet",
            ]
        )
        == 0
    )
    assert "lab extend:" not in capsys.readouterr().err
