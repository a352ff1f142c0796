"""Compiled FlexAttention off the CPU: narrow heads never reach it, and its kernels compile once.

The CUDA decisions run on the CPU with the device policy mocked (``cpu_tuned`` seen as False,
the same tensors), never the computation: the padded-head path is compared with the eager
reference on the CPU, and compile counts come from a counting dynamo backend.
"""

from __future__ import annotations

import logging

import pytest
import torch

from posembed._utils.logging import forget_logged
from posembed.nn.attention import backends as attention_backends
from posembed.nn.attention.backends import AttentionInputs, choose_backend, eager_attention, flex_attention
from posembed.nn.attention.layer import SelfAttention
from tests.helpers import assert_close

LOGGER = "posembed.nn.attention.backends"


def _alibi(heads: int, causal: bool = True):
    from posembed.schemes.bias.alibi import ALiBi

    return ALiBi(heads, symmetric=not causal)


def _inputs(head_dim: int, length: int = 7, *, value_dim: int | None = None, scheme=None, padded: bool = False):
    heads = 2
    q, k = torch.randn(2, heads, length, head_dim), torch.randn(2, heads, length, head_dim)
    v = torch.randn(2, heads, length, value_dim or head_dim)
    mask = None
    if padded:
        mask = torch.ones(2, length, dtype=torch.bool)
        mask[1, -2:] = False  # right padding
    scheme = _alibi(heads) if scheme is None else scheme
    return AttentionInputs(
        q, k, v, scale=head_dim**-0.5, causal=True, positions=torch.arange(length), key_mask=mask, scheme=scheme
    )


@pytest.fixture
def as_cuda(monkeypatch):
    """The device policy sees every device as CUDA-like (not CPU-tuned); tensors stay on the CPU."""
    monkeypatch.setattr(attention_backends, "cpu_tuned", lambda device: False)
    forget_logged()
    yield
    forget_logged()


# --- heads narrower than 16 channels ------------------------------------------------------------


def test_flex_head_floor_follows_the_device_policy(as_cuda, monkeypatch) -> None:
    assert attention_backends.flex_head_floor(torch.device("cpu")) == 16  # mocked: seen as CUDA
    monkeypatch.setattr(attention_backends, "cpu_tuned", lambda device: True)
    assert attention_backends.flex_head_floor(torch.device("cpu")) == 1


def test_auto_never_hands_compiled_flex_a_narrow_head(as_cuda, monkeypatch, caplog) -> None:
    """auto on CUDA: E=8 takes SDPA up to the threshold and padded flex above it, each logged once;
    E=16 keeps flex at every length."""
    monkeypatch.setattr(attention_backends, "AUTO_SDPA_MAX_LENGTH", 6)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            assert choose_backend("auto", _inputs(8, length=6), True, training=False) == "sdpa"
            assert choose_backend("auto", _inputs(8, length=7), True, training=False) == "flex"
            assert choose_backend("auto", _inputs(4, length=7), True, training=False) == "flex"
        assert choose_backend("auto", _inputs(16, length=6), True, training=False) == "flex"
        assert choose_backend("auto", _inputs(16, length=7), True, training=False) == "flex"
        # v narrower than q/k (TUPE doubles q and k only) is refused the same way
        assert choose_backend("auto", _inputs(16, length=6, value_dim=8), True, training=False) == "sdpa"
    messages = [r.getMessage() for r in caplog.records]
    to_sdpa = [m for m in messages if "using 'sdpa'" in m]
    padded = [m for m in messages if "zero-padded to 16" in m]
    assert len(to_sdpa) == 2 and len(padded) == 2, messages  # one per distinct reason (E=8, E=4 / Ev=8)
    assert "at least 16 channels, got q/k width E=8 and v width Ev=8" in to_sdpa[0]
    assert "up to T=6" in to_sdpa[0]
    assert any("E=4 and v width Ev=4" in m for m in padded)


def test_explicit_flex_pads_only_when_compiled(as_cuda, caplog) -> None:
    inp = _inputs(8)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert choose_backend("flex", inp, True, training=False) == "flex"
        assert "zero-padded" not in caplog.text  # uncompiled flex takes any width
        assert choose_backend("flex", inp, True, training=False, compile_flex=True) == "flex"
    assert "zero-padded to 16 channels" in caplog.text


def test_the_cpu_keeps_its_rule(caplog) -> None:
    """Unmocked, the CPU never pads and never picks flex from auto (the CPU-tuned backends serve it)."""
    forget_logged()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert choose_backend("auto", _inputs(8), True, training=False) == "sdpa"
        assert choose_backend("flex", _inputs(8), True, training=False, compile_flex=True) == "flex"
    assert "zero-padded" not in caplog.text
    assert attention_backends.flex_head_floor(torch.device("cpu")) == 1


