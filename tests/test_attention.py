"""SelfAttention: every backend agrees with the eager reference for every scheme kind."""

from __future__ import annotations

import logging
import os

import pytest
import torch

from posembed.nn.attention import backends as attention_backends
from posembed.nn.attention.layer import SelfAttention
from posembed.schemes.absolute.learned import LearnedAbsolute
from posembed.schemes.positions import positions_from_mask
from tests.helpers import assert_close

DIM, HEADS, HEAD_DIM, LENGTH = 16, 2, 8, 7


def scheme_factories(causal: bool, num_heads: int = HEADS, head_dim: int = HEAD_DIM) -> dict:
    """Every real rotary/bias scheme (plus ``None``) that fits an attention layer, by id."""
    from posembed.schemes.bias.alibi import ALiBi
    from posembed.schemes.bias.nope import NoPE
    from posembed.schemes.bias.shaw import ShawRelative
    from posembed.schemes.bias.t5 import T5RelativeBias
    from posembed.schemes.rotary.rope import RotaryEmbedding
    from posembed.schemes.rotary.xpos import XPos
    from posembed.schemes.rotary.yarn import YaRNRotary

    factories = {
        "none": lambda: None,
        "rope": lambda: RotaryEmbedding(head_dim),
        "rope_interleaved_partial": lambda: RotaryEmbedding(head_dim, rotary_dim=head_dim // 2, layout="interleaved"),
        "rope_yarn": lambda: YaRNRotary(head_dim, factor=4.0, original_max_len=4, base=500.0),
        "alibi": lambda: ALiBi(num_heads, symmetric=not causal),
        "t5": lambda: T5RelativeBias(num_heads, num_buckets=8, max_distance=16, bidirectional=not causal, init_std=0.5),
        "shaw_key": lambda: ShawRelative(num_heads, head_dim, max_distance=3, mode="relative_key"),
        "shaw_key_query": lambda: ShawRelative(num_heads, head_dim, max_distance=3, mode="relative_key_query"),
        "nope": lambda: NoPE(),
    }
    if causal:
        factories["xpos"] = lambda: XPos(head_dim)
    return factories


def _inputs(padded: bool):
    x = torch.randn(3, LENGTH, DIM)
    if not padded:
        return x, None, None
    mask = torch.ones(3, LENGTH, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    mask[2, -2:] = 0  # right padding
    return x, mask, positions_from_mask(mask)


def _run(attn: SelfAttention, backend: str, x, mask, positions, backward: bool):
    attn.backend = backend
    attn.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(backward)
    out = attn(x, position_ids=positions, attention_mask=mask)
    assert attn.backend_for(x, position_ids=positions, attention_mask=mask) == backend
    if not backward:
        return out.detach(), {}
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    grads = {name: p.grad.clone() for name, p in attn.named_parameters() if p.grad is not None}
    grads["x"] = x.grad.clone()
    return out.detach(), grads


@pytest.mark.slow
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_backends_match_eager(causal: bool, padded: bool) -> None:
    factories = scheme_factories(causal)
    if not padded:  # the unpadded paths differ only by kind (SDPA's is_causal, bias without mask)
        factories = {key: factories[key] for key in ("none", "rope", "alibi", "shaw_key")}
    for scheme_id, factory in factories.items():
        attn = SelfAttention(DIM, HEADS, scheme=factory(), causal=causal, chunk_size=3)
        x, mask, positions = _inputs(padded)
        expected, expected_grads = _run(attn, "eager", x, mask, positions, backward=True)
        for backend in ("sdpa", "chunked"):
            out, grads = _run(attn, backend, x, mask, positions, backward=True)
            assert_close(out, expected, atol=1e-5, rtol=1e-5, msg=f"{scheme_id} {backend}")
            assert grads.keys() == expected_grads.keys()
            for name in grads:
                message = f"{scheme_id} {backend} d{name}"
                assert_close(grads[name], expected_grads[name], atol=1e-5, rtol=1e-5, msg=message)
        with torch.no_grad():
            out, _ = _run(attn, "flex", x, mask, positions, backward=False)
        assert_close(out, expected, atol=1e-5, rtol=1e-5, msg=f"{scheme_id} flex")


def test_eager_matches_hand_written_attention() -> None:
    """The reference itself: softmax(q k^T / sqrt(D) + bias + causal mask) v, written out."""
    from posembed.schemes.bias.alibi import ALiBi

    attn = SelfAttention(DIM, HEADS, scheme=ALiBi(HEADS), causal=True, backend="eager")
    x = torch.randn(2, LENGTH, DIM)
    q = attn.q_proj(x).view(2, LENGTH, HEADS, HEAD_DIM).transpose(1, 2)
    k = attn.k_proj(x).view(2, LENGTH, HEADS, HEAD_DIM).transpose(1, 2)
    v = attn.v_proj(x).view(2, LENGTH, HEADS, HEAD_DIM).transpose(1, 2)
    i = torch.arange(LENGTH)
    bias = attn.scheme.slopes.view(HEADS, 1, 1) * (i[None, :] - i[:, None])  # m_h (j - i)
    scores = q @ k.transpose(-1, -2) / HEAD_DIM**0.5 + bias
    scores = scores.masked_fill(i[None, :] > i[:, None], float("-inf"))
    expected = attn.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, LENGTH, DIM))
    assert_close(attn(x), expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("scheme_id", ["rope", "alibi", "t5", "shaw_key"])
def test_bfloat16_follows_float32(scheme_id: str) -> None:
    """bf16 projections (scheme math stays fp32) stay within the bf16 tolerance of fp32."""
    factory = scheme_factories(True)[scheme_id]
    reference = SelfAttention(DIM, HEADS, scheme=factory(), causal=True)
    half = SelfAttention(DIM, HEADS, scheme=factory(), causal=True, dtype=torch.bfloat16)
    half.load_state_dict(reference.state_dict())
    x = torch.randn(2, LENGTH, DIM)
    expected = reference(x).detach()
    for backend in ("sdpa", "chunked", "eager"):
        half.backend = backend
        out = half(x.bfloat16())
        assert out.dtype == torch.bfloat16
        assert_close(out.detach(), expected, msg=backend)


def test_chunk_size_does_not_change_the_result() -> None:
    from posembed.schemes.bias.t5 import T5RelativeBias

    attn = SelfAttention(DIM, HEADS, scheme=T5RelativeBias(HEADS, bidirectional=False), causal=True, backend="chunked")
    x = torch.randn(2, 11, DIM)
    reference = attn(x)
    for chunk in (1, 4, 11, 64):
        attn.chunk_size = chunk
        assert_close(attn(x), reference, atol=1e-6, rtol=1e-5)


def test_auto_rule(monkeypatch) -> None:
    """auto: SDPA without bias or up to the length threshold; above it fused for bias schemes, or
    chunked where fused does not apply (per-row positions)."""
    from posembed.schemes.bias.alibi import ALiBi
    from posembed.schemes.bias.nope import NoPE
    from posembed.schemes.rotary.rope import RotaryEmbedding

    monkeypatch.setattr(attention_backends, "AUTO_SDPA_MAX_LENGTH", 6)
    x_short, x_long = torch.randn(1, 6, DIM), torch.randn(1, 7, DIM)
    alibi = SelfAttention(DIM, HEADS, scheme=ALiBi(HEADS), causal=True)
    assert alibi.backend_for(x_short) == "sdpa"
    assert alibi.backend_for(x_long) == "fused"
    assert alibi.backend_for(x_long, position_ids=torch.arange(7)[None]) == "chunked"  # (B, T) positions
    for scheme in (None, NoPE(), RotaryEmbedding(HEAD_DIM)):
        attn = SelfAttention(DIM, HEADS, scheme=scheme, causal=True)
        assert attn.backend_for(x_long) == "sdpa", scheme


def test_flex_fallbacks_are_logged_once(caplog) -> None:
    from posembed._utils.logging import forget_logged
    from posembed.schemes.bias.alibi import ALiBi

    forget_logged()
    attn = SelfAttention(DIM, HEADS, scheme=ALiBi(HEADS), causal=True, backend="flex")
    x = torch.randn(2, 5, DIM)
    with caplog.at_level(logging.WARNING, logger="posembed.nn.attention.backends"):
        for _ in range(3):
            attn(x).sum().backward()  # gradients needed on CPU: flex has no backward there
            assert attn.backend_for(x) == "chunked"
        with torch.no_grad():
            attn(x)
            assert attn.backend_for(x) == "flex"
        dropped = SelfAttention(DIM, HEADS, causal=True, dropout=0.1, backend="flex").train()
        with torch.no_grad():
            dropped(x)
            dropped(x)
            assert dropped.backend_for(x) == "chunked"
    messages = [r.getMessage() for r in caplog.records]
    assert sum("no backward on CPU" in m for m in messages) == 1, messages
    assert sum("no attention dropout" in m for m in messages) == 1, messages


def test_dropout_only_in_training() -> None:
    attn = SelfAttention(DIM, HEADS, dropout=0.5, backend="eager")
    x = torch.randn(2, 5, DIM)
    attn.eval()
    assert_close(attn(x), attn(x))
    attn.train()
    assert not torch.allclose(attn(x), attn(x))


def test_untied_term_is_tupe() -> None:
    """TUPE-A: logits = (x W^Q)(x W^K)^T / sqrt(2D) + (p U^Q)(p U^K)^T / sqrt(2D), for every backend."""
    attn = SelfAttention(DIM, HEADS, untied_dim=6, causal=True, backend="eager")
    x, p = torch.randn(2, LENGTH, DIM), torch.randn(LENGTH, 6)

    def heads(t):
        return t.view(-1, LENGTH, HEADS, HEAD_DIM).transpose(1, 2)

    q, k, v = heads(attn.q_proj(x)), heads(attn.k_proj(x)), heads(attn.v_proj(x))
    pq, pk = heads(attn.pos_q(p)), heads(attn.pos_k(p))
    scores = (q @ k.transpose(-1, -2) + pq @ pk.transpose(-1, -2)) / (2 * HEAD_DIM) ** 0.5
    i = torch.arange(LENGTH)
    scores = scores.masked_fill(i[None, :] > i[:, None], float("-inf"))
    expected = attn.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, LENGTH, DIM))
    for backend in ("eager", "sdpa", "chunked", "flex"):
        attn.backend = backend
        with torch.no_grad():
            assert_close(attn(x, position_vectors=p), expected, atol=1e-5, rtol=1e-5, msg=backend)


