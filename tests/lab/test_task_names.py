"""A lab task's name, its metrics, their direction and display name live in the task registry alone.

The scan of :mod:`tests.schemes.test_scheme_names` (a dict literal keyed by two names or more),
run with the task and metric names, plus membership tests (``task in ("copy", "reverse")``): any
of these outside ``lab/task_registry.py`` is a second table of tasks the registry does not govern.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from posembed.lab.report.decisions import judged_metric
from posembed.lab.report.tables import primary_metric
from posembed.lab.sweep.listing import MAIN_METRIC
from posembed.lab.task_registry import ENTRIES, METRICS, TASK_ENTRIES, TaskEntry, metric_label, task_entry
from tests.schemes.test_scheme_names import SRC, name_tables

#: the one file allowed to table tasks and metrics by name
ALLOWED = {"lab/task_registry.py"}
#: every task name and every metric name a task records
NAMES = frozenset(TASK_ENTRIES) | frozenset(METRICS)


def membership_tables(path: Path) -> list[str]:
    """``file:line`` of each ``x in (...)`` / ``x not in [...]`` whose literal holds two task or metric names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                named = sorted({e.value for e in right.elts if isinstance(e, ast.Constant) and e.value in NAMES})
                if len(named) >= 2:
                    found.append(f"{path.relative_to(SRC).as_posix()}:{node.lineno} tests {', '.join(named)}")
    return found


def task_tables(paths) -> list[str]:
    return [
        hit
        for path in paths
        if path.relative_to(SRC).as_posix() not in ALLOWED
        for hit in name_tables(path, NAMES) + membership_tables(path)
    ]


def test_no_task_or_metric_table_outside_the_registry():
    found = task_tables(sorted(SRC.rglob("*.py")))
    assert not found, "task or metric tables outside lab/task_registry.py (ask its entries):\n" + "\n".join(found)


def test_the_scan_finds_task_tables():
    probe = SRC / "lab" / "_probe_tasks.py"  # under src/ so that its path is reported as one
    try:
        probe.write_text(
            'NAMES = {"accuracy": "acc", "val_loss": "loss"}\nMAIN = {"order": "accuracy", "x": 1}\n'
            'SIZES = {"copy": 4, "sort": (1, 2)}\n'
            'def f(task):\n    return task in ("copy", "reverse") or task == "charlm"\n',
            encoding="utf-8",
        )
        assert task_tables([probe]) == [
            "lab/_probe_tasks.py:1 keys accuracy, val_loss",
            "lab/_probe_tasks.py:5 tests copy, reverse",
        ]
    finally:
        probe.unlink()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_the_report_and_the_listing_ask_the_registry(entry):
    assert judged_metric(entry.name) == MAIN_METRIC[entry.name] == entry.metric
    assert primary_metric(entry.name) == entry.shown in METRICS


def test_the_registry_states_each_metric():
    assert task_entry("charlm").shown == "perplexity" and task_entry("copy").shown == "exact_match"
    assert [m for m, metric in METRICS.items() if metric.higher_is_better] == ["accuracy", "exact_match"]
    assert metric_label("val_loss") == "validation loss" and metric_label("unheard") == "unheard"
    retired = task_entry("retired")
    assert (retired.name, retired.metric, retired.shown, retired.lengths) == (
        "retired",
        "exact_match",
        "exact_match",
        "operand length",
    )


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"metric": "bleu"}, "task 'x': metric 'bleu' is not one of accuracy, exact_match, val_loss, perplexity"),
        ({"shown": "f1"}, "task 'x': metric 'f1' is not one of"),
        ({"model": "seq2seq"}, "task 'x': model must be one of"),
        ({"where": "algorithmic.CopyTask"}, "task 'x': where must be 'module:Class'"),
    ],
)
def test_a_bad_entry_is_refused(fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        TaskEntry(**{"name": "x", "model": "decoder", "where": "algorithmic:CopyTask", **fields})


def test_a_task_trains_a_model_kind_not_a_string():
    from posembed.lab.task_registry import TASKS, Model, TaskEntry

    assert TaskEntry("t", "decoder", "algorithmic:CopyTask").model is Model.DECODER
    assert {TASKS["charlm"], TASKS["order"]} == {Model.DECODER, Model.ENCODER}
    with pytest.raises(ValueError, match="model must be one of .*'decoder', 'encoder'.*got 'lm'"):
        TaskEntry("t", "lm", "algorithmic:CopyTask")
