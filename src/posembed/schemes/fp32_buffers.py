"""Float32 (and float64) buffers that dtype casts leave alone, with no ``_apply`` override.

``module.half()`` and ``module.to(torch.bfloat16)`` cast every floating-point buffer. RoPE
frequencies and sinusoid tables rounded to 16 bits would move every position's angle (by up to
``position * 2**-11`` radians), so the schemes keep them in float32 whatever the model's dtype,
and cast what they return instead. :class:`Fp32Buffer` declares such a buffer: it is stored as
its int32 bit pattern (casts skip integer tensors, ``.to(device)``, ``.cuda()`` and
``to_empty`` move it like any buffer) and read back as a float32 view of the same memory, so
an in-place write through the attribute lands in the buffer. The buffers are non-persistent:
they are rebuilt from the scheme's settings, never saved. :class:`Fp64Buffer` does the same for
float64 constants (int64 bits).

>>> import torch
>>> from torch import nn
>>> class Table(nn.Module):
...     freqs = Fp32Buffer()
...     def __init__(self):
...         super().__init__()
...         self.freqs = torch.tensor([1 / 3])
>>> table = Table().half()
>>> table.freqs.dtype, table.freqs.item() == torch.tensor(1 / 3).item()
(torch.float32, True)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["Fp32Buffer", "Fp64Buffer"]


class _BitsBuffer:
    """Descriptor of a ``float_dtype`` buffer (or ``None``) kept as the non-persistent ``bits_dtype``
    buffer ``<name><suffix>``, of the same width, which dtype casts skip."""

    float_dtype: torch.dtype
    bits_dtype: torch.dtype
    suffix: str

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.bits = name, name + self.suffix

    def __get__(self, module: nn.Module | None, owner: type | None = None):
        if module is None:
            return self
        bits = module._buffers.get(self.bits)
        return None if bits is None else bits.view(self.float_dtype)

    def __set__(self, module: nn.Module, value: Tensor | None) -> None:
        if value is not None and value.dtype != self.float_dtype:
            kind = str(self.float_dtype).removeprefix("torch.")
            raise TypeError(f"{type(module).__name__}.{self.name} is a {kind} buffer, got a {value.dtype} tensor")
        bits = None if value is None else value.contiguous().view(self.bits_dtype)
        if self.bits in module._buffers:
            module._buffers[self.bits] = bits
        else:
            module.register_buffer(self.bits, bits, persistent=False)


class Fp32Buffer(_BitsBuffer):
    """Descriptor of a float32 buffer (or ``None``) kept as the non-persistent int32 buffer ``<name>_fp32bits``."""

    float_dtype, bits_dtype, suffix = torch.float32, torch.int32, "_fp32bits"


class Fp64Buffer(_BitsBuffer):
    """Descriptor of a float64 buffer (or ``None``) kept as the non-persistent int64 buffer ``<name>_fp64bits``.

    For constants a scheme evaluates in float64 (:class:`~posembed.schemes.bias.sandwich.Sandwich`):
    ``.half()`` / ``.float()`` leave them exact.
    """

    float_dtype, bits_dtype, suffix = torch.float64, torch.int64, "_fp64bits"
