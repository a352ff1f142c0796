"""Sinusoidal and scaled sinusoidal positions: reference parity, paper values, invariances, errors."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from positional_encodings.torch_encodings import PositionalEncoding1D
from x_transformers.x_transformers import ScaledSinusoidalEmbedding

from posembed import ScaledSinusoidal, Sinusoidal
from posembed.schemes.absolute.sinusoidal import sinusoid_inv_freq, sinusoidal_table
from posembed.schemes.positions import default_positions, positions_with_offset
from tests.helpers import assert_close, max_abs_diff

#: the reference libraries compute base^(-2i/C) in fp32 with a few ulps of error; ours is
#: correctly rounded. Relative bound on the difference, and the angle error it implies at position p.
FREQ_RTOL = 4 * 2.0**-23


def angle_atol(max_position: int) -> float:
    """Bound on |sin/cos difference| from frequencies FREQ_RTOL apart (every w_i <= 1)."""
    return max_position * FREQ_RTOL + 1e-6


def phi(dim: int, offsets: int, x: int = 0) -> torch.Tensor:
    """phi(k) = PE(x) . PE(x + k) for k = 0..offsets-1, from the module (dot products in float64)."""
    table = Sinusoidal(dim)(torch.arange(x, x + offsets)).double()  # (offsets, C)
    return table @ table[0]


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    ranks = [t.argsort().argsort().double() for t in (a, b)]
    ranks = [r - r.mean() for r in ranks]
    return float((ranks[0] @ ranks[1]) / (ranks[0].norm() * ranks[1].norm()))


def rotation(dim: int, k: int, layout: str) -> torch.Tensor:
    """M_k with PE(p + k) = M_k PE(p), built from the angle-addition formulas (float64)."""
    w = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    cos, sin = torch.cos(k * w), torch.sin(k * w)
    half = dim // 2
    s, c = (
        (torch.arange(0, dim, 2), torch.arange(1, dim, 2))
        if layout == "interleaved"
        else (torch.arange(half), torch.arange(half, dim))
    )
    m = torch.zeros(dim, dim, dtype=torch.float64)
    m[s, s], m[s, c] = cos, sin  # sin(a + b) = sin a cos b + cos a sin b
    m[c, s], m[c, c] = -sin, cos  # cos(a + b) = cos a cos b - sin a sin b
    return m


# --- parity with the reference libraries -------------------------------------------------------


@pytest.mark.parametrize("dim", [64, 768, 10])
def test_matches_positional_encodings_1d(dim):
    reference = PositionalEncoding1D(dim)
    expected = reference(torch.zeros(1, 512, dim))[0]  # (T, C), interleaved
    # same layout, exactly, given the same frequencies and the same float32 angles
    same = sinusoidal_table(torch.arange(512), dim, inv_freq=reference.inv_freq, angles="fp32")
    assert_close(same, expected, atol=0, rtol=0)
    # our correctly rounded frequencies: within a few ulps, so the full table within the implied bound
    assert_close(sinusoid_inv_freq(dim), reference.inv_freq, atol=0, rtol=FREQ_RTOL)
    actual = Sinusoidal(dim)(torch.arange(512))
    assert_close(actual, expected, atol=angle_atol(511), rtol=0)


@pytest.mark.parametrize("dim", [64, 384])
def test_scaled_matches_x_transformers(dim):
    reference = ScaledSinusoidalEmbedding(dim)
    ours = ScaledSinusoidal(dim, layout="concat")
    assert_close(ours.scale.detach(), reference.scale.detach(), atol=0, rtol=0)
    x = torch.zeros(2, 300, dim)
    expected = reference(x)  # (T, C), [sin | cos] * scale
    assert_close(ours(torch.arange(300)), expected, atol=angle_atol(299) * dim**-0.5, rtol=0)
    shared = sinusoidal_table(torch.arange(300), dim, layout="concat", inv_freq=reference.inv_freq, angles="fp32")
    assert_close(shared * ours.scale, expected, atol=0, rtol=0)
    positions = torch.tensor([7, 0, 4096])
    assert_close(ours(positions), reference(x, pos=positions.float()), atol=angle_atol(4096) * dim**-0.5, rtol=0)


def test_concat_is_a_channel_permutation_of_interleaved():
    positions = torch.randint(0, 5000, (3, 11))
    interleaved = Sinusoidal(32)(positions)
    concat = Sinusoidal(32, layout="concat")(positions)
    order = torch.cat((torch.arange(0, 32, 2), torch.arange(1, 32, 2)))
    assert torch.equal(concat, interleaved[..., order])


# --- exact numbers from REFERENCES.md (d = 768, 128, 64) ---------------------------------------


def test_dot_product_values_d768():
    values = phi(768, 600)
    assert values[0].item() == pytest.approx(384.0, abs=1e-4)
    assert round(values[1].item(), 2) == 373.77


@pytest.mark.parametrize(("dim", "first"), [(768, 43), (128, 11), (64, 5)])
def test_first_non_monotone_offset(dim, first):
    values = phi(dim, 600)
    rising = (values[1:] > values[:-1]).nonzero()  # k with phi(k+1) > phi(k)
    assert int(rising[0]) == first


def test_spearman_of_offset_and_closeness_d768():
    values = phi(768, 512)
    offsets = torch.arange(512, dtype=torch.float64)
    assert spearman(offsets[1:21], values[1:21]) == pytest.approx(-1.0, abs=1e-12)
    assert round(spearman(offsets[1:512], values[1:512]), 3) == -0.984


def test_linear_probe_recovers_position_exactly():
    """Wang & Chen 2020 absolute probe: 5-fold CV linear regression, mean |round(pred) - pos| = 0."""
    table = Sinusoidal(768)(torch.arange(512)).double()  # (T, C)
    features = torch.cat((table, torch.ones(512, 1, dtype=torch.float64)), dim=1)
    target = torch.arange(512, dtype=torch.float64)
    folds = torch.randperm(512, generator=torch.Generator().manual_seed(0)).chunk(5)
    errors = []
    for held_out in folds:
        train = torch.ones(512, dtype=torch.bool)
        train[held_out] = False
        weights = torch.linalg.lstsq(features[train], target[train].unsqueeze(1), driver="gelsy").solution
        prediction = (features[held_out] @ weights).squeeze(1)
        errors.append((prediction.round() - target[held_out]).abs())
    assert torch.cat(errors).mean().item() == 0.0


# --- invariances (hypothesis) ------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(x1=st.integers(0, 1000), x2=st.integers(0, 1000), k=st.integers(0, 300))
def test_dot_product_depends_only_on_offset(x1, x2, k):
    pe = Sinusoidal(128)(torch.tensor([x1, x1 + k, x2, x2 + k])).double()
    assert pe[0] @ pe[1] == pytest.approx(float(pe[2] @ pe[3]), abs=2e-3)
    exact = torch.cos(k * 10000.0 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)).sum()
    assert pe[0] @ pe[1] == pytest.approx(float(exact), abs=2e-3)


@settings(max_examples=30, deadline=None)
@given(pos=st.integers(0, 2000), k=st.integers(0, 500), layout=st.sampled_from(["interleaved", "concat"]))
def test_shift_is_a_fixed_rotation(pos, k, layout):
    """PE(pos + k) = M_k PE(pos) with M_k block-diagonal rotations that do not depend on pos."""
    module = Sinusoidal(64, layout=layout)
    pe = module(torch.tensor([pos, pos + k])).double()
    assert_close(rotation(64, k, layout) @ pe[0], pe[1], atol=angle_atol(2500), rtol=0)


def test_rotation_is_not_the_identity_and_depends_on_offset():
    """Guard: the rotation test above can fail (M_k for a wrong k does not map PE(p) to PE(p + k))."""
    pe = Sinusoidal(64)(torch.tensor([10, 13])).double()
    assert max_abs_diff(rotation(64, 2, "interleaved") @ pe[0], pe[1]) > 0.1


@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 4), length=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_batched_positions_equal_stacked_rows(batch, length, seed):
    positions = torch.randint(0, 10**5, (batch, length), generator=torch.Generator().manual_seed(seed))
    module = Sinusoidal(48)
    assert torch.equal(module(positions), torch.stack([module(row) for row in positions]))


def test_explicit_positions_equal_default_and_offsets_equal_full_table():
    module = Sinusoidal(32)
    full = module(default_positions(40))
    assert torch.equal(module(torch.arange(40)), full)
    assert_close(module(positions_with_offset(8, 32)), full[32:])
    assert_close(module(positions_with_offset(4, torch.tensor([0, 10]))), torch.stack((full[:4], full[10:14])))


def test_cache_equals_computation_on_both_sides_of_max_len():
    cached = Sinusoidal(32, max_len=16)
    plain = Sinusoidal(32)
    assert cached.table.shape == (16, 32)
    assert_close(cached(torch.arange(16)), plain(torch.arange(16)))
    beyond = torch.tensor([[3, 15, 16, 900]])
    assert_close(cached(beyond), plain(beyond))
    assert cached.max_positions is None  # a cache, not a limit


# --- dtypes, devices, module behaviour ---------------------------------------------------------


def test_bf16_output_keeps_fp32_positions():
    positions = torch.tensor([10000, 10001, 65535])
    fp32 = Sinusoidal(768)(positions)
    assert torch.equal(Sinusoidal(768, dtype=torch.bfloat16)(positions), fp32.to(torch.bfloat16))
    moved = Sinusoidal(768).to(torch.bfloat16)
    assert moved.inv_freq.dtype == torch.float32
    assert torch.equal(moved(positions), fp32.to(torch.bfloat16))
    # what goes wrong otherwise: 10000 is not a bf16 number (it rounds to 9984)
    naive = sinusoidal_table(positions.to(torch.bfloat16), 768).to(torch.bfloat16)
    assert max_abs_diff(naive, fp32) > 0.5


def test_module_to_keeps_output_dtype_and_scaled_follows_dtype():
    module = Sinusoidal(8, dtype=torch.float16).to("cpu")
    assert module(torch.arange(3)).dtype == torch.float16
    scaled = ScaledSinusoidal(8).to(torch.bfloat16)
    assert scaled.scale.dtype == torch.bfloat16 and scaled(torch.arange(3)).dtype == torch.bfloat16


def test_no_state_and_meta_device():
    assert dict(Sinusoidal(16, max_len=8).state_dict()) == {}
    assert list(ScaledSinusoidal(16).state_dict()) == ["scale"]
    meta = Sinusoidal(16, max_len=4, device="meta")
    assert meta(torch.arange(6, device="meta")).shape == (6, 16)


def test_meta_init_then_materialise_equals_real_init():
    real = Sinusoidal(16, max_len=8)
    materialised = Sinusoidal(16, max_len=8, device="meta").to_empty(device="cpu")
    assert materialised.table.device.type == "cpu"
    materialised.reset_parameters()  # to_empty leaves memory uninitialised, as for any module
    assert torch.equal(materialised(torch.arange(12)), real(torch.arange(12)))


def test_compiled_equals_eager_without_graph_breaks():
    module = Sinusoidal(16, max_len=8)
    compiled = torch.compile(module, backend="aot_eager", fullgraph=True)
    positions = torch.tensor([[0, 7, 8, 300]])
    assert_close(compiled(positions), module(positions))


def test_scaled_init_gradient_and_reset():
    module = ScaledSinusoidal(64)
    assert module.scale.item() == pytest.approx(64**-0.5)
    positions = torch.arange(10)
    module(positions).sum().backward()
    assert_close(module.scale.grad, Sinusoidal(64)(positions).sum().reshape(1))
    with torch.no_grad():
        module.scale.fill_(3.0)
    module.reset_parameters()
    assert module.scale.item() == pytest.approx(0.125)


def test_extra_repr_and_registry():
    assert repr(Sinusoidal(8, layout="concat", max_len=4)) == (
        "Sinusoidal(dim=8, base=10000, layout='concat', max_len=4, dtype=torch.float32)"
    )
    assert (Sinusoidal.name, ScaledSinusoidal.name) == ("sinusoidal", "scaled_sinusoidal")
    assert Sinusoidal(8).kind.value == "absolute" and not Sinusoidal.extrapolates


def test_other_base_sets_the_longest_wavelength():
    module = Sinusoidal(4, base=100.0)
    assert_close(module.inv_freq, torch.tensor([1.0, 0.1]))  # 100^(-2i/4)
    assert_close(module(torch.tensor([1]))[0], torch.tensor([math.sin(1), math.cos(1), math.sin(0.1), math.cos(0.1)]))


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dim": 7}, ValueError, r"even.*dim=7"),
        ({"dim": 0}, ValueError, r"dim must be positive, got 0"),
        ({"dim": 8.0}, TypeError, r"dim must be an int, got 8.0"),
        ({"dim": 8, "layout": "halves"}, ValueError, r"layout.*'halves'"),
        ({"dim": 8, "base": 1.0}, ValueError, r"base.*> 1.*1.0"),
        ({"dim": 8, "max_len": -2}, ValueError, r"max_len must be positive, got -2"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        Sinusoidal(**kwargs)
    with pytest.raises(error, match=match):
        ScaledSinusoidal(**kwargs)


@pytest.mark.parametrize("cls", [Sinusoidal, ScaledSinusoidal])
def test_bad_positions(cls):
    module = cls(8, max_len=4)
    with pytest.raises(TypeError, match="float32"):
        module(torch.arange(4).float())
    with pytest.raises(ValueError, match=r"-3.*>= 0"):
        module(torch.tensor([0, -3]))
    with pytest.raises(ValueError, match=r"\(T,\) or \(B, T\).*\(1, 2, 3\)"):
        module(torch.zeros(1, 2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match="list"):
        module([0, 1])
