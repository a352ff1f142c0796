"""RoPE and sinusoid tables stay float32 under ``.half()`` / ``.to(torch.bfloat16)`` with no
``_apply`` override: the outputs equal those of a scheme built fresh in float32 (what the old
rebuild-on-``_apply`` gave, bit for bit; checked against it when this was written)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from posembed.schemes.absolute.sinusoidal import ScaledSinusoidal, Sinusoidal
from posembed.schemes.fp32_buffers import Fp32Buffer
from posembed.schemes.rotary.longrope import LongRoPERotary
from posembed.schemes.rotary.rope import RotaryEmbedding
from posembed.schemes.rotary.xpos import XPos
from posembed.schemes.rotary.yarn import YaRNRotary

ROTARY = {
    "rope": lambda: RotaryEmbedding(head_dim=32, max_len=64),
    "rope_short_cache": lambda: RotaryEmbedding(head_dim=32, max_len=16),
    "xpos": lambda: XPos(head_dim=32),
    "yarn": lambda: YaRNRotary(head_dim=32, factor=4.0, original_max_len=16),
    "longrope": lambda: LongRoPERotary(
        head_dim=32, short_factor=[1.0] * 16, long_factor=[2.0] * 16, original_max_len=16, max_len=64
    ),
}
SINUSOIDAL = {
    "sinusoidal": lambda: Sinusoidal(32),
    "sinusoidal_cache": lambda: Sinusoidal(32, max_len=20),
    "scaled": lambda: ScaledSinusoidal(32, max_len=20),
}
CASTS = {
    "half": (lambda m: m.half(), torch.float16),
    "bf16": (lambda m: m.to(torch.bfloat16), torch.bfloat16),
    "round trip": (lambda m: m.half().float(), torch.float32),
}


@pytest.mark.parametrize("family", [ROTARY, SINUSOIDAL])
def test_no_scheme_overrides_apply(family):
    for make in family.values():
        assert type(make())._apply is nn.Module._apply


@pytest.mark.parametrize("cast", CASTS)
@pytest.mark.parametrize("name", ROTARY)
def test_a_cast_rotary_scheme_rotates_with_its_float32_tables(name, cast):
    to, dtype = CASTS[cast]
    generator = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 2, 40, 32, generator=generator).to(dtype) for _ in range(2))
    fresh, cast_scheme = ROTARY[name](), to(ROTARY[name]())
    for (buffer, kept), (_, built) in zip(cast_scheme.named_buffers(), fresh.named_buffers()):
        assert kept.dtype == built.dtype and torch.equal(kept, built), buffer
    assert cast_scheme.inv_freq.dtype == torch.float32
    for a, b in zip(cast_scheme(q, k, torch.arange(40)), fresh(q, k, torch.arange(40))):
        assert a.dtype == dtype and torch.equal(a, b)


@pytest.mark.parametrize("cast", CASTS)
@pytest.mark.parametrize("name", SINUSOIDAL)
def test_a_cast_sinusoid_follows_the_dtype_for_its_output_only(name, cast):
    to, dtype = CASTS[cast]
    torch.manual_seed(0)
    fresh = SINUSOIDAL[name]()
    torch.manual_seed(0)
    cast_scheme = to(SINUSOIDAL[name]())
    table = cast_scheme.sinusoidal if name == "scaled" else cast_scheme
    assert table.dtype == dtype and table.inv_freq.dtype == torch.float32
    positions = torch.arange(30)[None]  # past the 20-row cache too
    out = cast_scheme(positions)
    if name == "scaled":  # the fp32 table cast, times the cast scale parameter
        expected = fresh.sinusoidal(positions).to(dtype) * cast_scheme.scale
    else:
        expected = fresh(positions).to(dtype)
    assert out.dtype == dtype and torch.equal(out, expected)
    assert f"dtype={dtype}" in repr(table)


def test_the_tables_move_with_to_and_survive_to_empty():
    scheme = RotaryEmbedding(head_dim=16, max_len=8, device="meta")
    assert scheme.inv_freq.is_meta and scheme.cos_cached.is_meta
    scheme.to_empty(device="cpu")
    scheme.reset_parameters()
    fresh = RotaryEmbedding(head_dim=16, max_len=8)
    assert torch.equal(scheme.cos_cached, fresh.cos_cached) and torch.equal(scheme.inv_freq, fresh.inv_freq)
    assert scheme.state_dict() == {}  # non-persistent: rebuilt from the settings, never saved


def test_a_float32_buffer_refuses_another_dtype():
    with pytest.raises(TypeError, match=r"RotaryEmbedding.inv_freq is a float32 buffer, got a torch.float16 tensor"):
        RotaryEmbedding(head_dim=16).inv_freq = torch.zeros(8, dtype=torch.float16)
    assert isinstance(RotaryEmbedding.inv_freq, Fp32Buffer)