def _recording_compiled_flex(monkeypatch) -> list[tuple[int, int, int]]:
    """Replace the compiled kernel by the eager one, recording the widths it receives."""
    from torch.nn.attention.flex_attention import flex_attention as eager_flex

    widths: list[tuple[int, int, int]] = []

    def kernel(q, k, v, **kwargs):
        widths.append((q.shape[-1], k.shape[-1], v.shape[-1]))
        return eager_flex(q, k, v, **kwargs)

    monkeypatch.setattr(attention_backends, "_compiled_flex", lambda: kernel)
    return widths


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_compiled_flex_gets_padded_heads_and_equals_eager(as_cuda, monkeypatch, padded: bool) -> None:
    """What reaches the compiled kernel is 16 wide; q . k, the scale and the output are the
    unpadded ones (ALiBi and T5 bias, with and without a padding mask)."""
    from posembed.schemes.bias.t5 import T5RelativeBias

    widths = _recording_compiled_flex(monkeypatch)
    for scheme in (_alibi(2), T5RelativeBias(2, num_buckets=8, max_distance=16, bidirectional=False, init_std=0.5)):
        inp = _inputs(8, scheme=scheme, padded=padded)
        with torch.no_grad():
            out = flex_attention(inp, compiled=True)
        assert out.shape == (2, 2, 7, 8)
        assert_close(out, eager_attention(inp), atol=1e-5, rtol=1e-5, msg=type(scheme).__name__)
    assert widths == [(16, 16, 16)] * 2


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_padded_heads_keep_uneven_widths_and_their_scale(as_cuda, monkeypatch) -> None:
    """q/k 12 wide and v 4 wide (TUPE-like): both padded to 16, the output 4 wide, the scale
    the caller's (not 16 ** -0.5)."""
    widths = _recording_compiled_flex(monkeypatch)
    base = _inputs(12, value_dim=4)
    inp = AttentionInputs(base.q, base.k, base.v, scale=0.3, causal=True, positions=base.positions, scheme=base.scheme)
    with torch.no_grad():
        out = flex_attention(inp, compiled=True)
    assert widths == [(16, 16, 16)]
    assert out.shape == (2, 2, 7, 4)
    assert_close(out, eager_attention(inp), atol=1e-5, rtol=1e-5)


def test_padded_heads_are_zero_channels() -> None:
    inp = attention_backends._pad_heads(_inputs(8, value_dim=4), 16)
    assert inp.q.shape[-1] == inp.k.shape[-1] == inp.v.shape[-1] == 16
    assert torch.count_nonzero(inp.q[..., 8:]) == 0 and torch.count_nonzero(inp.v[..., 4:]) == 0
    assert inp.scale == 8**-0.5


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_self_attention_with_narrow_heads_on_cuda_runs_padded_flex(as_cuda, monkeypatch) -> None:
    """The layer end to end under the mocked policy: auto picks flex above the threshold, the
    compiled kernel sees 16-wide heads, the output equals the eager backend's."""
    widths = _recording_compiled_flex(monkeypatch)
    monkeypatch.setattr(attention_backends, "AUTO_SDPA_MAX_LENGTH", 4)
    attn = SelfAttention(16, 2, scheme=_alibi(2), causal=True).eval()  # head dim 8
    x = torch.randn(2, 6, 16)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[0, :2] = 0
    with torch.no_grad():
        out = attn(x, attention_mask=mask)
        assert attn.backend_for(x, attention_mask=mask) == "flex"
        attn.backend = "eager"
        expected = attn(x, attention_mask=mask)
    assert widths == [(16, 16, 16)]
    assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_a_narrow_head_decoder_trains_off_compiled_flex_under_the_cuda_policy(as_cuda, monkeypatch) -> None:
    """The case that crashed on CUDA (the training bench's ALiBi Decoder, heads of 8): with the
    CUDA policy mocked, training steps dispatch to SDPA and never reach the compiled kernel."""
    from posembed.bench import training as bench_training

    def refuse(*args, **kwargs):
        raise AssertionError("compiled FlexAttention reached with a head narrower than 16")

    monkeypatch.setattr(attention_backends, "_compiled_flex", lambda: refuse)
    chosen = []
    choose = attention_backends.choose_backend

    def spy(*args, **kwargs):
        chosen.append(choose(*args, **kwargs))
        return chosen[-1]

    import posembed.nn.attention.layer as attention

    monkeypatch.setattr(attention, "choose_backend", spy)
    monkeypatch.setattr(bench_training, "CONFIG", {"depth": 1, "heads": 2, "dim": 16, "block": 8, "batch": 2})
    rows = bench_training.run(quick=True, repeats=1, device="cpu")
    assert all(row.median_ms for row in rows), rows
    assert chosen and set(chosen) == {"sdpa"}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("head_dim", [4, 8])
def test_narrow_heads_train_on_cuda_like_eager(monkeypatch, head_dim: int) -> None:
    """On a GPU: auto takes SDPA at short lengths and the really compiled, padded flex above the
    threshold (here lowered to 4), forward and backward equal to the eager backend's."""
    monkeypatch.setattr(attention_backends, "AUTO_SDPA_MAX_LENGTH", 4)
    device = torch.device("cuda")
    heads = 2
    attn = SelfAttention(heads * head_dim, heads, scheme=_alibi(heads), causal=True, device=device)
    results = {}
    for length, backend in ((4, "auto"), (24, "auto"), (24, "eager")):
        attn.backend = backend
        attn.zero_grad(set_to_none=True)
        x = torch.randn(
            2, length, heads * head_dim, device=device, generator=torch.Generator(device).manual_seed(length)
        )
        x.requires_grad_()
        out = attn(x)
        out.square().sum().backward()
        grads = (x.grad.detach(), attn.qkv_proj.weight.grad.detach())
        results[length, backend] = (attn.backend_for(x), out.detach(), *grads)
    assert results[4, "auto"][0] == "sdpa" and results[24, "auto"][0] == "flex"
    for got, want in zip(results[24, "auto"][1:], results[24, "eager"][1:]):
        assert_close(got, want, atol=1e-4, rtol=1e-4)
