"""Runner and results store: atomic trials, resume after an interruption, foreign and corrupt stores."""

from __future__ import annotations

import dataclasses
import logging
import sqlite3

import pytest
import torch

from posembed.errors import ForeignStoreError
from posembed.lab.config import ExperimentConfig, apply_overrides
from posembed.lab.sweep.runner import expand, run_experiment
from posembed.lab.sweep.store import ResultsStore, load_results
from posembed.lab.tasks import make_task
from posembed.lab.training.checkpoint import load_checkpoint
from tests.helpers import assert_close
from tests.lab.conftest import tiny_trial


class Stop(Exception):
    pass


def test_interrupted_run_resumes_where_it_stopped(tmp_path, tiny_experiment):
    seen = []

    def stop_after_three(result):
        seen.append(result.trial_id)
        if len(seen) == 3:
            raise Stop

    with pytest.raises(Stop):
        run_experiment(tiny_experiment, tmp_path, on_trial=stop_after_three, progress=False)
    assert [r.trial_id for r in load_results(tmp_path).trials] == seen  # nothing lost, nothing extra
    rerun = []
    summary = run_experiment(tiny_experiment, tmp_path, on_trial=lambda r: rerun.append(r.trial_id), progress=False)
    assert (summary.planned, summary.skipped, summary.trained) == (8, 3, 5)
    assert not set(rerun) & set(seen)
    results = load_results(tmp_path)
    assert sorted(r.trial_id for r in results.trials) == sorted(c.trial_id for c in expand(tiny_experiment))
    assert results.experiment["name"] == "tiny" and results.skipped == []
    again = run_experiment(tiny_experiment, tmp_path, progress=False)
    assert (again.skipped, again.trained) == (8, 0)


def test_store_contents_and_checkpoint_round_trip(tmp_path, tiny_experiment):
    """On the CPU (where training again gives the same model bit for bit) the checkpoint reloads to it."""
    exp = dataclasses.replace(tiny_experiment, seeds=(0,), schemes=("learned",))
    run_experiment(exp, tmp_path, progress=False, device="cpu")
    records = {r.config.task: r for r in load_results(tmp_path).trials}
    lm = records["charlm"]
    assert set(lm.metric("val_loss")) == {8, 16} and set(lm.metric("perplexity")) == {8, 16}
    assert lm.curve[-1][0] == lm.config.steps and lm.drift["rel_frobenius"] > 0
    copy = records["copy"]
    assert set(copy.metric("exact_match")) == {4, 8}
    # the checkpoint reloads to the same model: same logits on the same input
    model, meta = load_checkpoint(tmp_path / copy.checkpoint)
    assert meta["trial"] == copy.trial_id and meta["task"] == "copy" and meta["step"] == copy.config.steps
    from posembed.lab.training.train import train_trial

    _, trained = train_trial(copy.config, device="cpu")
    ids = make_task(copy.config).train_batch(torch.Generator().manual_seed(5), 4).input_ids
    with torch.no_grad():
        assert_close(model(ids), trained.eval()(ids))
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables == {"meta", "trials", "evals", "curves", "during"}


def test_out_dir_of_another_experiment_is_refused(tmp_path, tiny_experiment):
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",), seeds=(0,), schemes=("learned",))
    run_experiment(exp, tmp_path, progress=False, checkpoints=False)
    other = apply_overrides(exp, ["steps=3"])
    with pytest.raises(ForeignStoreError, match="holds the results of another experiment \\('tiny'"):
        run_experiment(other, tmp_path, progress=False)


def test_corrupt_row_is_logged_skipped_and_retrained(tmp_path, tiny_experiment, caplog):
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",), seeds=(0, 1), schemes=("learned",))
    run_experiment(exp, tmp_path, progress=False, checkpoints=False)
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        broken = conn.execute("SELECT trial_id FROM trials ORDER BY rowid LIMIT 1").fetchone()[0]
        conn.execute("UPDATE trials SET config_json = '{not json' WHERE trial_id = ?", (broken,))
    with caplog.at_level(logging.WARNING, logger="posembed.lab.sweep.store"):
        results = load_results(tmp_path)
    assert results.skipped == [broken] and len(results.trials) == 1
    assert f"skipping corrupt trial row '{broken}'" in caplog.text
    summary = run_experiment(exp, tmp_path, progress=False, checkpoints=False)
    assert (summary.skipped, summary.trained) == (1, 1)
    assert len(load_results(tmp_path).trials) == 2