# ---------------------------------------------------------------------- bad input


def test_absolute_scheme_is_refused() -> None:
    with pytest.raises(TypeError, match="LearnedAbsolute.*absolute"):
        SelfAttention(DIM, HEADS, scheme=LearnedAbsolute(8, DIM))


def test_head_count_mismatch() -> None:
    from posembed.schemes.bias.alibi import ALiBi

    with pytest.raises(ValueError, match="num_heads=4.*num_heads=2"):
        SelfAttention(DIM, HEADS, scheme=ALiBi(4), causal=True)


def test_rotary_head_dim_mismatch() -> None:
    from posembed.schemes.rotary.rope import RotaryEmbedding

    with pytest.raises(ValueError, match="head_dim=4.*head_dim=8"):
        SelfAttention(DIM, HEADS, scheme=RotaryEmbedding(4))


def test_xpos_needs_causal() -> None:
    from posembed.schemes.rotary.xpos import XPos

    with pytest.raises(ValueError, match="causal"):
        SelfAttention(DIM, HEADS, scheme=XPos(HEAD_DIM), causal=False)


def test_dim_not_divisible_by_heads() -> None:
    with pytest.raises(ValueError, match="dim=10 is not divisible by num_heads=4"):
        SelfAttention(10, 4)


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="unknown backend 'cuda'.*sdpa"):
        SelfAttention(DIM, HEADS, backend="cuda")


