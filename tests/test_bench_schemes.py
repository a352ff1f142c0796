"""The attention bench builds its bias schemes through the factory, as they were built by hand before."""

from __future__ import annotations

from posembed.bench import attention as bench_attention
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.bias.t5 import T5RelativeBias
from posembed.schemes.factory import FACTORY


def test_every_timed_scheme_is_a_factory_name():
    assert set(bench_attention.SCHEMES) <= set(FACTORY)
    assert {name for name, _ in bench_attention.CUDA_SCHEMES} <= set(FACTORY)


def test_the_factory_builds_the_causal_schemes_the_bench_timed():
    alibi, t5 = (bench_attention._scheme(name, 4) for name in bench_attention.SCHEMES)
    assert type(alibi) is ALiBi and alibi.extra_repr() == ALiBi(4).extra_repr()
    assert type(t5) is T5RelativeBias and t5.extra_repr() == T5RelativeBias(4, bidirectional=False).extra_repr()


def test_rows_keep_their_names():
    """Stored rows and targets say ``t5``, not the factory's ``t5_bias``."""
    assert [bench_attention._label(name) for name in bench_attention.SCHEMES] == ["alibi", "t5"]
    row = bench_attention._row(
        ("t5_bias", None, 4096, "train", "posembed fused"),
        {"median_ms": 2.0},
        {("t5_bias", None, 4096, "train", bench_attention.BASELINE): {"median_ms": 4.0}},
        bench_attention.as_device("cpu"),
    )
    assert row.case == "t5 T=4096 training step" and row.speedup == 2.0