def test_expand_skips_variants_that_do_not_apply():
    exp = ExperimentConfig(
        name="v",
        tasks=("copy",),
        schemes=("learned", "alibi", "sinusoidal"),
        variants=("base", "concat", "frozen", "untied"),
        seeds=(0, 1),
        bases=(tiny_trial(),),
    )
    trials = expand(exp)
    assert [c.seed for c in trials] == [0] * 8 + [1] * 8  # seed by seed: an interrupted run leaves whole seeds
    names = [(c.scheme, c.variant) for c in trials][:8]
    assert names == [(c.scheme, c.variant) for c in trials][8:]
    assert names == [
        ("learned", "base"),
        ("learned", "concat"),
        ("learned", "frozen"),
        ("learned", "untied"),
        ("alibi", "base"),
        ("sinusoidal", "base"),
        ("sinusoidal", "concat"),
        ("sinusoidal", "untied"),
    ]
    with pytest.raises(ValueError, match="unknown scheme 'alibii'"):
        expand(dataclasses.replace(exp, schemes=("alibii",)))


def test_every_trial_is_checked_before_the_out_dir_is_touched(tmp_path, tiny_experiment):
    """A bad scheme argument of the last trial fails the run before any store exists."""
    bases = tuple(
        dataclasses.replace(b, scheme_kwargs=(("alibi.bogus", 1),)) if b.task == "charlm" else b
        for b in tiny_experiment.bases
    )
    exp = dataclasses.replace(tiny_experiment, bases=bases)
    with pytest.raises(ValueError, match="scheme 'alibi' takes no argument 'bogus'"):
        run_experiment(exp, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def _foreign_db(path, *statements):
    with sqlite3.connect(path) as conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()
    return path.read_bytes()


_META = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


@pytest.mark.parametrize(
    "statements, message",
    [
        ((_META, "CREATE TABLE users (name TEXT)"), "(it holds tables users)"),
        ((_META,), "(tables meta)"),
        (
            (
                _META,
                "CREATE TABLE trials (x)",
                "CREATE TABLE evals (x)",
                "CREATE TABLE curves (x)",
                "INSERT INTO meta VALUES ('schema_version', '99')",
            ),
            "(its schema_version is '99')",
        ),
        (
            (_META, "CREATE TABLE trials (x)", "CREATE TABLE evals (x)", "CREATE TABLE curves (x)"),
            "(its schema_version is None)",
        ),
    ],
    ids=["other-tables", "meta-only", "schema-99", "no-version"],
)
def test_another_programs_database_is_refused_and_left_alone(tmp_path, tiny_experiment, statements, message):
    before = _foreign_db(tmp_path / "results.sqlite", *statements)
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",), seeds=(0,), schemes=("learned",))
    with pytest.raises(ForeignStoreError, match="is not a posembed results store") as error:
        run_experiment(exp, tmp_path, progress=False)
    assert message in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ForeignStoreError, match="is not a posembed results store"):
        load_results(tmp_path)
    assert (tmp_path / "results.sqlite").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def test_readers_open_the_store_read_only(tmp_path, tiny_experiment):
    exp = dataclasses.replace(tiny_experiment, tasks=("copy",), seeds=(0,), schemes=("learned",))
    ResultsStore(tmp_path, exp).close()
    store = ResultsStore(tmp_path)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        store.conn.execute("CREATE TABLE extra (x)")
    store.close()


def test_reading_a_folder_without_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results store"):
        ResultsStore(tmp_path)


@pytest.mark.slow
def test_killed_process_loses_nothing_finished(tmp_path):
    """SIGKILL a real `posembed lab run` after its first stored trial; the rerun trains only the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time

    args = [
        sys.executable,
        "-m",
        "posembed.cli",
        "lab",
        "run",
        "--preset",
        "smoke",
        "--out",
        str(tmp_path),
        "--no-checkpoints",
        "--threads",
        "1",
        "--set",
        "tasks=copy",
        "--set",
        "schemes=learned,nope",
        "--set",
        "seeds=0,1,2",
        "--set",
        "dim=16",
        "--set",
        "depth=1",
        "--set",
        "batch=4",
        "--set",
        "eval_batches=1",
        "--set",
        "steps=40",
    ]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    stored = 0
    while stored == 0 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        if (tmp_path / "results.sqlite").exists():
            with sqlite3.connect(tmp_path / "results.sqlite", timeout=10) as conn:
                try:
                    stored = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
                except sqlite3.OperationalError:  # tables not created yet
                    stored = 0
    assert process.poll() is None, "the run finished before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    survivors = {r.trial_id for r in load_results(tmp_path).trials}
    assert 1 <= len(survivors) < 6
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{6 - len(survivors)} trials trained, {len(survivors)} already stored" in done.stdout
    assert len(load_results(tmp_path).trials) == 6
