"""posembed._utils.devices: the device resolver, and every CPU-tuned dispatch decision for other devices.

No CUDA is needed: the CUDA decisions are checked on ``meta`` tensors (device type ``meta``,
not ``cpu``) or with the device type mocked; the tests that run on a GPU are marked ``cuda``.
"""

from __future__ import annotations

import pytest
import torch

import posembed._utils.devices as devices
from posembed._utils.devices import autocast_dtype, cpu_tuned, resolve_device
from posembed.errors import DeviceError
from posembed.nn.attention import backends as attention_backends
from posembed.nn.attention.backends import AttentionInputs, choose_backend
from posembed.nn.embedding.block import TransformerEmbeddings
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.bias.alibi import ALiBi
from tests.helpers import assert_close

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _cuda_present(monkeypatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


@pytest.mark.parametrize("spec", ["auto", None])
def test_auto_is_cuda_when_present_else_cpu(monkeypatch, spec):
    _cuda_present(monkeypatch, 0)
    assert resolve_device(spec) == torch.device("cpu")
    _cuda_present(monkeypatch, 2)
    assert resolve_device(spec) == torch.device("cuda")


def test_explicit_devices(monkeypatch):
    _cuda_present(monkeypatch, 2)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device(torch.device("cuda", 0)) == torch.device("cuda", 0)


@pytest.mark.parametrize(
    ("spec", "count", "match"),
    [
        ("cuda", 0, r"asked for CUDA, but this torch .* sees no CUDA device; use --device cpu"),
        ("cuda:0", 0, "sees no CUDA device"),
        ("cuda:2", 2, r"has 2 CUDA device\(s\), cuda:0..cuda:1"),
        ("gpu", 1, "unknown device 'gpu': use auto, cpu, cuda or cuda:N"),
        ("meta", 1, "unknown device 'meta'"),
    ],
)
def test_requests_this_machine_cannot_serve(monkeypatch, spec, count, match):
    _cuda_present(monkeypatch, count)
    with pytest.raises(DeviceError, match=match):
        resolve_device(spec)
    assert issubclass(DeviceError, ValueError)


def test_policy_by_device_type():
    assert cpu_tuned("cpu") and not cpu_tuned("cuda") and not cpu_tuned(torch.device("meta"))
    assert autocast_dtype("cuda:0") == torch.bfloat16 and autocast_dtype("cpu") is None


# ---------------------------------------------------------------------- embeddings fast path


def _embeddings(device=None) -> TransformerEmbeddings:
    return TransformerEmbeddings(
        60, 16, position=LearnedAbsolute(32, 16), type_vocab_size=2, dropout=0.0, device=device
    )


def test_fused_embedding_only_on_the_cpu():
    assert _embeddings()._fused_applies(torch.arange(9))
    on_meta = _embeddings(device="meta")
    assert not on_meta._fused_applies(torch.arange(9, device="meta"))
    assert on_meta(torch.zeros(2, 9, dtype=torch.long, device="meta")).shape == (2, 9, 16)  # eager path


def test_a_cuda_device_type_takes_the_eager_path(monkeypatch):
    """Mock the device type to ``cuda``: the dispatch refuses the fused block, the eager path runs."""
    emb = _embeddings()
    ids = torch.randint(0, 60, (3, 9))
    fused = emb(ids)
    monkeypatch.setattr(devices, "_device_type", lambda device: "cuda")
    assert not emb._fused_applies(torch.arange(9))
    import posembed.nn.embedding.fast as embedding_fast

    monkeypatch.setattr(embedding_fast, "fused_embedding", lambda *a, **k: pytest.fail("fused path taken on cuda"))
    assert_close(emb(ids), fused, atol=1e-6, rtol=1e-5)


def test_huge_page_advice_only_on_the_cpu(monkeypatch):
    from posembed._utils.memory import MIN_BYTES, advise_huge_pages

    assert advise_huge_pages(torch.empty(MIN_BYTES // 4, device="meta")) is False
    monkeypatch.setattr(devices, "_device_type", lambda device: "cuda")
    assert advise_huge_pages(torch.empty(MIN_BYTES // 4)) is False


# ---------------------------------------------------------------------- attention dispatch


def _inputs(
    device: str, *, length: int = 8, dropout: float = 0.0, scheme=None, positions=None, width: int = 4
) -> AttentionInputs:
    q = torch.randn(2, 2, length, width, device=device)
    return AttentionInputs(
        q=q,
        k=q,
        v=q,
        scale=0.5,
        causal=True,
        scheme=scheme if scheme is not None else ALiBi(2),
        positions=torch.arange(length, device=device) if positions is None else positions,
        dropout=dropout,
    )


def test_auto_picks_flex_for_bias_schemes_on_cuda(monkeypatch):
    """Heads of 16 channels, the narrowest compiled flex lowers off the CPU (narrower: the attention tests)."""
    monkeypatch.setattr(attention_backends, "flex_available", lambda: True)
    for training in (True, False):
        assert choose_backend("auto", _inputs("meta", width=16), True, training) == "flex"
        assert choose_backend("auto", _inputs("meta", length=2048, width=16), True, training) == "flex"
    assert choose_backend("auto", _inputs("meta"), False, True) == "sdpa"  # no bias: SDPA everywhere
    # where flex does not apply: SDPA up to the threshold, chunked above it; never the CPU-tuned 'fused'
    assert choose_backend("auto", _inputs("meta", dropout=0.1), True, True) == "sdpa"
    per_row = torch.arange(2048, device="meta").expand(2, -1)
    assert choose_backend("auto", _inputs("meta", length=2048, positions=per_row), True, False) == "chunked"
    assert choose_backend("auto", _inputs("meta", length=2048, dropout=0.1), True, True) == "chunked"
    monkeypatch.setattr(attention_backends, "flex_available", lambda: False)
    assert choose_backend("auto", _inputs("meta", length=2048), True, False) == "chunked"


def test_auto_on_the_cpu_is_unchanged(monkeypatch):
    monkeypatch.setattr(attention_backends, "AUTO_SDPA_MAX_LENGTH", 6)
    assert choose_backend("auto", _inputs("cpu"), True, True) == "fused"
    assert choose_backend("auto", _inputs("cpu", length=4), True, True) == "sdpa"
    monkeypatch.setattr(devices, "_device_type", lambda device: "cuda")  # the same tensors, seen as CUDA
    assert choose_backend("auto", _inputs("cpu"), True, True) == "flex"


def test_self_attention_compiles_flex_when_auto_picks_it(monkeypatch):
    """The layer hands ``compile_flex=True`` to the backend when ``auto`` chose flex (CUDA)."""
    from posembed.nn.attention.layer import SelfAttention

    seen = {}

    def fake_run(name, inp, *, chunk_size, compile_flex):
        seen.update(name=name, compile_flex=compile_flex)
        return inp.v

    import posembed.nn.attention.layer as attention

    monkeypatch.setattr(attention, "choose_backend", lambda *args, **kwargs: "flex")
    monkeypatch.setattr(attention, "run_backend", fake_run)
    SelfAttention(8, 2, scheme=ALiBi(2), causal=True)(torch.randn(1, 5, 8))
    assert seen == {"name": "flex", "compile_flex": True}
    SelfAttention(8, 2, scheme=ALiBi(2), causal=True, backend="flex")(torch.randn(1, 5, 8))
    assert seen == {"name": "flex", "compile_flex": False}  # asked for explicitly: as configured


# ---------------------------------------------------------------------- lab training on a device


def test_lab_policy_for_cuda_without_cuda(monkeypatch):
    """autocast bf16 and fused AdamW are chosen for a CUDA device; the CPU keeps fp32 and the for-loop.
    The machine is told it has no CUDA (torch's autocast then warns), so this holds on a GPU machine too."""
    from posembed._utils.devices import autocast
    from posembed.lab.training.train import make_optimizer
    from tests.lab.conftest import tiny_trial

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    model = torch.nn.Linear(4, 4)
    assert make_optimizer(model, tiny_trial(), torch.device("cuda")).defaults["fused"] is True
    assert not make_optimizer(model, tiny_trial(), torch.device("cpu")).defaults["fused"]
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ctx = autocast(torch.device("cuda"))
    assert isinstance(ctx, torch.autocast) and ctx.fast_dtype == torch.bfloat16
    assert not isinstance(autocast(torch.device("cpu")), torch.autocast)


def test_on_device_wrapper_moves_inputs_and_outputs():
    from posembed._utils.devices import OnDevice
    from posembed.nn.model.transformer import Decoder

    model = Decoder(11, dim=8, depth=1, num_heads=2, scheme=LearnedAbsolute(8, 8)).eval()
    wrapped = OnDevice(model, torch.device("cpu"))
    ids = torch.randint(0, 11, (2, 5))
    assert torch.equal(wrapped(ids), model(ids))
    assert wrapped.max_len == model.max_len and wrapped.scheme is model.scheme


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("scheme", ["learned", "alibi", "rope"])
def test_lab_trains_on_cuda(scheme):
    from posembed.lab.training.train import train_trial
    from tests.lab.conftest import tiny_trial

    result, model = train_trial(tiny_trial(scheme=scheme, steps=4), device="cuda")
    assert next(model.parameters()).device.type == "cuda"
    assert all(torch.isfinite(torch.tensor(loss)) for _, loss in result.curve)
    if scheme == "alibi":
        attn = model.eval().blocks[0].attn
        with torch.no_grad():
            hidden = torch.randn(1, 8, attn.dim, device="cuda")
            assert attn.backend_for(hidden) in ("flex", "sdpa")  # eval: flex when it compiled
