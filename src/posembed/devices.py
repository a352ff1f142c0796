"""Where tensors run: one resolver for ``--device`` style requests, and the per-device policy.

- :func:`resolve_device`: ``"auto"`` (or ``None``) is the first CUDA device when one is
  present, else the CPU; ``"cpu"``, ``"cuda"`` and ``"cuda:N"`` are taken as asked, after a
  check that CUDA (and device ``N``) exists: a clear :class:`DeviceError` otherwise.
- :func:`cpu_tuned`: whether a fast path tuned and measured on the CPU (the fused embedding
  block, huge-page advice) applies on a device. Only on ``cpu``: on CUDA the eager torch path
  is what was measured, and ``meta`` tensors have no data to stream.
- :func:`autocast_dtype`: the dtype training autocasts to on a device (bf16 on CUDA; ``None``,
  no autocast, on the CPU, where the lab's determinism and calibration are fp32).

Example:
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> cpu_tuned(torch.device("cpu")), cpu_tuned(torch.device("meta")), autocast_dtype("cpu") is None
    (True, False, True)
"""

from __future__ import annotations

import os

import torch

__all__ = ["DEVICE_HELP", "DeviceError", "resolve_device", "cpu_tuned", "host_checks", "autocast_dtype"]

#: help text for a ``--device`` command-line option
DEVICE_HELP = "where to run: auto (CUDA when present, else CPU; the default), cpu, cuda or cuda:N"


class DeviceError(ValueError):
    """A device request that this machine cannot serve (unknown name, no CUDA, no such GPU)."""


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
        posembed.devices.DeviceError: unknown device 'tpu': use auto, cpu, cuda or cuda:N
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
        raise DeviceError(f"device {str(spec)!r} does not exist: this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}")
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
