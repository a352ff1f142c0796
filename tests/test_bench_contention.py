"""``posembed bench`` explains a missed target: the load, busy or quiet, and whether the row is
known to lose under contention (BENCHMARKS.md, "The embedding block under contention")."""

from __future__ import annotations

import pytest

from posembed.bench.harness import missed_explanations, oversubscribed


def test_a_missed_target_names_the_load_and_the_known_contention_loss():
    targets = [
        {
            "target": "embedding block forward (eval)",
            "measured": "0.62x (0.79 ms)",
            "met": False,
            "contention": "the chunked path's barriers stall",
        },
        {"target": "RoPE forward+backward", "measured": "0.93x", "met": False},
        {"target": "met one", "measured": "4x", "met": True},
    ]
    busy = missed_explanations(targets, {"load_average": [3.39, 1.8, 0.8], "cores": 2}, [7.06, 3.0, 1.2])
    assert len(busy) == 2
    assert busy[0].startswith(
        "target not met: embedding block forward (eval) (0.62x (0.79 ms)) at load average "
        "3.39 (start) / 7.06 (end) on 2 cores: busy; known to lose under contention: the chunk"
    )
    assert busy[1].endswith(
        "not known to lose under contention; rerun on a quiet machine before reading it as a regression"
    )
    quiet = missed_explanations(targets[1:], {"load_average": [0.5, 0.5, 0.5], "cores": 2}, [0.7, 0.5, 0.5])
    assert quiet == [
        "target not met: RoPE forward+backward (0.93x) at load average 0.5 (start) / 0.7 (end) on 2 "
        "cores: quiet; not known to lose under contention"
    ]


@pytest.mark.parametrize(
    "load, cores, busy", [([2.01, 0, 0], 2, True), ([2.0, 0, 0], 2, False), ([9.0, 0, 0], None, False)]
)
def test_oversubscribed_is_a_load_above_the_cores(load, cores, busy):
    assert oversubscribed(load, cores) is busy


def test_the_embedding_and_rope_targets_carry_their_contention_notes():
    from posembed.bench import embeddings, rope
    from posembed.bench.harness import Row

    rows = [
        Row(embeddings.SECTION, "forward (eval) (4, 128, 768)", embeddings.BLOCK, 1.0, 0.6),
        Row(rope.SECTION, "forward+backward (1, 2, 16, 8)", rope.POSEMBED, 1.0, 0.9),
        Row(rope.SECTION, "forward+backward (1, 2, 16, 8)", rope.FUSED, 1.0, 3.5),
    ]
    found = embeddings.targets(rows) + rope.targets(rows)
    assert [t["contention"] is not None for t in found] == [True, True, False]
    assert found[0]["contention"] == embeddings.CONTENTION and not found[0]["met"]
