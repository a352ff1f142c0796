"""The benchmarks on a device: the harness's one synchronize point, the device in the report,
the CPU-tuned cases and the targets only on the CPU, the Liger-Kernel RoPE row.

No CUDA is needed: ``torch.cuda``'s calls are mocked (counted) and the CPU stands in for the
device where a suite runs; ``tests/test_device_options.py`` holds the runs on a real GPU.
"""

from __future__ import annotations

import importlib.metadata
import sys
import types

import pytest
import torch

from posembed.bench import harness
from posembed.bench.harness import compare, machine_info, markdown, peak_memory_mb, start_memory, time_ms

#: the pin a skipped row's install line carries: the installed torch, kept
PIN = f"'torch=={importlib.metadata.version('torch').split('+')[0]}'"


@pytest.fixture
def cuda_calls(monkeypatch) -> list:
    """Record ``torch.cuda.synchronize`` and the allocator calls instead of running them."""
    calls: list = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(("sync", str(device))))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: calls.append(("reset", str(device))))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 3 * 2**20)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 10 * 2**20)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU 80GB")
    return calls


def test_a_timed_call_waits_for_cuda_before_and_after(cuda_calls):
    time_ms(lambda: cuda_calls.append("call"), "cuda")
    assert cuda_calls == [("sync", "cuda"), "call", ("sync", "cuda")]


def test_compare_synchronizes_every_timed_call_on_cuda_only(cuda_calls):
    cases = {"a": lambda: cuda_calls.append("a"), "b": lambda: cuda_calls.append("b")}
    times = compare(cases, warmup=1, repeats=3, device=torch.device("cuda", 0))
    assert [len(v) for v in times.values()] == [3, 3]
    sync = ("sync", "cuda:0")
    assert cuda_calls[:2] == ["a", "b"]  # the warm-up calls, not timed
    assert cuda_calls[2:8] == [sync, "a", sync, sync, "b", sync]  # round 1, interleaved
    assert cuda_calls.count(sync) == 2 * 2 * 3
    cuda_calls.clear()
    compare(cases, warmup=1, repeats=3)  # the CPU: nothing to wait for
    compare(cases, warmup=1, repeats=3, device="cpu")
    assert not any(isinstance(call, tuple) for call in cuda_calls)


def test_memory_on_cuda_is_the_allocators_peak(cuda_calls, monkeypatch):
    assert start_memory("cuda") == 3.0 and ("reset", "cuda") in cuda_calls
    assert peak_memory_mb("cuda") == 10.0
    cuda_calls.clear()
    monkeypatch.setattr(harness, "peak_rss_mb", lambda: 42.0)
    assert start_memory() == peak_memory_mb("cpu") == 42.0 and not cuda_calls  # the CPU: the resident set


def test_machine_info_records_the_device(cuda_calls):
    on_cpu = machine_info()
    assert on_cpu["device"] == "cpu" and on_cpu["device_name"] == "cpu" and on_cpu["cuda"] is None
    on_gpu = machine_info(torch.device("cuda", 0))
    assert on_gpu["device"] == "cuda:0" and on_gpu["device_name"] == "Fake GPU 80GB"
    text = markdown([], [], on_gpu, quick=True)
    assert "device: cuda:0 (Fake GPU 80GB" in text and "not checked on cuda:0" in text
    assert "device: cpu;" in markdown([], [], on_cpu, quick=True)
    old = {key: value for key, value in on_cpu.items() if not key.startswith(("device", "cuda"))}
    assert "device: cpu;" in markdown([], [], old, quick=False)  # results written before devices


def _fake_suite(name: str, seen: dict):
    module = types.ModuleType(name)

    def run(quick, repeats, device=None):
        seen[name] = device
        return []

    module.run = run
    target = {"target": name, "measured": "1x", "met": True}
    module.targets = lambda rows: seen.setdefault("targets", []).append(name) or [target]
    return module


