"""Where the context study runs: ``device=`` through run_context / reevaluate_checkpoint, bf16 autocast
where the device policy asks for it (CUDA; forced here on the CPU), scores computed on the CPU."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import posembed._utils.devices as devices
from posembed._utils.devices import OnDevice, on_device
from posembed.errors import DeviceError
from posembed.lab.context.corpus import ContextData
from posembed.lab.context.evaluate import evaluate_rows
from posembed.lab.context.extend import reevaluate_checkpoint
from posembed.lab.context.models import build_context_model
from posembed.lab.context.presets import ContextConfig
from posembed.lab.context.run import run_context
from posembed.lab.context.train import train_steps

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
CFG = ContextConfig(name="x", context=70, dim=8, depth=1, heads=2)
#: two steps of two rows, half of them passkey documents (no curriculum, no warmup)
TWO_STEPS = dataclasses.replace(
    CFG, steps=2, batch=2, lr=1e-3, warmup=0, passkey_fraction=0.5, passkey_only_steps=0, passkey_adjacent_steps=0
)


@pytest.fixture(scope="module")
def data():
    return ContextData.load("tinyshakespeare")


def _autocast_seen(model) -> list[bool]:
    seen: list[bool] = []
    model.register_forward_pre_hook(lambda module, args: seen.append(torch.is_autocast_enabled("cpu")))
    return seen


def _inputs_seen(model) -> list[tuple[torch.device, torch.dtype | None]]:
    """(device of the ids, autocast dtype on that device or None) of every forward of ``model``."""
    seen: list = []

    def hook(module, args):
        kind = args[0].device.type
        autocast = kind in ("cpu", "cuda") and torch.is_autocast_enabled(kind)  # meta has no autocast
        seen.append((args[0].device, torch.get_autocast_dtype(kind) if autocast else None))

    model.register_forward_pre_hook(hook)
    return seen


def test_training_autocasts_where_the_device_policy_says(data, monkeypatch):
    settings = TWO_STEPS
    model = build_context_model(CFG, "rope", data.vocab_size)
    seen = _autocast_seen(model)
    fp32 = train_steps(model, data, settings)
    assert seen == [False, False]  # the CPU trains in fp32
    monkeypatch.setattr(devices, "autocast_dtype", lambda device: torch.bfloat16)  # what CUDA gets
    model = build_context_model(CFG, "rope", data.vocab_size)  # the same initial weights and batches
    seen = _inputs_seen(model)
    loss = train_steps(model, data, settings)
    assert seen == [(torch.device("cpu"), torch.bfloat16)] * 2
    assert math.isfinite(loss) and loss == pytest.approx(fp32, rel=0.02) and loss != fp32  # bf16: near, not equal


def test_scores_read_fp32_cpu_outputs_from_the_device_wrapper(data, monkeypatch):
    model = build_context_model(CFG, "fire", data.vocab_size).eval()
    assert on_device(model) is model  # on the CPU: the model itself
    plain = evaluate_rows(model, data, 70, windows=2, depths=2, samples=2, seed=0, digits=5)
    monkeypatch.setattr(devices, "autocast_dtype", lambda device: torch.bfloat16)
    wrapped = OnDevice(model, torch.device("cpu"))
    assert wrapped(torch.zeros(1, 8, dtype=torch.long)).dtype == torch.float32
    seen = _inputs_seen(model)
    under_bf16 = evaluate_rows(wrapped, data, 70, windows=2, depths=2, samples=2, seed=0, digits=5)
    assert seen and set(seen) == {(torch.device("cpu"), torch.bfloat16)}  # every scored forward under bf16 autocast
    assert [(m, d) for m, d, _ in under_bf16] == [(m, d) for m, d, _ in plain]
    assert under_bf16[0][2] == pytest.approx(plain[0][2], rel=0.05)  # perplexity, bf16 against fp32


def test_a_model_off_the_cpu_is_scored_through_the_wrapper(monkeypatch):
    model = build_context_model(CFG, "nope", 11)
    monkeypatch.setattr(devices, "model_device", lambda m: torch.device("cuda", 0))
    wrapped = on_device(model)
    assert isinstance(wrapped, OnDevice) and wrapped.device == torch.device("cuda", 0) and wrapped.model is model


def test_a_model_off_the_cpu_trains_and_is_scored_on_its_device(data):
    """The meta device stands for CUDA: the batches and the scored ids reach the model there (reading a meta
    tensor back is what fails, after the forward); a study that ran everything on the CPU would fail this."""
    model = build_context_model(CFG, "rope", data.vocab_size).to("meta")
    seen = _inputs_seen(model)
    with pytest.raises(RuntimeError, match="meta"):  # the step's loss cannot be read off a meta tensor
        train_steps(model, data, TWO_STEPS)
    assert seen == [(torch.device("meta"), None)]  # the first batch went to the model's device
    wrapped = on_device(model)
    assert isinstance(wrapped, OnDevice) and wrapped.device == torch.device("meta")
    with pytest.raises(NotImplementedError, match="meta"):  # the logits cannot come back to the CPU
        wrapped(torch.zeros(1, 8, dtype=torch.long))
    assert seen[1:] == [(torch.device("meta"), None)]


@no_cuda
def test_cuda_without_cuda_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(DeviceError, match="asked for CUDA, but this torch .* sees no CUDA device"):
        run_context(CFG, tmp_path / "study", device="cuda")
    assert not (tmp_path / "study").exists()
    with pytest.raises(DeviceError, match="asked for CUDA"):
        reevaluate_checkpoint(tmp_path, "yarn", 2.0, device="cuda")
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        run_context(CFG, tmp_path / "study", device="tpu")
