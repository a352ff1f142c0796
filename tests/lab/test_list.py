"""``posembed lab list``: the trials of an out folder, filtered, as a table or JSON; findable checkpoints."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from posembed.cli import main
from posembed.lab.sweep.listing import list_trials
from posembed.lab.sweep.store import load_results
from posembed.lab.training.checkpoint import load_checkpoint, trial_folder_name

TINY = [
    "--threads",
    "1",
    "--workers",
    "1",
    "--quiet",
    "--set",
    "tasks=copy,order",
    "--set",
    "schemes=learned,nope",
    "--set",
    "steps=2",
    "--set",
    "dim=16",
    "--set",
    "depth=1",
    "--set",
    "batch=4",
    "--set",
    "eval_batches=1",
    "--set",
    "copy.context=3",
    "--set",
    "order.context=4",
]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished tiny sweep: copy and order x learned and nope, seed 0."""
    out = tmp_path_factory.mktemp("lab")
    assert main(["lab", "run", "--preset", "smoke", "--out", str(out), *TINY]) == 0
    return out


def test_table_lists_every_trial_with_its_checkpoint(finished, capsys):
    capsys.readouterr()
    assert main(["lab", "list", str(finished)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["task", "scheme", "variant", "seed", "metric"]
    assert len(lines) == 5
    rows = {(line.split()[0], line.split()[1]): line for line in lines[1:]}
    assert set(rows) == {("copy", "learned"), ("copy", "nope"), ("order", "learned"), ("order", "nope")}
    assert " exact_match " in rows["copy", "learned"] and " accuracy " in rows["order", "nope"]
    for record in load_results(finished).trials:
        folder = finished / record.checkpoint
        assert folder.name == trial_folder_name(record.config)
        assert folder.name.startswith(f"{record.config.task}-{record.config.scheme}-s0-")
        assert str(folder) in rows[record.config.task, record.config.scheme]


def test_filters_and_json(finished, capsys):
    capsys.readouterr()
    assert main(["lab", "list", str(finished), "--task", "copy", "--scheme", "nope", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["task"], row["scheme"], row["variant"], row["seed"], row["metric"]) == (
        "copy",
        "nope",
        "base",
        0,
        "exact_match",
    )
    assert row["train_length"] == 3 and set(row["evals"]["exact_match"]) == {"2", "3", "4", "6", "9"}  # 0.5 L .. 3 L
    assert row["at_train_length"] == row["evals"]["exact_match"]["3"]
    assert (row["longest_length"], row["at_longest_length"]) == (9, row["evals"]["exact_match"]["9"])
    assert load_checkpoint(row["checkpoint"])[1]["trial"] == row["trial_id"]
    assert [r.task for r in list_trials(finished, tasks=["order"])] == ["order", "order"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--task", "cpy"], "no stored trial has task 'cpy'; stored tasks: copy, order"),
        (["--scheme", "rope"], "no stored trial has scheme 'rope'; stored schemes: learned, nope"),
    ],
)
def test_a_filter_that_matches_nothing_names_what_is_stored(finished, capsys, argv, message):
    capsys.readouterr()
    assert main(["lab", "list", str(finished), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_missing_or_empty_folder_is_one_line_exit_2(tmp_path, capsys):
    assert main(["lab", "list", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a folder" in err
    assert main(["lab", "list", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no results.sqlite; run `posembed lab run" in err


def test_a_store_with_old_hash_named_checkpoints_still_lists_and_loads(finished, tmp_path, capsys):
    """Stores written before the readable names point at ``checkpoints/<trial_id>``: keep reading them."""
    old = tmp_path / "old"
    shutil.copytree(finished, old)
    with sqlite3.connect(old / "results.sqlite") as conn:
        for trial_id, folder in conn.execute("SELECT trial_id, checkpoint FROM trials").fetchall():
            (old / folder).rename(old / "checkpoints" / trial_id)
            conn.execute("UPDATE trials SET checkpoint = ? WHERE trial_id = ?", (f"checkpoints/{trial_id}", trial_id))
    conn.close()
    rows = list_trials(old)
    assert all(row.checkpoint == str(old / "checkpoints" / row.trial_id) for row in rows)
    assert load_checkpoint(rows[0].checkpoint)[1]["trial"] == rows[0].trial_id
    capsys.readouterr()
    assert main(["lab", "run", "--preset", "smoke", "--out", str(old), *TINY]) == 0  # resume reads the old store
    assert "0 trials trained, 4 already stored" in capsys.readouterr().out
