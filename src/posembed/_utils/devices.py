"""Where tensors run: one resolver for ``--device`` style requests, and the per-device policy.

- :func:`resolve_device`: ``"auto"`` (or ``None``) is the first CUDA device when one is
  present, else the CPU; ``"cpu"``, ``"cuda"`` and ``"cuda:N"`` are taken as asked, after a
  check that CUDA (and device ``N``) exists: a clear :class:`DeviceError` otherwise.
- :func:`cpu_tuned`: whether a fast path tuned and measured on the CPU (the fused embedding
  block, huge-page advice) applies on a device. Only on ``cpu``: on CUDA the eager torch path
  is what was measured, and ``meta`` tensors have no data to stream.
- :func:`autocast_dtype`: the dtype training autocasts to on a device (bf16 on CUDA; ``None``,
  no autocast, on the CPU, where the lab's determinism and calibration are fp32), and
  :func:`autocast`, that context.
- :func:`model_device`: where a model's parameters are; :class:`OnDevice` and :func:`on_device`: a
  model elsewhere wrapped so that tensors go in to its device and come back to the CPU as fp32
  (what the lab's scores read).

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> cpu_tuned(torch.device("cpu")), cpu_tuned(torch.device("meta")), autocast_dtype("cpu") is None
    (True, False, True)
"""

from __future__ import annotations

import contextlib
import os

import torch
from torch import Tensor, nn

from posembed.errors import DeviceError

__all__ = [
    "DEVICE_HELP",
    "DeviceError",
    "resolve_device",
    "cpu_tuned",
    "host_checks",
    "autocast_dtype",
    "autocast",
    "model_device",
    "OnDevice",
    "on_device",
]

#: help text for a ``--device`` command-line option
DEVICE_HELP = "where to run: auto (CUDA when present, else CPU; the default), cpu, cuda or cuda:N"


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """The ``torch.device`` for ``spec``: ``"auto"``/``None``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises:
        DeviceError: an unknown device name, CUDA asked for where torch sees no CUDA device,
            or ``cuda:N`` with ``N`` at or past the device count.

    Example:
        >>> resolve_device(torch.device("cpu"))
        device(type='cpu')
        >>> resolve_device("tpu")
        Traceback (most recent call last):
        ...
        posembed.errors.DeviceError: unknown device 'tpu': use auto, cpu, cuda or cuda:N
    """
    if spec is None or spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError):
        raise DeviceError(f"unknown device {spec!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise DeviceError(f"unknown device {str(spec)!r}: use auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise DeviceError(
            f"device {str(spec)!r} asked for CUDA, but this torch ({torch.__version__}) sees no CUDA device; "
            f"use --device cpu (or auto)"
        )
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise DeviceError(
            f"device {str(spec)!r} does not exist: this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}"
        )
    return device


def _device_type(device: str | torch.device) -> str:
    return torch.device(device).type


def cpu_tuned(device: str | torch.device) -> bool:
    """Whether fast paths tuned on the CPU apply on ``device`` (its type is ``cpu``)."""
    return _device_type(device) == "cpu"


def host_checks(device: str | torch.device) -> bool:
    """Whether value checks (ids against a table, position ranges) on ``device`` read values back
    to the host, for a clear ``ValueError`` naming the value.

    On the CPU (:func:`cpu_tuned`) a read is free; elsewhere it synchronises with the device, so
    only under the debug switch ``POSEMBED_HOST_CHECKS=1`` (otherwise the check is asserted on the
    device with ``torch._assert_async``).

    >>> host_checks("cpu")
    True
    """
    return cpu_tuned(device) or os.environ.get("POSEMBED_HOST_CHECKS", "0") == "1"


def autocast_dtype(device: str | torch.device) -> torch.dtype | None:
    """``torch.bfloat16`` on CUDA (training autocasts there), ``None`` elsewhere (plain fp32)."""
    return torch.bfloat16 if _device_type(device) == "cuda" else None


def autocast(device: torch.device):
    """bf16 autocast on CUDA (:func:`autocast_dtype`), nothing elsewhere."""
    dtype = autocast_dtype(device)
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def model_device(model: nn.Module) -> torch.device:
    """Where ``model``'s parameters are (the CPU for a model without any)."""
    first = next(model.parameters(), None)
    return torch.device("cpu") if first is None else first.device


class OnDevice(nn.Module):
    """What a task's ``evaluate`` calls: tensors in go to ``device``, the forward runs under
    :func:`autocast`, tensors out come back to the CPU as fp32 (the tasks score on the CPU)."""

    def __init__(self, model: nn.Module, device: torch.device) -> None:
        super().__init__()
        self.model, self.device = model, device

    def forward(self, *args, **kwargs):
        move = lambda t: t.to(self.device, non_blocking=True) if isinstance(t, Tensor) else t  # noqa: E731
        with autocast(self.device):
            out = self.model(*map(move, args), **{k: move(v) for k, v in kwargs.items()})
        back = lambda t: t.float().cpu() if isinstance(t, Tensor) else t  # noqa: E731
        return tuple(map(back, out)) if isinstance(out, tuple) else back(out)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["model"], name)


def on_device(model: nn.Module) -> nn.Module:
    """``model`` itself on the CPU; elsewhere (:func:`model_device`) an :class:`OnDevice` of it, which
    moves inputs to its device, runs under :func:`autocast` and brings outputs back to the CPU as fp32."""
    device = model_device(model)
    return model if device.type == "cpu" else OnDevice(model, device)
