"""The benchmarks on a device: the harness's one synchronize point, the device in the report,
the CPU-tuned cases and the targets only on the CPU, the Liger-Kernel RoPE row.

No CUDA is needed: ``torch.cuda``'s calls are mocked (counted) and the CPU stands in for the
device where a suite runs; ``tests/test_device_options.py`` holds the runs on a real GPU.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from posembed.bench import harness
from posembed.bench.harness import compare, machine_info, markdown, peak_memory_mb, start_memory, time_ms


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
    import posembed.bench as bench

    seen: dict = {}
    monkeypatch.setitem(sys.modules, "tests.fake_suite", _fake_suite("fake", seen))
    monkeypatch.setattr(bench, "SUITES", {"fake": "tests.fake_suite"})
    result = bench.run_suites(out=tmp_path / "cpu", device="cpu", progress=False)
    assert seen == {"fake": torch.device("cpu"), "targets": ["fake"]} and [t["target"] for t in result["targets"]] == ["fake"]
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
    bert, config, ids, types_ = bench_embeddings._setup(shape, torch.device("cpu"))
    on_cpu = bench_embeddings._implementations(bert, config, ids, types_, compile_reference=False)
    assert {bench_embeddings.FUSED, bench_embeddings.BLOCK_SMALL_PAGES} <= on_cpu.keys()
    monkeypatch.setattr(bench_embeddings, "cpu_tuned", lambda device: False)  # the same tensors, seen as CUDA
    elsewhere = bench_embeddings._implementations(bert, config, ids, types_, compile_reference=False)
    assert bench_embeddings.FUSED not in elsewhere and bench_embeddings.BLOCK_SMALL_PAGES not in elsewhere
    assert {bench_embeddings.REFERENCE, bench_embeddings.BLOCK} <= elsewhere.keys()


def test_attention_cases_per_device():
    from posembed.bench import attention as bench_attention

    def impls(device, mode):
        return {s["impl"] for s in bench_attention._cases(False, torch.device(device)) if s["mode"] == mode}

    assert "posembed fused" in impls("cpu", "train") and "posembed flex" not in impls("cpu", "train")
    assert "posembed fused" not in impls("cuda", "train") and "posembed flex" in impls("cuda", "train")
    _, on_cpu = bench_attention._posembed("flex", "alibi", torch.device("cpu"))
    _, on_meta = bench_attention._posembed("flex", "alibi", torch.device("meta"))
    assert not on_cpu.compile_flex and on_meta.compile_flex  # off the CPU flex runs compiled, as auto runs it
    assert next(on_meta.parameters()).device.type == "meta"


def test_attention_worker_spec_carries_the_device(monkeypatch):
    from posembed.bench import attention as bench_attention

    specs = []
    monkeypatch.setattr(bench_attention, "run_worker", lambda module, spec: specs.append(spec) or {"error": "x"})
    monkeypatch.setattr(bench_attention, "QUICK_LENGTHS", (16,))
    rows = bench_attention.run(quick=True, repeats=1, device=torch.device("cuda", 1))
    assert specs and all(spec["device"] == "cuda:1" for spec in specs) and rows
    specs.clear()
    bench_attention.run(quick=True, repeats=1)
    assert specs and all("device" not in spec for spec in specs)


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
