"""Hand-computed values of the position formulas, written to kill the survivors of ``tools/mutate.py``.

Each test states the number a paper or a reference implementation gives, computed here by hand
(or with plain Python), not by the function under test. The mutation run found these gaps:
defaults that no test called, and validation boundaries that no test stood on.
"""

from __future__ import annotations

import math

import pytest
import torch

from posembed.schemes.absolute.sinusoidal import sinusoid_inv_freq, sinusoidal_table
from posembed.schemes.bias.alibi import alibi_bias, alibi_slopes
from posembed.schemes.bias.relative import check_positions, relative_position_fn, relative_positions
from posembed.schemes.bias.t5 import T5RelativeBias, relative_position_bucket
from posembed.schemes.rotary.rope import rope_inv_freq
from tests.helpers import assert_close

# --- RoPE ---------------------------------------------------------------------------------------


def test_rope_inv_freq_default_base_is_10000():
    """Su et al.: theta_i = 10000^(-2i/d); for d = 8: 1, 10^-1, 10^-2, 10^-3."""
    assert_close(rope_inv_freq(8), torch.tensor([1.0, 0.1, 0.01, 0.001]), atol=0, rtol=1e-6)
    assert_close(rope_inv_freq(4, base=100.0), torch.tensor([1.0, 0.1]), atol=0, rtol=1e-6)
    assert rope_inv_freq(2).tolist() == [1.0] and rope_inv_freq(8).dtype == torch.float32


# --- sinusoidal ---------------------------------------------------------------------------------


def test_sinusoid_inv_freq_default_base_is_10000():
    """Vaswani et al.: w_i = 10000^(-2i/C); for C = 8: 1, 10^-1, 10^-2, 10^-3."""
    assert_close(sinusoid_inv_freq(8), torch.tensor([1.0, 0.1, 0.01, 0.001]), atol=0, rtol=1e-7)
    assert_close(sinusoid_inv_freq(4, base=100.0), torch.tensor([1.0, 0.1]), atol=0, rtol=1e-7)


def test_sinusoidal_table_hand_values():
    """Position 2, C = 4: [sin 2, cos 2, sin 0.02, cos 0.02] (interleaved) and [sin, sin | cos, cos] (concat)."""
    expected = [math.sin(2.0), math.cos(2.0), math.sin(0.02), math.cos(0.02)]
    assert_close(sinusoidal_table(torch.tensor([2]), 4)[0], torch.tensor(expected), atol=1e-7, rtol=0)
    concat = [expected[0], expected[2], expected[1], expected[3]]
    assert_close(sinusoidal_table(torch.tensor([2]), 4, layout="concat")[0], torch.tensor(concat), atol=1e-7, rtol=0)


def test_sinusoidal_accepts_any_base_above_one():
    from posembed.schemes.absolute.sinusoidal import Sinusoidal

    assert_close(sinusoid_inv_freq(4, base=1.5), torch.tensor([1.0, 1.5**-0.5]), atol=0, rtol=1e-7)
    assert Sinusoidal(4, base=1.5).base == 1.5
    with pytest.raises(ValueError, match=r"base must be a finite number > 1, got base=1\.0"):
        Sinusoidal(4, base=1.0)


def test_sinusoidal_cache_edge_position_equals_the_formula():
    """Position ``max_len`` is the first one past the cache: computed, never looked up (index error)."""
    from posembed.schemes.absolute.sinusoidal import Sinusoidal

    cached = Sinusoidal(4, max_len=3)
    expected = torch.tensor([[math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)] for p in (2.0, 3.0)])
    assert_close(cached(torch.tensor([2, 3])), expected, atol=1e-7, rtol=0)
    assert_close(cached(torch.tensor([3])), expected[1:], atol=1e-7, rtol=0)


# --- ALiBi --------------------------------------------------------------------------------------