@pytest.mark.parametrize(
    "mask, error, match",
    [
        (torch.ones(2, 4, dtype=torch.long), ValueError, r"shape \(2, 4\); expected \(B, T\) = \(2, 5\)"),
        (torch.ones(5, dtype=torch.long), ValueError, r"attention_mask has shape \(5,\)"),
        (torch.ones(2, 5), TypeError, "0/1 integers or booleans, got dtype torch.float32"),
    ],
)
def test_attention_mask_checked(mask, error, match) -> None:
    attn = SelfAttention(DIM, HEADS)
    with pytest.raises(error, match=match):
        attn(torch.randn(2, 5, DIM), attention_mask=mask)


def test_bad_x_and_positions() -> None:
    attn = SelfAttention(DIM, HEADS)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, 16\), got \(2, 5, 8\)"):
        attn(torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match=r"position_ids has shape \(4,\); expected \(5,\)"):
        attn(torch.randn(2, 5, DIM), position_ids=torch.arange(4))
    with pytest.raises(ValueError, match="batch size 3 but x has 2"):
        attn(torch.randn(2, 5, DIM), position_ids=torch.arange(5).expand(3, 5))


def test_untied_inputs_checked() -> None:
    with pytest.raises(ValueError, match="pass position_vectors"):
        SelfAttention(DIM, HEADS, untied_dim=4)(torch.randn(1, 3, DIM))
    with pytest.raises(ValueError, match="no untied_dim"):
        SelfAttention(DIM, HEADS)(torch.randn(1, 3, DIM), position_vectors=torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"expected \(3, 4\)"):
        SelfAttention(DIM, HEADS, untied_dim=4)(torch.randn(1, 3, DIM), position_vectors=torch.randn(3, 5))


