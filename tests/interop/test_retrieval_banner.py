"""``posembed extend-eval --quick`` opens its report with the banner the lab's smoke presets carry (issue 41)."""

from __future__ import annotations

import pytest

from posembed._utils.html import too_small_banner
from posembed.interop.extend.retrieval import QUICK, BenchmarkConfig
from posembed.interop.extend.retrieval_report import ENOUGH_QUERIES, summarise, too_small, wilson, write_report

FRAME = ("This run is too small to conclude: ", ". No verdict below is a finding; run ")


def _cell(task, system, length, hits, n, seeds):
    outcomes = [[i / max(1, n - 1), int(i < hits), seed] for seed in seeds for i in range(n)]
    total, k = n * len(seeds), hits * len(seeds)
    low, high = wilson(k, total)
    return {
        "task": task,
        "system": system,
        "length": length,
        "hits": k,
        "queries": total,
        "candidates": n,
        "accuracy": k / total,
        "mrr": k / total,
        "low": low,
        "high": high,
        "longembed": "",
        "outcomes": outcomes,
        "positions_used": min(length, 512),
        "seconds": 0.1,
    }


def _result(queries: int, seeds: tuple[int, ...], copy_hits: int) -> dict:
    cells = [
        _cell(t, s, L, k, queries, seeds)
        for t in ("passkey", "needle")
        for L in (256, 1024)
        for s, k in (("truncate-512", queries // 5), ("copy", copy_hits))
    ]
    protocol = {
        "model": "m",
        "text": "t",
        "queries": queries,
        "seeds": list(seeds),
        "pooling": "mean",
        "interval": "Wilson",
        "targets": [1024],
    }
    return {"protocol": protocol, "cells": cells, "seconds": {"copy": 1.0}, "summary": summarise(cells, 512)}


def test_the_quick_form_is_below_the_full_benchmark():
    assert BenchmarkConfig().queries == ENOUGH_QUERIES and QUICK.queries < ENOUGH_QUERIES and QUICK.data_seeds == 1


def test_a_quick_run_report_opens_with_the_banner(tmp_path, caplog):
    result = _result(QUICK.queries, (0,), copy_hits=QUICK.queries // 5)
    warning = too_small(result)
    assert warning.startswith(FRAME[0]) and FRAME[1] in warning
    assert "10 queries per task and length (the full benchmark: 50)" in warning
    assert "one data seed" in warning and "every verdict 'cannot tell'" in warning
    assert "`posembed extend-eval --out DIR`" in warning
    page = write_report(result, tmp_path)[1].read_text(encoding="utf-8")
    assert page.index('<p class="banner">') < page.index("<h2>Summary</h2>")
    assert "This run is too small to conclude" in page
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [warning]  # the terminal says so too


def test_a_run_that_decides_with_two_seeds_and_enough_queries_has_no_banner(tmp_path):
    result = _result(ENOUGH_QUERIES, (0, 1), copy_hits=40)
    assert any(d["word"] == "copy better" for d in result["summary"]["decisions"])
    assert too_small(result) == ""
    assert 'class="banner"' not in write_report(result, tmp_path)[1].read_text(encoding="utf-8")


@pytest.mark.parametrize("queries, seeds, copy_hits, reason", [
    (ENOUGH_QUERIES, (0,), 40, "one data seed"),
    (20, (0, 1), 18, "20 queries per task and length"),
])  # fmt: skip
# "no primary comparison decided" alone cannot be built from these cells: since McNemar's equivalence side is
# exact, 50 queries on 2 seeds decide every comparison ("alike" at equal hits); the quick-run test above covers it
def test_each_reason_alone_raises_the_banner(queries, seeds, copy_hits, reason):
    warning = too_small(_result(queries, seeds, copy_hits))
    assert warning.startswith(FRAME[0]) and warning[len(FRAME[0]) :].split(FRAME[1])[0].split("; ") == [
        next(part for part in warning[len(FRAME[0]) :].split(FRAME[1])[0].split("; ") if reason in part)
    ]


def test_the_banner_is_the_shared_wording():
    result = _result(QUICK.queries, (0,), copy_hits=2)
    reasons = too_small(result)[len(FRAME[0]) :].split(FRAME[1])[0].split("; ")
    assert too_small(result) == too_small_banner(
        "run", reasons, too_small(result).split(FRAME[1])[1][: -len(" for answers.")]
    )