def _paper_slopes(n: int) -> list[float]:
    """Press et al. (fairseq): a geometric sequence from 2^(-8/n) for powers of two, else interleaved."""

    def power_of_two(k):
        return [2.0 ** (-8.0 * (i + 1) / k) for i in range(k)]

    closest = 1 << (n.bit_length() - 1)
    return power_of_two(n) if closest == n else power_of_two(closest) + power_of_two(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize(
    "heads, expected",
    [
        (1, [2.0**-8]),
        (2, [2.0**-4, 2.0**-8]),
        (3, [2.0**-4, 2.0**-8, 2.0**-2]),
        (8, [2.0**-k for k in range(1, 9)]),
        (12, [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]),
    ],
)
def test_alibi_slopes_hand_values(heads, expected):
    assert alibi_slopes(heads) == pytest.approx(expected, rel=1e-12)
    assert alibi_slopes(heads) == pytest.approx(_paper_slopes(heads), rel=1e-12)


def test_alibi_bias_hand_values():
    slopes = torch.tensor([0.5, 0.25])
    relative = torch.tensor([[0, 2], [-3, 0]])
    assert alibi_bias(slopes, relative, symmetric=False).tolist() == [
        [[0.0, 1.0], [-1.5, 0.0]],
        [[0.0, 0.5], [-0.75, 0.0]],
    ]
    assert alibi_bias(slopes, relative, symmetric=True).tolist() == [
        [[0.0, -1.0], [-1.5, 0.0]],
        [[0.0, -0.5], [-0.75, 0.0]],
    ]


# --- T5 buckets ---------------------------------------------------------------------------------


def test_t5_buckets_hand_values():
    """num_buckets 8, max_distance 16. Bidirectional: 4 per sign, exact below 2, then log-spaced:
    d=2 -> 2, d=4 -> 2 + floor(log(2)/log(8) * 2) = 2, d=8 -> 3, d>=16 -> 3 (clamped).
    Keys after the query add 4. Causal: 8 buckets for the past, exact below 4, future -> 0."""
    relative = torch.tensor([-20, -8, -4, -2, -1, 0, 1, 2, 8, 20])
    bidirectional = relative_position_bucket(relative, bidirectional=True, num_buckets=8, max_distance=16)
    assert bidirectional.tolist() == [3, 3, 2, 2, 1, 0, 5, 6, 7, 7]
    causal = relative_position_bucket(relative, bidirectional=False, num_buckets=8, max_distance=16)
    # d=4 -> 4, d=8 -> 4 + floor(log(2)/log(4) * 4) = 6, d=20 -> clamped to 7
    assert causal.tolist() == [7, 6, 4, 2, 1, 0, 0, 0, 0, 0]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_buckets": 4, "max_distance": 2},  # the smallest bidirectional table: 2 buckets a side, 1 exact
        {"num_buckets": 6, "max_distance": 2},
        {"num_buckets": 2, "max_distance": 2, "bidirectional": False},  # the smallest causal table
        {"num_buckets": 8, "max_distance": 5, "bidirectional": False},  # just past the 4 exact buckets
        {"num_buckets": 8, "max_distance": 3},  # bidirectional: 2 exact buckets
    ],
)
def test_t5_smallest_valid_configurations_are_accepted(kwargs):
    scheme = T5RelativeBias(1, **kwargs)
    assert scheme.weight.shape == (kwargs["num_buckets"], 1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_buckets": 2, "max_distance": 8}, r"num_buckets=2: a bidirectional T5 bias .* even and >= 4"),
        ({"num_buckets": 5, "max_distance": 8}, r"num_buckets=5: a bidirectional T5 bias .* even and >= 4"),
        (
            {"num_buckets": 1, "max_distance": 8, "bidirectional": False},
            r"num_buckets=1: a causal T5 bias needs num_buckets >= 2",
        ),
        (
            {"num_buckets": 8, "max_distance": 4, "bidirectional": False},
            r"max_distance=4 must exceed the 4 exact buckets \(num_buckets=8, bidirectional=False\)",
        ),
        ({"num_buckets": 8, "max_distance": 2}, r"max_distance=2 must exceed the 2 exact buckets"),
    ],
)
def test_t5_configurations_past_the_boundary_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T5RelativeBias(1, **kwargs)
    with pytest.raises(TypeError, match=r"bidirectional must be a bool, got 1"):
        T5RelativeBias(1, num_buckets=8, max_distance=8, bidirectional=1)


# --- relative positions -------------------------------------------------------------------------


def test_relative_positions_hand_values():
    q, k = torch.tensor([5, 7]), torch.tensor([0, 5, 9])
    assert relative_positions(q, k).tolist() == [[-5, 0, 4], [-7, -2, 2]]  # k - q
    fn = relative_position_fn(q, k)
    assert int(fn(torch.tensor(0), torch.tensor(1), torch.tensor(2))) == 2
    batched = relative_position_fn(torch.tensor([[0, 1], [3, 4]]), torch.tensor([[0, 1], [9, 9]]))
    assert int(batched(torch.tensor(1), torch.tensor(0), torch.tensor(1))) == 6  # row 1: 9 - 3
    assert relative_positions(torch.tensor([[1, 2]]), torch.tensor([0, 4])).tolist() == [[[-1, 3], [-2, 2]]]


@pytest.mark.parametrize(
    "q, k, error, match",
    [
        ([0, 1], torch.arange(2), TypeError, "q_positions must be a torch.Tensor, got list"),
        (
            torch.arange(2),
            torch.zeros(1, 2, 3, dtype=torch.long),
            ValueError,
            r"k_positions must have shape \(T,\) or \(B, T\)",
        ),
        (
            torch.zeros(2),
            torch.arange(2),
            TypeError,
            r"q_positions must hold integers \(torch.long\), got dtype torch.float32",
        ),
        (torch.arange(2), torch.ones(2, dtype=torch.bool), TypeError, "k_positions must hold integers"),
        (
            torch.zeros(2, 3, dtype=torch.long),
            torch.zeros(4, 3, dtype=torch.long),
            ValueError,
            "batch size 2 but k_positions",
        ),
    ],
)
def test_check_positions_errors(q, k, error, match):
    with pytest.raises(error, match=match):
        check_positions(q, k)


def test_check_positions_accepts_real_positions_only_when_asked():
    check_positions(torch.zeros(3), torch.zeros(3), integer=False)
    check_positions(torch.zeros(2, 3, dtype=torch.long), torch.arange(5))  # 1-D keys shared by the batch
    with pytest.raises(TypeError, match=r"must hold real numbers, got dtype torch.complex64"):
        check_positions(torch.zeros(3, dtype=torch.complex64), torch.zeros(3), integer=False)


def test_sinusoidal_empty_positions_and_meta_buffers():
    from posembed.schemes.absolute.sinusoidal import Sinusoidal

    assert Sinusoidal(4, max_len=3)(torch.zeros(0, dtype=torch.long)).shape == (0, 4)
    assert Sinusoidal(4, max_len=3)(torch.zeros(2, 0, dtype=torch.long)).shape == (2, 0, 4)
    meta = Sinusoidal(4, max_len=3, device="meta")  # the buffers are built where they were asked for
    assert meta.inv_freq.device.type == "meta" and meta.table.device.type == "meta"
    assert Sinusoidal(4, max_len=3).table.device.type == "cpu"
