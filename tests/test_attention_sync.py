"""Attention reads nothing back to the host in its forward and backward (issue: GPU stalls).

On the CPU every read of a tensor's value into Python (``item``, ``tolist``, ``bool``, ``int``,
``float``, ``index``) is made to raise during the call, for every backend and scheme kind, with
and without padding; on CUDA the same work runs under ``torch.cuda.set_sync_debug_mode("error")``.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from posembed.nn.attention import backends as attention_backends
from posembed.nn.attention.layer import SelfAttention

DIM, HEADS, LENGTH = 32, 2, 9
BACKENDS = ("sdpa", "eager", "chunked", "fused")


def _schemes() -> dict:
    from posembed.schemes.bias.alibi import ALiBi
    from posembed.schemes.bias.kerple import Kerple
    from posembed.schemes.bias.nope import NoPE
    from posembed.schemes.bias.t5 import T5RelativeBias
    from posembed.schemes.rotary.rope import RotaryEmbedding

    return {
        "none": lambda: None,
        "rope": lambda: RotaryEmbedding(DIM // HEADS),
        "nope": lambda: NoPE(),
        "alibi": lambda: ALiBi(HEADS),
        "t5_bias": lambda: T5RelativeBias(HEADS, num_buckets=8, max_distance=16, bidirectional=False),
        "kerple": lambda: Kerple(HEADS),
    }


class HostRead(AssertionError):
    """A tensor's value was read back to Python."""


@contextlib.contextmanager
def no_host_reads():
    names = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")
    saved = {name: getattr(torch.Tensor, name) for name in names}

    def refuse(name):
        def method(self, *args, **kwargs):
            raise HostRead(f"host read: Tensor.{name}")

        return method

    try:
        for name in names:
            setattr(torch.Tensor, name, refuse(name))
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


def test_the_guard_catches_a_host_read() -> None:
    with pytest.raises(HostRead, match=r"Tensor\.item"), no_host_reads():
        torch.ones(1).sum().item()
    with pytest.raises(HostRead, match=r"Tensor\.__bool__"), no_host_reads():
        bool(torch.ones(1) > 0)
    assert torch.ones(1).item() == 1.0  # restored


def _mask(batch: int, device=None) -> torch.Tensor:
    mask = torch.ones(batch, LENGTH, dtype=torch.long, device=device)
    mask[1, -3:] = 0  # right padding
    mask[0, :2] = 0  # left padding
    return mask


def _forward_backward(attn: SelfAttention, padded: bool, device=None) -> None:
    x = torch.randn(2, LENGTH, DIM, device=device, requires_grad=True)
    mask = _mask(2, device) if padded else None
    out = attn(x, attention_mask=mask)
    out.square().sum().backward()


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_and_backward_read_nothing_back(backend: str, padded: bool) -> None:
    for factory in _schemes().values():
        attn = SelfAttention(DIM, HEADS, scheme=factory(), causal=True, backend=backend, device="cpu")
        _forward_backward(attn, padded)  # warm: anything done once per shape happens here
        with no_host_reads():
            _forward_backward(attn, padded)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_flex_forward_reads_nothing_back(padded: bool) -> None:
    """FlexAttention's score_mods and block masks (uncompiled forward on the CPU).

    Dynamo is reset first: torch runs the uncompiled flex through its own eager-backend compile,
    and once earlier tests of the process have used up that frame's recompile budget, torch's
    eager fallback reads values back by itself, which is not posembed's code under test.
    """
    torch._dynamo.reset()
    for name, factory in _schemes().items():
        attn = SelfAttention(DIM, HEADS, scheme=factory(), causal=True, backend="flex", device="cpu").eval()
        mask = _mask(2) if padded else None
        x = torch.randn(2, LENGTH, DIM)
        with torch.no_grad():
            attn(x, attention_mask=mask)  # warm: once per shape
            with no_host_reads():
                attn(x, attention_mask=mask)
            assert attn.backend_for(x, attention_mask=mask) == "flex", name


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_the_cuda_dispatch_reads_nothing_back(monkeypatch) -> None:
    """The auto rule as on CUDA (device policy mocked), narrow heads and padded flex included."""
    from torch.nn.attention.flex_attention import flex_attention

    traced = torch.compile(flex_attention, backend="eager", dynamic=False)  # dynamo's guards, no kernel built
    monkeypatch.setattr(attention_backends, "cpu_tuned", lambda device: False)
    monkeypatch.setattr(attention_backends, "_compiled_flex", lambda: traced)
    monkeypatch.setattr(attention_backends, "AUTO_SDPA_MAX_LENGTH", LENGTH - 1)
    for name in ("alibi", "t5_bias"):
        attn = SelfAttention(DIM, HEADS, scheme=_schemes()[name](), causal=True, device="cpu").eval()  # head dim 16
        narrow = SelfAttention(DIM, 4, scheme=_schemes()[name]().__class__(4), causal=True, device="cpu").eval()
        for guard in (contextlib.nullcontext, no_host_reads):  # warm (traces once per shape), then guarded
            with torch.no_grad(), guard():
                for layer in (attn, narrow):
                    layer(torch.randn(2, LENGTH, DIM), attention_mask=_mask(2))
                    layer(torch.randn(2, LENGTH, DIM))
        with torch.no_grad():
            x = torch.randn(2, LENGTH, DIM)
            assert attn.backend_for(x) == narrow.backend_for(x) == "flex"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("backend", ["auto", "sdpa", "eager", "chunked", "flex"])
