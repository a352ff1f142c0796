"""Float32 buffers that dtype casts leave alone, with no ``_apply`` override.

``module.half()`` and ``module.to(torch.bfloat16)`` cast every floating-point buffer. RoPE
frequencies and sinusoid tables rounded to 16 bits would move every position's angle (by up to
``position * 2**-11`` radians), so the schemes keep them in float32 whatever the model's dtype,
and cast what they return instead. :class:`Fp32Buffer` declares such a buffer: it is stored as
its int32 bit pattern (casts skip integer tensors, ``.to(device)``, ``.cuda()`` and
``to_empty`` move it like any buffer) and read back as a float32 view of the same memory, so
an in-place write through the attribute lands in the buffer. The buffers are non-persistent:
they are rebuilt from the scheme's settings, never saved.

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

__all__ = ["Fp32Buffer"]

_SUFFIX = "_fp32bits"


class Fp32Buffer:
    """Descriptor of a float32 buffer (or ``None``) kept as the non-persistent int32 buffer ``<name>_fp32bits``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.bits = name, name + _SUFFIX

    def __get__(self, module: nn.Module | None, owner: type | None = None):
        if module is None:
            return self
        bits = module._buffers.get(self.bits)
        return None if bits is None else bits.view(torch.float32)

    def __set__(self, module: nn.Module, value: Tensor | None) -> None:
        if value is not None and value.dtype != torch.float32:
            raise TypeError(f"{type(module).__name__}.{self.name} is a float32 buffer, got a {value.dtype} tensor")
        bits = None if value is None else value.contiguous().view(torch.int32)
        if self.bits in module._buffers:
            module._buffers[self.bits] = bits
        else:
            module.register_buffer(self.bits, bits, persistent=False)