def test_run_suites_hands_the_device_over_and_checks_targets_on_the_cpu(tmp_path, monkeypatch, cuda_calls):
    import posembed.bench.run as bench

    seen: dict = {}
    monkeypatch.setitem(sys.modules, "tests.fake_suite", _fake_suite("fake", seen))
    monkeypatch.setattr(bench, "SUITES", {"fake": "tests.fake_suite"})
    result = bench.run_suites(out=tmp_path / "cpu", device="cpu", progress=False)
    assert seen == {"fake": torch.device("cpu"), "targets": ["fake"]} and [t["target"] for t in result["targets"]] == [
        "fake"
    ]
    seen.clear()
    monkeypatch.setattr(bench, "resolve_device", lambda spec: torch.device(spec))  # as if CUDA were there
    result = bench.run_suites(out=tmp_path / "gpu", device="cuda", progress=False)
    assert seen == {"fake": torch.device("cuda")} and result["targets"] == []
    assert "device: cuda (Fake GPU 80GB" in result["markdown"].read_text()


# ---------------------------------------------------------------------- the suites' CPU-tuned cases


def test_embeddings_leave_the_cpu_tuned_cases_out_elsewhere(monkeypatch):
    pytest.importorskip("transformers")
    from posembed.bench import embeddings as bench_embeddings

    shape = {"batch": 2, "length": 16, "width": 32, "vocab": 100}
    block, ids, types_ = bench_embeddings._setup(shape, torch.device("cpu"))
    on_cpu, modules, skipped = bench_embeddings._implementations(block, ids, types_, compile_reference=False)
    assert {bench_embeddings.FUSED, bench_embeddings.BLOCK_SMALL_PAGES} <= on_cpu.keys() and not skipped
    assert bench_embeddings.BLOCK_EAGER not in on_cpu and len(modules) == 2
    monkeypatch.setattr(bench_embeddings, "cpu_tuned", lambda device: False)  # the same tensors, seen as CUDA
    elsewhere, modules, _ = bench_embeddings._implementations(block, ids, types_, compile_reference=False)
    assert bench_embeddings.FUSED not in elsewhere and bench_embeddings.BLOCK_SMALL_PAGES not in elsewhere
    assert {bench_embeddings.REFERENCE, bench_embeddings.BLOCK, bench_embeddings.BLOCK_EAGER} <= elsewhere.keys()
    assert [m.fused for m in modules if hasattr(m, "fused")] == [True, False]  # the block and its eager copy


def test_embeddings_on_cuda_time_every_pass_in_bf16_and_fp32(monkeypatch):
    """The CUDA row list, built and run at a small size on the CPU with the device policy mocked
    (the block's own dispatch stays the CPU's: the bench decides only which rows there are)."""
    pytest.importorskip("transformers")
    from posembed.bench import embeddings as bench_embeddings

    monkeypatch.setattr(bench_embeddings, "QUICK", {"batch": 2, "length": 16, "width": 32, "vocab": 100})
    monkeypatch.setattr(bench_embeddings, "cpu_tuned", lambda device: False)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)  # nothing compiled in a quick run
    rows = bench_embeddings.run(quick=True, repeats=1)
    cases = list(dict.fromkeys(row.case for row in rows))
    for dtype in ("bf16", "fp32"):
        for name, _, _ in bench_embeddings.CUDA_MODES:
            case = f"{name} (2, 16, 32), vocab 100, {dtype}"
            assert case in cases
            timed = {row.impl for row in rows if row.case == case and row.median_ms}
            assert timed == {bench_embeddings.REFERENCE, bench_embeddings.BLOCK, bench_embeddings.BLOCK_EAGER}
    targets = bench_embeddings.cuda_targets(rows)
    assert len(targets) == 8 and all(
        ">= 2x transformers eager (posembed TransformerEmbeddings)" in t["target"] for t in targets
    )
    assert any(
        t["target"].startswith("embedding block forward+backward (train, dropout 0.1) (2, 16, 32), vocab 100, bf16")
        for t in targets
    )


def test_embeddings_without_transformers_skip_its_rows(monkeypatch):
    from posembed.bench import embeddings as bench_embeddings

    def missing(block):
        raise ModuleNotFoundError("No module named 'transformers'", name="transformers")

    monkeypatch.setattr(bench_embeddings, "_reference", missing)
    monkeypatch.setattr(bench_embeddings, "QUICK", {"batch": 2, "length": 16, "width": 32, "vocab": 100})
    rows = bench_embeddings.run(quick=True, repeats=1)
    reference = [row for row in rows if row.impl == bench_embeddings.REFERENCE]
    assert len(reference) == 2 and all(row.median_ms is None for row in reference)
    assert all(
        row.note == f"skipped: pip install 'posembed[bench]' {PIN} (transformers is not installed)" for row in reference
    )
    block = [row for row in rows if row.impl == bench_embeddings.BLOCK]
    assert block and all(row.median_ms and row.speedup is None for row in block)
    assert not any("failed" in row.note for row in rows)