def test_attention_on_cuda_never_synchronises(backend: str) -> None:
    """Forward and backward of every scheme kind under sync debug mode "error", after a warm-up
    call (compiles and anything done once per shape); flex compiled where auto picks it."""
    device = torch.device("cuda")
    for name, factory in _schemes().items():
        scheme = factory()
        attn = SelfAttention(
            DIM, HEADS, scheme=scheme, causal=True, backend=backend, compile_flex=backend == "flex", device=device
        )
        for padded in (False, True):
            _forward_backward(attn, padded, device)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                _forward_backward(attn, padded, device)
            finally:
                torch.cuda.set_sync_debug_mode("default")
            assert next(attn.parameters()).grad.device.type == "cuda", name


def _position_dependent_rotaries() -> dict:
    """The rotary variants whose frequencies or factor a call's largest position chooses."""
    from posembed.schemes.rotary.longrope import LongRoPERotary
    from posembed.schemes.rotary.rope import RotaryEmbedding
    from posembed.schemes.rotary.scaling import DynamicNTKRotary

    return {
        "dynamic_ntk": DynamicNTKRotary(16, factor=2.0, original_max_len=8),
        "longrope": LongRoPERotary(16, short_factor=[1.0] * 8, long_factor=[2.0] * 8, original_max_len=8, factor=2.0),
        "forward_mscale": RotaryEmbedding(16, forward_mscale=(1.1, 1.3), mscale_switch=8),  # PhiMoE's
    }


@pytest.mark.parametrize("name", sorted(_position_dependent_rotaries()))
def test_a_rotary_whose_call_positions_choose_its_frequencies_reads_nothing_back(name: str) -> None:
    """The choice is made on the device (``torch.where``), at explicit positions on either side of the switch."""
    scheme = _position_dependent_rotaries()[name]
    q = torch.randn(1, 2, 12, 16)
    for length in (8, 12):  # at the switch, past it
        positions = torch.arange(length)[None]
        scheme(q[..., :length, :], q[..., :length, :], position_ids=positions)  # warm
        with no_host_reads():
            scheme(q[..., :length, :], q[..., :length, :], position_ids=positions)
            scheme.cos_sin(positions)


def test_the_forward_mscale_is_chosen_by_the_call_length() -> None:
    scheme = _position_dependent_rotaries()["forward_mscale"]
    assert scheme.cos_sin(torch.arange(8))[0][0, 0].item() == pytest.approx(1.1)  # length 8: the short factor
    assert scheme.cos_sin(torch.arange(9))[0][0, 0].item() == pytest.approx(1.3)  # 9 > 8: the long one