def test_bad_dropout_and_chunk() -> None:
    with pytest.raises(ValueError, match="dropout must be in"):
        SelfAttention(DIM, HEADS, dropout=1.5)
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        SelfAttention(DIM, HEADS, chunk_size=0)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("POSEMBED_TEST_COMPILE"), reason="compiles a kernel (~10 s); set POSEMBED_TEST_COMPILE=1"
)
def test_compiled_flex_matches_eager() -> None:
    """torch.compile'd FlexAttention (the fused kernel, no T x T scores) against eager: forward."""
    from posembed.schemes.bias.alibi import ALiBi

    attn = SelfAttention(DIM, HEADS, scheme=ALiBi(HEADS), causal=True, backend="eager", compile_flex=True)
    x, mask, positions = _inputs(padded=True)
    with torch.no_grad():
        expected = attn(x, position_ids=positions, attention_mask=mask)
        attn.backend = "flex"
        out = attn(x, position_ids=positions, attention_mask=mask)
        assert attn.backend_for(x, position_ids=positions, attention_mask=mask) == "flex"
    assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_fused_backend_matches_eager_forward_and_backward(causal: bool, padded: bool) -> None:
    """The block-streamed bias backend (``"fused"``) against the eager reference, with gradients;
    padded batches (right- and left-padded rows) with shared positions stay on ``"fused"``."""
    factories = scheme_factories(causal)
    for scheme_id in ("alibi", "t5"):
        attn = SelfAttention(DIM, HEADS, scheme=factories[scheme_id](), causal=causal)
        x, mask, _ = _inputs(padded)
        expected, expected_grads = _run(attn, "eager", x, mask, None, backward=True)
        out, grads = _run(attn, "fused", x, mask, None, backward=True)
        assert_close(out, expected, atol=1e-5, rtol=1e-5, msg=scheme_id)
        assert grads.keys() == expected_grads.keys()
        for name in grads:
            assert_close(grads[name], expected_grads[name], atol=1e-5, rtol=1e-5, msg=f"{scheme_id} d{name}")


def test_fused_backend_falls_back_where_it_does_not_apply(caplog) -> None:
    from posembed._utils.logging import forget_logged
    from posembed.schemes.bias.alibi import ALiBi

    forget_logged()
    attn = SelfAttention(DIM, HEADS, scheme=ALiBi(HEADS), causal=True, backend="fused")
    x, mask, positions = _inputs(padded=True)
    with caplog.at_level(logging.WARNING, logger="posembed.nn.attention.backends"):
        attn(x, position_ids=positions, attention_mask=mask)
        assert attn.backend_for(x, position_ids=positions, attention_mask=mask) == "chunked"
    assert "backend 'fused' does not apply (positions differ per row)" in caplog.text


# ---------------------------------------------------------------------- fused qkv projection