def test_attention_cases_per_device():
    from posembed.bench import attention as bench_attention

    def impls(device, mode, length=None):
        return {s["impl"] for s in bench_attention._cases(False, torch.device(device))
                if s["mode"] == mode and length in (None, s["length"])}  # fmt: skip

    assert "posembed fused" in impls("cpu", "train") and "posembed flex" not in impls("cpu", "train")
    every_backend = {"posembed fused", "posembed chunked", "posembed flex", bench_attention.BASELINE}
    assert every_backend <= impls("cuda", "train", 8192) and every_backend <= impls("cuda", "infer", 8192)
    cuda = list(bench_attention._cases(False, torch.device("cuda")))
    assert {(s["scheme"], s["dtype"]) for s in cuda} == set(bench_attention.CUDA_SCHEMES)
    assert {s["heads"] for s in cuda} == {16} and {s["length"] for s in cuda} == {2048, 8192}
    assert all("dtype" not in s for s in bench_attention._cases(False, torch.device("cpu")))
    _, on_cpu = bench_attention._posembed("flex", "alibi", torch.device("cpu"))
    _, on_meta = bench_attention._posembed("flex", "alibi", torch.device("meta"))
    assert not on_cpu.compile_flex and on_meta.compile_flex  # off the CPU flex runs compiled, as auto runs it
    assert next(on_meta.parameters()).device.type == "meta"


def test_attention_worker_runs_a_cuda_spec_in_its_dtype_and_heads():
    """A CUDA case's spec (bf16, 16 heads) run on the CPU at a tiny length: the worker honours both."""
    from posembed.bench import attention as bench_attention

    spec = {"impl": "posembed chunked", "scheme": "alibi", "length": 32, "mode": "train", "dtype": "bfloat16",
            "heads": 16, "repeats": 1, "warmup": 0}  # fmt: skip
    result = bench_attention.worker(spec)
    assert result["median_ms"] > 0


def test_attention_rows_say_what_each_number_is(monkeypatch):
    from posembed.bench import attention as bench_attention
    from posembed.bench.harness import markdown

    def fake_worker(module, spec):
        if spec["impl"] == "x-transformers":
            return {"skipped": f"skipped: pip install 'posembed[bench]' {PIN} (x_transformers is not installed)"}
        return {"median_ms": 2.0 if spec["impl"] == bench_attention.BASELINE else 1.0, "peak_mb": 344.5,
                "step_mb": 100.0 if spec["impl"] == bench_attention.BASELINE else 25.0}  # fmt: skip

    monkeypatch.setattr(bench_attention, "run_worker", fake_worker)
    monkeypatch.setattr(bench_attention, "FULL_LENGTHS", (512,))
    rows = bench_attention.run(repeats=1)
    chunked = next(r for r in rows if r.impl == "posembed chunked" and r.case == "alibi T=512 training step")
    assert chunked.extra == {"step MB": 25.0, "peak RSS MB": 344.5, "memory vs baseline": 0.25}
    assert chunked.speedup == 2.0
    text = markdown(rows, [], machine_info(), quick=True)
    assert "| step MB: 25.0; peak RSS MB: 344.5; memory vs baseline: 0.25 |" in text
    skipped = [r for r in rows if r.impl == "x-transformers"]
    assert skipped and all(r.note.startswith("skipped: pip install 'posembed[bench]'") for r in skipped)
    assert f"| — | — | skipped: pip install 'posembed[bench]' {PIN} (x_transformers is not installed) |" in text
    assert "failed" not in text


def test_attention_worker_reports_a_missing_library_as_skipped(monkeypatch):
    from posembed.bench import attention as bench_attention

    def missing(scheme, device, heads):
        raise ModuleNotFoundError("No module named 'x_transformers'", name="x_transformers")

    monkeypatch.setattr(bench_attention, "_x_transformers", missing)
    spec = {"impl": "x-transformers", "scheme": "alibi", "length": 16, "mode": "infer", "repeats": 1}
    assert bench_attention.worker(spec) == {
        "skipped": f"skipped: pip install 'posembed[bench]' {PIN} (x_transformers is not installed)"
    }


