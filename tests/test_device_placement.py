"""Every scheme follows the block it is given to onto the block's device, and nothing in a forward
or backward makes a tensor on another device: checked on ``meta`` (a device of its own, where
mixing in a CPU tensor raises), so no GPU is needed.

The first GPU run (2026-11-27, an H200) found what this guards: schemes built on the CPU and handed
to ``SelfAttention(..., device="cuda")`` or ``TransformerEmbeddings(..., device="cuda")`` stayed
on the CPU (ALiBi's slopes, RoPE's cos/sin cache, a learned position table), and the first forward
raised "Expected all tensors to be on the same device".
"""

from __future__ import annotations

import pytest
import torch

from posembed.nn.attention.layer import SelfAttention
from posembed.nn.embedding.block import TransformerEmbeddings
from posembed.schemes.base import Kind
from posembed.schemes.factory import FACTORY, build_from_sizes
from tests.schemes.test_factory import NEEDS, SIZES

META = torch.device("meta")
LENGTH = 6


def _scheme(name: str):
    return build_from_sizes(name, SIZES, NEEDS.get(name))  # made on the CPU, as a user makes one


def _positions(scheme) -> torch.Tensor | None:
    axes = getattr(scheme, "num_axes", 1)
    return None if axes == 1 else torch.zeros(LENGTH, axes, dtype=torch.long, device=META)


def _devices(module: torch.nn.Module) -> set[str]:
    return {t.device.type for t in [*module.parameters(), *module.buffers()]}


ABSOLUTE = [name for name in FACTORY if _scheme(name).kind == Kind.ABSOLUTE]
IN_ATTENTION = [name for name in FACTORY if name not in ABSOLUTE]


@pytest.mark.parametrize("name", IN_ATTENTION)
@pytest.mark.parametrize("backend", ["eager", "sdpa", "chunked"])
def test_attention_takes_its_scheme_to_its_device(name: str, backend: str) -> None:
    scheme = _scheme(name)
    dtypes = {n: t.dtype for n, t in scheme.named_buffers()}
    attn = SelfAttention(SIZES.dim, SIZES.num_heads, scheme=scheme, causal=True, backend=backend, device=META)
    assert _devices(attn) <= {"meta"} and attn.scheme is scheme
    assert {n: t.dtype for n, t in scheme.named_buffers()} == dtypes  # the scheme keeps its dtype (fp32 math)
    x = torch.randn(2, LENGTH, SIZES.dim, device=META, requires_grad=True)
    mask = torch.ones(2, LENGTH, dtype=torch.bool, device=META)
    out = attn(x, position_ids=_positions(scheme), attention_mask=mask)
    out.sum().backward()
    assert out.device == META and x.grad.device == META


@pytest.mark.parametrize("name", ABSOLUTE)
def test_the_embedding_block_takes_its_position_scheme_to_its_device(name: str) -> None:
    scheme = _scheme(name)
    block = TransformerEmbeddings(20, SIZES.dim, position=scheme, device=META)
    assert _devices(block) <= {"meta"} and block.position is scheme
    ids = torch.zeros(2, LENGTH, dtype=torch.long, device=META)
    out = block(ids, position_ids=_positions(scheme))
    out.sum().backward()
    assert out.device == META


def test_without_a_device_the_scheme_stays_where_it_was() -> None:
    scheme = _scheme("alibi").to(META)
    assert SelfAttention(SIZES.dim, SIZES.num_heads, scheme=scheme, causal=True).scheme.slopes.device == META
