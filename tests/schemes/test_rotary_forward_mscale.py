"""``forward_mscale``: a per-call factor in place of the attention factor, the init's frequencies kept (PhiMoE's
forward).

Parity with PhiMoE's own rotary embedding is the catalogue's (tests/interop/test_rope_catalogue.py, phimoe yarn,
llama3 and longrope) and tests/interop/test_rope_transformers_rules.py; here the arithmetic and the bad inputs.
"""

import pytest
import torch

from posembed import LongRoPERotary, RotaryEmbedding, YaRNRotary
from posembed.schemes.factory import build_from_kwargs
from tests.helpers import assert_close

D = 16


def test_the_factor_switches_at_mscale_switch_and_replaces_the_attention_factor():
    rope = YaRNRotary(D, factor=4.0, original_max_len=32, forward_mscale=(1.25, 1.5), mscale_switch=32)
    plain = YaRNRotary(D, factor=4.0, original_max_len=32)
    assert rope.attention_scaling == plain.attention_scaling != 1.0  # the init's factor, not folded in
    for length, scale in ((32, 1.25), (33, 1.5)):
        positions = torch.arange(length)
        expected = [c / plain.attention_scaling * scale for c in plain.cos_sin(positions)]
        for ours, theirs in zip(rope.cos_sin(positions), expected):
            assert_close(ours, theirs, atol=1e-6, rtol=1e-6)


def test_longrope_keeps_its_short_factors_at_every_length():
    short, long = [1.0] * (D // 2), [float(i + 1) for i in range(D // 2)]
    kept = LongRoPERotary(D, short_factor=short, long_factor=long, original_max_len=16, forward_mscale=(1.0, 1.0),
                          mscale_switch=16)  # fmt: skip
    positions = torch.arange(40)
    assert_close(kept.cos_sin(positions)[0], RotaryEmbedding(D).cos_sin(positions)[0])  # short_factor is all ones
    switching = LongRoPERotary(D, short_factor=short, long_factor=long, original_max_len=16)
    assert not torch.allclose(switching.cos_sin(positions)[0], kept.cos_sin(positions)[0])


def test_queries_and_keys_take_the_factor_of_the_longest_of_them():
    rope = RotaryEmbedding(D, forward_mscale=(1.0, 2.0), mscale_switch=8)
    q, k = torch.randn(1, 2, 4, D), torch.randn(1, 2, 4, D)
    rq, rk = rope(q, k, position_ids=torch.arange(4), k_position_ids=torch.arange(10, 14))
    plain_q, plain_k = RotaryEmbedding(D)(q, k, position_ids=torch.arange(4), k_position_ids=torch.arange(10, 14))
    assert_close(rq, 2.0 * plain_q)
    assert_close(rk, 2.0 * plain_k)
    assert rope.cache_size == 0  # the factor depends on the call: no cache


def test_the_factory_builds_it_and_repr_names_it():
    rope = build_from_kwargs("rope", {"head_dim": D, "forward_mscale": [1.1, 1.2], "mscale_switch": 64})
    assert rope.forward_mscale == (1.1, 1.2) and rope.mscale_switch == 64
    assert "forward_mscale=(1.1, 1.2), mscale_switch=64" in repr(rope)
    with pytest.raises(ValueError, match="takes no argument 'forward_mscale'"):
        build_from_kwargs("xpos", {"head_dim": D, "forward_mscale": [1.1, 1.2]})


@pytest.mark.parametrize("scales, switch, error, match", [
    ((1.1, 1.2), None, ValueError, "forward_mscale needs mscale_switch"),
    (None, 16, ValueError, "mscale_switch=16 is given without forward_mscale"),
    ((1.1,), 16, ValueError, r"forward_mscale must be \(short, long\), two numbers; got \(1.1,\)"),
    ((1.1, 0.0), 16, ValueError, r"forward_mscale must be positive, got \(1.1, 0.0\)"),
    ((1.1, float("nan")), 16, ValueError, "forward_mscale must be a finite number >= 0.0, got nan"),
    ((1.1, "2"), 16, TypeError, "forward_mscale must be a number, got '2'"),
    ((1.1, 1.2), 0, ValueError, "mscale_switch must be positive, got 0"),
    ((1.1, 1.2), 16.0, TypeError, "mscale_switch must be an int, got 16.0"),
])  # fmt: skip
def test_bad_forward_mscale_is_refused_with_its_value(scales, switch, error, match):
    with pytest.raises(error, match=match):
        RotaryEmbedding(D, forward_mscale=scales, mscale_switch=switch)