def test_a_worker_that_dies_of_a_missing_library_is_skipped(monkeypatch):
    import subprocess

    from posembed.bench.harness import run_worker

    tail = "Traceback ...\nModuleNotFoundError: No module named 'x_transformers.x_transformers'\n"
    done = subprocess.CompletedProcess([], 1, stdout="", stderr=tail)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: done)
    assert run_worker("m", {}) == {
        "skipped": f"skipped: pip install 'posembed[bench]' {PIN} (x_transformers is not installed)"
    }
    done.stderr = "RuntimeError: boom"
    assert run_worker("m", {}) == {"error": "exit 1: RuntimeError: boom"}


def test_compare_marks_a_missing_library_skipped_not_failed():
    from posembed.bench.harness import rows_from_times

    def needs_library():
        import posembed_no_such_library  # noqa: F401

    times = compare({"ref": lambda: None, "lib": needs_library}, warmup=1, repeats=1)
    rows = rows_from_times("s", "c", times, "ref")
    assert rows[1].median_ms is None
    assert rows[1].note == f"skipped: pip install 'posembed[bench]' {PIN} (posembed_no_such_library is not installed)"


# ---------------------------------------------------------------------- training sizes per device


def test_training_plan_per_device():
    from posembed.bench import training as bench_training

    cpu = bench_training.plan(False, torch.device("cpu"))
    assert cpu == [(bench_training.CONFIG, False)]
    cuda = bench_training.plan(False, torch.device("cuda"))
    assert cuda == [(bench_training.CONFIG, False), (bench_training.CONFIG, True),
                    (bench_training.GPT2_SMALL, False), (bench_training.GPT2_SMALL, True)]  # fmt: skip
    assert bench_training.GPT2_SMALL == {
        "depth": 12,
        "heads": 12,
        "dim": 768,
        "block": 1024,
        "batch": 8,
        "vocab": 50304,
    }
    assert bench_training.plan(True, torch.device("cuda")) == [(bench_training.CONFIG, False)]


def test_training_cuda_groups_run_scaled_down(monkeypatch):
    """The CUDA plan's eager groups at a tiny size on the CPU (the sizes scaled down, the policy
    mocked); a compiled group is the same code under torch.compile (see tests/test_model_compile.py)."""
    from posembed.bench import training as bench_training

    tiny = {"depth": 1, "heads": 2, "dim": 16, "block": 8, "batch": 2}
    monkeypatch.setattr(bench_training, "CONFIG", tiny)
    monkeypatch.setattr(bench_training, "GPT2_SMALL", dict(tiny, vocab=97))
    monkeypatch.setattr(bench_training, "cpu_tuned", lambda device: False)
    groups = [group for group in bench_training.plan(False, torch.device("cpu")) if not group[1]]
    monkeypatch.setattr(bench_training, "plan", lambda quick, device: groups)
    rows = bench_training.run(repeats=1)
    labels = list(dict.fromkeys(row.case for row in rows))
    assert labels == ["1 layers, width 16, block 8, batch 2"] * 1 and len(rows) == 8
    big = [row for row in rows if row.impl == bench_training.REFERENCE]
    small, large = sorted(row.extra["parameters"] for row in big)  # the characters', then GPT-2's vocabulary
    assert large - small == 16 * (97 - 65)  # the (tied) token table's extra rows
    assert all(row.median_ms for row in rows)


def test_attention_worker_spec_carries_the_device(monkeypatch):
    from posembed.bench import attention as bench_attention

    specs = []
    monkeypatch.setattr(bench_attention, "CUDA_LENGTHS", (16,))
    monkeypatch.setattr(bench_attention, "run_worker", lambda module, spec: specs.append(spec) or {"error": "x"})
    monkeypatch.setattr(bench_attention, "FULL_LENGTHS", (16,))
    rows = bench_attention.run(repeats=1, device=torch.device("cuda", 1))
    assert specs and all(spec["device"] == "cuda:1" for spec in specs) and rows
    specs.clear()
    bench_attention.run(repeats=1)
    assert specs and all("device" not in spec for spec in specs)


def test_a_quick_attention_run_times_in_process_without_memory_on_the_cpu(monkeypatch):
    from posembed.bench import attention as bench_attention

    monkeypatch.setattr(bench_attention, "run_worker", lambda module, spec: pytest.fail("a worker process started"))
    monkeypatch.setattr(bench_attention, "QUICK_LENGTHS", (16,))
    monkeypatch.setattr(bench_attention, "IMPLS", {bench_attention.BASELINE: "sdpa", "posembed chunked": "chunked"})
    rows = bench_attention.run(quick=True, repeats=1)
    assert len(rows) == 8 and all(row.median_ms and not row.extra for row in rows)
    assert all(row.note == "quick run: timed in the bench's process, memory not measured" for row in rows)


