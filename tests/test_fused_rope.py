"""posembed.kernels.rope (compiled kernel) against the references: transformers and rotary-embedding-torch."""

from __future__ import annotations

import pytest
import torch

from posembed.kernels import rope as fused
from posembed.schemes.rotary.rope import apply_rotary, rope_cos_sin, rope_inv_freq
from tests.helpers import assert_close

pytestmark = pytest.mark.skipif(not fused.available(), reason="torch.compile cannot build kernels here")

SHAPE = (2, 3, 10, 8)  # (B, H, T, D)


def _angles(length=SHAPE[2], dim=SHAPE[3]):
    return rope_cos_sin(torch.arange(length), rope_inv_freq(dim))


def _backward(fn, x, grad):
    x = x.clone().requires_grad_()
    out = fn(x)
    out.backward(grad)
    return out.detach(), x.grad


def test_half_layout_matches_transformers_forward_and_backward():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q, grad = torch.randn(SHAPE), torch.randn(SHAPE)
    cos, sin = _angles()
    full_cos, full_sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)  # (T, D): HF's layout

    out, dq = _backward(lambda x: fused.rotate(x, cos, sin), q, grad)
    expected, expected_dq = _backward(
        lambda x: apply_rotary_pos_emb(x, x, full_cos, full_sin, unsqueeze_dim=0)[0], q, grad
    )
    assert_close(out, expected)
    assert_close(dq, expected_dq)
    with torch.no_grad():  # the no-grad path runs the kernel directly
        assert_close(fused.rotate(q, cos, sin), expected)


def test_interleaved_layout_matches_rotary_embedding_torch():
    from rotary_embedding_torch import RotaryEmbedding

    q, grad = torch.randn(SHAPE), torch.randn(SHAPE)
    cos, sin = _angles()
    reference = RotaryEmbedding(dim=SHAPE[-1])
    out, dq = _backward(lambda x: fused.rotate(x, cos, sin, "interleaved"), q, grad)
    expected, expected_dq = _backward(reference.rotate_queries_or_keys, q, grad)
    assert_close(out, expected, atol=1e-5)
    assert_close(dq, expected_dq, atol=1e-5)
    assert_close(out, apply_rotary(q, cos, sin, "interleaved"), atol=1e-5)


def test_rotation_preserves_norms_and_relative_scores():
    """|R x| = |x| per pair, and q_m . k_n depends only on n - m (Su et al.)."""
    q, k = torch.randn(8).expand(SHAPE).contiguous(), torch.randn(8).expand(SHAPE).contiguous()
    cos, sin = _angles()
    with torch.no_grad():
        rq, rk = fused.rotate(q, cos, sin), fused.rotate(k, cos, sin)
    assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    scores = rq[1, 2] @ rk[1, 2].T  # (T, T)
    for offset in (0, 1, 3):
        diagonal = torch.diagonal(scores, offset)
        assert_close(diagonal, diagonal[:1].expand_as(diagonal), atol=1e-5)


def test_partial_rotary_reference_passes_the_rest_through():
    x = torch.randn(SHAPE)
    cos, sin = _angles(dim=4)  # rotary dim 4 of head dim 8
    out = fused.rotate_reference(x, cos, sin)
    assert_close(out[..., 4:], x[..., 4:])
    assert_close(out, apply_rotary(x, cos, sin))


def test_compile_failure_falls_back_to_the_eager_formula(monkeypatch, caplog):
    def broken():
        raise RuntimeError("no compiler")

    from posembed._utils.logging import forget_logged

    forget_logged()
    state = fused.CompiledRotation(build=broken)  # the kernel's explicit state: no module-level flag
    monkeypatch.setattr(fused, "compiled_rotation", lambda: state)
    x = torch.randn(SHAPE)
    cos, sin = _angles()
    with torch.no_grad(), caplog.at_level("WARNING"):
        assert_close(fused.rotate(x, cos, sin), apply_rotary(x, cos, sin))
        assert_close(fused.rotate(x, cos, sin), apply_rotary(x, cos, sin))
    assert state.error == "no compiler"
    assert caplog.text.count("compiling the RoPE kernel failed") == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"layout": "spiral"}, ValueError, "layout must be one of"),
        ({"cos": torch.ones(10, 5)}, ValueError, "must share a shape"),
        ({"sin": torch.ones(10, 3)}, ValueError, "must share a shape"),
        ({"sin": torch.ones(10, 4, requires_grad=True)}, ValueError, "no gradient to cos/sin"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, error, match):
    args = {"x": torch.randn(SHAPE), "cos": torch.ones(10, 4), "sin": torch.ones(10, 4)} | kwargs
    with pytest.raises(error, match=match):
        fused.rotate(**args)
