"""CoPE sees the key padding mask: padding keys have no gate, so a padded batch gives, at its real
tokens, the outputs of the unpadded rows (left and right padding, any position ids, every backend
that serves CoPE, a whole causal decoder); the auto rule never sends CoPE to FlexAttention."""

from __future__ import annotations

import pytest
import torch

from posembed.nn.attention.backends import AttentionInputs, choose_backend, fused_applies
from posembed.nn.attention.layer import SelfAttention
from posembed.nn.model.transformer import Decoder
from posembed.schemes.bias.cope import CoPE
from posembed.schemes.positions import positions_from_mask
from tests.helpers import assert_close

DIM, HEADS, HEAD_DIM, LENGTH = 16, 2, 8, 9
#: real tokens per row: full, left-padded by 3, right-padded by 4
LAYOUT = ((0, LENGTH), (3, LENGTH), (0, LENGTH - 4))


def padded_batch(width: int = DIM):
    """``(x, mask)`` of the rows of :data:`LAYOUT`: random features everywhere, padding included."""
    x = torch.randn(len(LAYOUT), LENGTH, width)
    mask = torch.zeros(len(LAYOUT), LENGTH, dtype=torch.long)
    for row, (start, stop) in enumerate(LAYOUT):
        mask[row, start:stop] = 1
    return x, mask


def cope(npos_max: int = 6) -> CoPE:
    return CoPE(HEADS, HEAD_DIM, npos_max=npos_max, init_std=1.0)


@pytest.mark.parametrize("positions", ["arange", "from_mask"])
@pytest.mark.parametrize("backend", ["sdpa", "eager", "chunked", "auto"])
def test_padded_rows_equal_unpadded_rows(backend, positions):
    torch.manual_seed(0)
    attn = SelfAttention(DIM, HEADS, scheme=cope(), causal=True, backend=backend, chunk_size=4)
    x, mask = padded_batch()
    position_ids = None if positions == "arange" else positions_from_mask(mask)
    with torch.no_grad():
        out = attn(x, position_ids, mask)  # (B, T, C)
        for row, (start, stop) in enumerate(LAYOUT):
            alone = attn(x[row : row + 1, start:stop])[0]  # (T_row, C)
            assert_close(out[row, start:stop], alone, msg=f"{backend} row {row}")


def test_key_mask_is_what_makes_them_equal():
    """Right padding with positions from the mask puts padding keys at position 0, 'before' every
    query: without the mask their gates would count (the behaviour before CoPE saw it)."""
    torch.manual_seed(1)
    scheme = cope(npos_max=8)
    x, mask = padded_batch(HEAD_DIM)
    q = k = x[:, None].expand(-1, HEADS, -1, -1)  # (B, H, T, D)
    positions = positions_from_mask(mask)
    with torch.no_grad():
        masked = scheme.bias(positions, positions, q, k, key_mask=mask.bool())
        unmasked = scheme.bias(positions, positions, q, k)
        stop = LAYOUT[2][1]
        alone = scheme.bias(torch.arange(stop), torch.arange(stop), q[2:, :, :stop], k[2:, :, :stop])
    assert_close(masked[2:, :, :stop, :stop], alone)
    assert (unmasked[2:, :, :stop, :stop] - alone).abs().max() > 1e-2
    assert_close(masked[:1], unmasked[:1])  # a row without padding: the mask changes nothing


def test_contextual_positions_skip_padding_keys():
    """By hand: gates 1/2 (k = 0), keys 0 and 3 are padding: p counts the real keys from j to i, halved."""
    scheme = CoPE(1, 1, npos_max=8)
    q, k = torch.ones(1, 1, 5, 1), torch.zeros(1, 1, 5, 1)
    mask = torch.tensor([[False, True, True, False, True]])
    p = scheme.positions(torch.arange(5), torch.arange(5), q, k, key_mask=mask)[0, 0]
    assert p[4].tolist() == [1.5, 1.5, 1.0, 0.5, 0.5]  # keys 1, 2, 4 real: (3, 2, 1) real keys in [j, 4], halved
    assert p[2].tolist() == [1.0, 1.0, 0.5, 0.0, 0.0]


@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
def test_decoder_padded_batch_equals_unpadded(left):
    """A whole causal decoder with CoPE in every layer: logits at the real tokens equal those of
    each row alone."""
    torch.manual_seed(2)
    model = Decoder(30, dim=DIM, depth=2, num_heads=HEADS, scheme=cope()).eval()
    lengths = (LENGTH, 5, 3)
    ids = torch.randint(0, 30, (3, LENGTH))
    reals = [slice(LENGTH - n, LENGTH) if left else slice(0, n) for n in lengths]
    mask = torch.zeros(3, LENGTH, dtype=torch.long)
    for row, real in enumerate(reals):
        mask[row, real] = 1
    with torch.no_grad():
        logits = model(ids, positions_from_mask(mask), mask)  # (B, T, V)
        for row, real in enumerate(reals):
            assert_close(logits[row, real], model(ids[row : row + 1, real])[0], msg=f"row {row}")


def test_cache_rows_with_padding_equal_the_full_bias():
    scheme = cope(npos_max=8)
    x, mask = padded_batch(HEAD_DIM)
    q = k = x[:, None].expand(-1, HEADS, -1, -1)
    key_mask = mask.bool()
    with torch.no_grad():
        full = scheme.bias(torch.arange(LENGTH), torch.arange(LENGTH), q, k, key_mask=key_mask)
        rows = scheme.bias(torch.arange(6, LENGTH), torch.arange(LENGTH), q[:, :, 6:], k, key_mask=key_mask)
    assert_close(rows, full[:, :, 6:])


def test_key_mask_checked():
    scheme = cope()
    q = torch.randn(2, HEADS, 4, HEAD_DIM)
    pos = torch.arange(4)
    with pytest.raises(ValueError, match=r"CoPE key_mask has shape \(2, 3\); expected \(B, Tk\) = \(2, 4\)"):
        scheme.bias(pos, pos, q, q, key_mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="CoPE key_mask must be a bool tensor.*got torch.int64"):
        scheme.bias(pos, pos, q, q, key_mask=torch.ones(2, 4, dtype=torch.long))


def test_auto_never_picks_flex_or_fused_for_cope():
    """CoPE declares no FlexAttention view and reads the padding mask: off the CPU (meta tensors stand
    for CUDA) ``auto`` takes SDPA or chunked, and ``fused`` falls back, whatever the length."""
    scheme = cope().to("meta")
    for length in (8, 2048):
        q = torch.empty(1, HEADS, length, HEAD_DIM, device="meta")
        inp = AttentionInputs(
            q, q, q, scale=1.0, causal=True, positions=torch.arange(length, device="meta"), scheme=scheme, qk=(q, q)
        )
        assert choose_backend("auto", inp, True, training=False) == ("sdpa" if length <= 1024 else "chunked")
        assert fused_applies(inp, training=False) == "it serves bias schemes that do not read q/k"  # CoPE reads them
    model = Decoder(
        30, dim=DIM, depth=1, num_heads=HEADS, scheme=CoPE(HEADS, HEAD_DIM, npos_max=4, device="meta"), device="meta"
    )
    ids = torch.zeros(2, 5, dtype=torch.long, device="meta")
    assert model(ids, attention_mask=torch.ones(2, 5, dtype=torch.long, device="meta")).shape == (2, 5, 30)
    hidden, mask = torch.zeros(2, 5, DIM, device="meta"), torch.ones(2, 5, dtype=torch.long, device="meta")
    assert model.blocks[0].attn.backend_for(hidden, attention_mask=mask) == "sdpa"
