"""posembed.bench.rope: the CPU's rows as they were, issue 23's CUDA rows (device policy mocked)."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("x_transformers")
pytest.importorskip("rotary_embedding_torch")

from posembed.bench import rope as bench_rope  # noqa: E402
from posembed.bench.harness import Row  # noqa: E402

TINY = (1, 2, 16, 8)
#: the pin a skipped row's install line carries: the installed torch, kept
PIN = f"'torch=={importlib.metadata.version('torch').split('+')[0]}'"
SMALL = (1, 2, 256, 32)


def test_cpu_rows_are_the_fp32_cases_as_before(monkeypatch):
    monkeypatch.setattr(bench_rope, "QUICK", TINY)
    rows = bench_rope.run(quick=True, repeats=1)
    assert {row.case for row in rows} == {f"forward q, k {TINY} fp32", f"forward+backward q, k {TINY} fp32"}
    impls = {row.impl for row in rows}
    assert impls == {bench_rope.REFERENCE, bench_rope.POSEMBED, "rotary-embedding-torch", "x-transformers"}
    assert all(row.median_ms for row in rows)


def test_cuda_rows_with_the_device_policy_mocked(monkeypatch):
    """On CUDA: every dtype, the eager path as a second posembed row, Liger skipped where absent, GB/s."""
    monkeypatch.setattr(bench_rope, "cpu_tuned", lambda device: False)
    monkeypatch.setattr(bench_rope, "QUICK", SMALL)
    monkeypatch.setattr(bench_rope, "liger_skip_reason", lambda device: None)  # as on CUDA with the package ...
    monkeypatch.setitem(sys.modules, "liger_kernel", None)  # ... whose import then fails
    rows = bench_rope.run(quick=True, repeats=1)
    for dtype in ("bf16", "fp32"):
        for mode in ("forward", "forward+backward"):
            case = f"{mode} q, k {SMALL} {dtype}"
            timed = {row.impl for row in rows if row.case == case and row.median_ms}
            assert {bench_rope.REFERENCE, bench_rope.POSEMBED, bench_rope.EAGER, "rotary-embedding-torch"} <= timed
            assert bench_rope.FUSED not in timed
        skipped = [row for row in rows if row.impl == bench_rope.LIGER and dtype in row.case]
        assert len(skipped) == 1
        assert skipped[0].note == f"skipped: pip install liger-kernel {PIN} (liger_kernel is not installed)"
        (bandwidth,) = [row for row in rows if row.case == f"effective bandwidth, forward q, k {SMALL} {dtype}"]
        size = 2 if dtype == "bf16" else 4
        minimal = 4 * 16384 * size  # read q and k, write both
        assert bandwidth.extra["minimal MB"] == round(minimal / 1e6, 1)
        (forward,) = [r for r in rows if r.case == f"forward q, k {SMALL} {dtype}" and r.impl == bench_rope.POSEMBED]
        rate = minimal / (forward.median_ms * 1e-3) / 1e9
        assert bandwidth.extra[f"{bench_rope.POSEMBED} GB/s"] == round(rate, 1)
    assert any("60 % of the copy bandwidth" in t["target"] for t in bench_rope.cuda_targets(rows))


def test_liger_where_it_cannot_run_is_a_skipped_row_saying_why(monkeypatch):
    monkeypatch.setattr(bench_rope, "cpu_tuned", lambda device: False)
    reason = "liger-kernel is not installed (pip install liger-kernel)"
    monkeypatch.setattr(bench_rope, "liger_skip_reason", lambda device: reason)
    _, rows = bench_rope._build(16, 8, compiled=False, device=torch.device("cpu"), dtype=torch.bfloat16)
    assert [(row.impl, row.note) for row in rows] == [
        (bench_rope.LIGER, "skipped: liger-kernel is not installed (pip install liger-kernel)")
    ]


def test_cuda_targets_compare_bf16_against_liger():
    case = "forward+backward q, k (4, 32, 4096, 128) bf16"
    rows = [
        Row(bench_rope.SECTION, case, bench_rope.POSEMBED, median_ms=1.0),
        Row(bench_rope.SECTION, case, bench_rope.LIGER, median_ms=1.4),
        Row(bench_rope.SECTION, case.replace("bf16", "fp32"), bench_rope.POSEMBED, median_ms=1.0),
        Row(bench_rope.SECTION, case.replace("bf16", "fp32"), bench_rope.LIGER, median_ms=9.0),
    ]
    (target,) = bench_rope.cuda_targets(rows)
    assert target["measured"].startswith("1.40x") and target["met"] is False
    rows[1].median_ms = 1.5
    assert bench_rope.cuda_targets(rows)[0]["met"] is True


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_rows_on_a_gpu(monkeypatch):
    monkeypatch.setattr(bench_rope, "QUICK", (1, 2, 64, 32))
    rows = bench_rope.run(quick=True, repeats=2, device="cuda")
    assert any(row.case.startswith("effective bandwidth") for row in rows)
    assert {row.impl for row in rows if row.median_ms} >= {bench_rope.POSEMBED, bench_rope.EAGER, bench_rope.REFERENCE}
