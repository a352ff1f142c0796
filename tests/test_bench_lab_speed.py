"""benchmarks/bench_lab_speed.py's ``profile`` mode: where each model's step spends its time."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

bench = importlib.import_module("benchmarks.bench_lab_speed")


@pytest.fixture(scope="module")
def profiled():
    threads = torch.get_num_threads()
    try:
        return bench.bench_profile(2)
    finally:
        torch.set_num_threads(threads)


def test_profile_covers_the_three_steps_and_every_part(profiled):
    assert list(profiled) == ["nanoGPT-style reference", "posembed Decoder, lab defaults",
                              "posembed Decoder, calibration preset"]
    parts = [part for part, _ in bench.PARTS] + ["other"]
    for row in profiled.values():
        assert list(row["self_cpu_ms_by_part"]) == parts
        assert math.isclose(sum(row["share_by_part"].values()), 1.0, rel_tol=1e-9)
        assert row["thread_cpu_ms"] > 0
        # every model multiplies matrices, attends, applies GELU and LayerNorm, and steps AdamW
        for part in ("matrix products", "attention", "GELU", "LayerNorm", "optimizer"):
            assert row["self_cpu_ms_by_part"][part] > 0, part


def test_profile_counts_the_biases_copies_only_where_there_are_biases(profiled):
    """``addmm`` copies its bias into the output: the lab's defaults (biases) copy far more than
    the bias-free reference."""
    copies = {name: row["self_cpu_ms_by_part"]["copies"] for name, row in profiled.items()}
    assert copies["posembed Decoder, lab defaults"] > 5 * copies["nanoGPT-style reference"]