# ---------------------------------------------------------------------- Liger-Kernel's RoPE


def test_liger_row_only_on_cuda_with_the_package(monkeypatch):
    import importlib.util

    from posembed.bench import rope as bench_rope

    assert "Triton kernel for CUDA; this run is on cpu" in bench_rope.liger_skip_reason("cpu")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert "liger-kernel is not installed" in bench_rope.liger_skip_reason("cuda")


def test_liger_row_joins_the_table_when_it_can_run(monkeypatch):
    """A stand-in ``liger_kernel`` (the transformers formula) shows where the row goes and what it is fed."""
    pytest.importorskip("transformers")
    pytest.importorskip("x_transformers")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from posembed.bench import rope as bench_rope

    fed = []

    def fake_liger(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
        fed.append((q.shape, cos.shape))
        return apply_rotary_pos_emb(q, k, cos, sin)

    package = types.ModuleType("liger_kernel")
    for name in ("liger_kernel", "liger_kernel.transformers", "liger_kernel.transformers.rope"):
        monkeypatch.setitem(sys.modules, name, package)
    package.transformers = package
    package.rope = package
    package.liger_rotary_pos_emb = fake_liger
    monkeypatch.setattr(bench_rope, "liger_skip_reason", lambda device: None)
    monkeypatch.setattr(bench_rope, "QUICK", (1, 2, 16, 8))
    rows = bench_rope.run(quick=True, repeats=1)
    liger = [row for row in rows if row.impl == bench_rope.LIGER]
    assert len(liger) == 2 and all(row.median_ms for row in liger)
    assert fed[0] == (torch.Size([1, 2, 16, 8]), torch.Size([1, 16, 8]))  # (B, H, T, D) q, (1, T, D) tables


# ---------------------------------------------------------------------- BENCHMARKS.md's GPU section


def test_benchmarks_md_says_no_gpu_run_until_one_exists():
    from pathlib import Path

    from posembed.bench.gpu_section import END, NO_RUN, START

    text = (Path(__file__).resolve().parent.parent / "BENCHMARKS.md").read_text()
    section = text.split(START, 1)[1].split(END, 1)[0]
    assert section.strip() == NO_RUN or section.strip().startswith("## GPU: ")


def test_a_full_gpu_run_writes_the_gpu_section_with_the_cards_name(tmp_path, cuda_calls):
    import importlib
    import json

    from posembed.bench.gpu_section import END, NO_RUN, START
    from posembed.bench.harness import Row, write_report

    write_gpu_section = importlib.import_module("benchmarks.__main__").write_gpu_section
    benchmarks_md = tmp_path / "BENCHMARKS.md"
    benchmarks_md.write_text(f"# Benchmarks\n\nCPU tables.\n\n{START}\n{NO_RUN}\n{END}\n\n## After\n")
    rows = [
        Row(
            "embedding block",
            "forward (eval) (2, 16, 32), vocab 100, bf16",
            "posembed TransformerEmbeddings",
            0.0512,
            2.5,
        )
    ]
    out = tmp_path / "gpu"
    write_report(rows, [], machine_info(torch.device("cuda", 0)), out, quick=False)
    assert write_gpu_section(out, benchmarks_md)
    text = benchmarks_md.read_text()
    assert text.startswith("# Benchmarks\n\nCPU tables.") and text.endswith("## After\n")  # the rest untouched
    assert "## GPU: Fake GPU 80GB (" in text and "No GPU run yet" not in text
    assert "| forward (eval) (2, 16, 32), vocab 100, bf16 | posembed TransformerEmbeddings | 0.0512 | 2.50x |" in text
    assert text.count(START) == text.count(END) == 1
    for quick, machine in ((True, machine_info(torch.device("cuda", 0))), (False, machine_info())):
        write_report(rows, [], machine, out, quick=quick)
        assert not write_gpu_section(out, benchmarks_md)  # a quick or CPU run leaves it as it is
    assert json.loads((out / "results.json").read_text())["machine"]["device"] == "cpu"