def _three_projections(attn: SelfAttention) -> dict[str, torch.Tensor]:
    """The layer's state dict as checkpoints wrote it before the fused projection (q_proj, k_proj, v_proj)."""
    state = attn.state_dict()
    old = {k: v for k, v in state.items() if not k.startswith("qkv_proj.")}
    for suffix in ("weight", "bias"):
        for proj, part in zip(("q_proj", "k_proj", "v_proj"), state[f"qkv_proj.{suffix}"].chunk(3)):
            old[f"{proj}.{suffix}"] = part.clone()
    return old


@pytest.mark.parametrize("scheme_id", ["none", "rope", "alibi", "shaw_key_query"])
def test_fused_qkv_equals_three_projections(scheme_id: str) -> None:
    """One Linear(C, 3C) gives what three Linear(C, C) give: q/k/v views, outputs and gradients."""
    torch.manual_seed(0)
    attn = SelfAttention(DIM, HEADS, scheme=scheme_factories(True)[scheme_id](), causal=True)
    x = torch.randn(2, LENGTH, DIM, requires_grad=True)
    heads = lambda t: t.view(2, LENGTH, HEADS, HEAD_DIM).transpose(1, 2)  # noqa: E731
    q, k, v = heads(attn.q_proj(x)), heads(attn.k_proj(x)), heads(attn.v_proj(x))
    fused = attn.qkv_proj(x)
    assert_close(torch.cat([attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)], dim=-1), fused)
    assert isinstance(attn.k_proj, torch.nn.Linear) and attn.k_proj.weight.shape == (DIM, DIM)
    assert torch.equal(attn.v_proj.bias, attn.qkv_proj.bias[2 * DIM :])
    out = attn(x)
    out.sum().backward()
    assert attn.qkv_proj.weight.grad is not None and attn.qkv_proj.weight.grad.shape == (3 * DIM, DIM)
    assert q.shape == k.shape == v.shape == (2, HEADS, LENGTH, HEAD_DIM)


@pytest.mark.parametrize("untied", [False, True])
def test_old_checkpoints_with_separate_projections_load(untied: bool) -> None:
    """State dicts with q_proj/k_proj/v_proj keys load into the fused layer, bit for bit."""
    from posembed.nn.attention.layer import fuse_legacy_qkv, fused_qkv_shapes

    torch.manual_seed(0)
    attn = SelfAttention(DIM, HEADS, causal=True, untied_dim=4 if untied else None)
    old = _three_projections(attn)
    assert "q_proj.weight" in old and "qkv_proj.weight" not in old
    fresh = SelfAttention(DIM, HEADS, causal=True, untied_dim=4 if untied else None)
    assert str(fresh.load_state_dict(old, strict=True)) == "<All keys matched successfully>"
    for name, tensor in attn.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name
    shapes = fused_qkv_shapes({name: tuple(t.shape) for name, t in old.items()})
    assert shapes == {name: tuple(t.shape) for name, t in attn.state_dict().items()}
    partial = {"q_proj.weight": old["q_proj.weight"]}
    assert fuse_legacy_qkv(dict(partial)) == partial  # incomplete: left for the load to report


def test_old_model_checkpoint_loads_into_the_decoder() -> None:
    from posembed.nn.model.transformer import Decoder

    torch.manual_seed(0)
    model = Decoder(11, dim=DIM, depth=2, num_heads=HEADS, scheme=LearnedAbsolute(LENGTH, DIM))
    old = {}
    for name, tensor in model.state_dict().items():
        if ".qkv_proj." not in name:
            old[name] = tensor
            continue
        prefix, suffix = name.split("qkv_proj.")
        for proj, part in zip(("q_proj", "k_proj", "v_proj"), tensor.chunk(3)):
            old[f"{prefix}{proj}.{suffix}"] = part.clone()
    fresh = Decoder(11, dim=DIM, depth=2, num_heads=HEADS, scheme=LearnedAbsolute(LENGTH, DIM))
    fresh.load_state_dict(old, strict=True)
    ids = torch.randint(0, 11, (2, LENGTH))
    assert torch.equal(fresh(ids), model(ids))
