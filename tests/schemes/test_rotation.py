"""posembed.schemes.rotary.rotation: the exact inverse-rotation backward, the dtype-preserving compiled
kernel (bf16/fp16 rotated in float32 inside), the one dispatch point's device policy, and no host
reads in the forward and backward."""

from __future__ import annotations

import pytest
import torch

from posembed._utils.logging import forget_logged
from posembed.schemes.rotary import rotation
from posembed.schemes.rotary.rope import RotaryEmbedding, rope_cos_sin, rope_inv_freq
from tests.helpers import assert_close

SHAPE = (2, 3, 16, 8)  # (B, H, T, D)
compiles = pytest.mark.skipif(
    not rotation.compile_available("cpu"), reason="torch.compile cannot build CPU kernels here"
)


def _angles(rotary_dim=SHAPE[-1], per_row=False):
    length = SHAPE[2]
    positions = torch.stack([torch.arange(length), torch.arange(length) * 3 + 5]) if per_row else torch.arange(length)
    cos, sin = rope_cos_sin(positions, rope_inv_freq(rotary_dim))
    return (cos[:, None], sin[:, None]) if per_row else (cos, sin)  # (B, 1, T, r/2) or (T, r/2)


class _Spy:
    """The real process-wide compiled kernel, counting its calls (the computation is untouched)."""

    def __init__(self):
        self.kernel, self.calls = rotation.compiled_rotation(), 0

    def __call__(self):
        self.calls += 1
        return self.kernel


# ------------------------------------------------------------------ backward: the inverse rotation


@pytest.mark.parametrize("layout", rotation.ROPE_LAYOUTS)
@pytest.mark.parametrize("rotary_dim", [8, 6])
@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("grad_kind", ["sum", "random", "strided"])
def test_gradient_is_exactly_the_inverse_rotation(layout, rotary_dim, per_row, grad_kind):
    cos, sin = _angles(rotary_dim, per_row)
    x = torch.randn(SHAPE, requires_grad=True)
    grad = {
        "sum": torch.ones(()).expand(SHAPE),  # what a.sum() hands back: one expanded scalar
        "random": torch.randn(SHAPE),
        "strided": torch.randn(SHAPE[0], SHAPE[2], SHAPE[1], SHAPE[3]).transpose(1, 2),
    }[grad_kind]
    out = rotation.apply_rotary(x, cos, sin, layout)
    out.backward(grad)
    expected = rotation.rotate_reference(grad, cos, -sin, layout)  # the transpose of a rotation
    assert torch.equal(x.grad, expected)
    assert_close(x.grad, rotation.rotate_reference(grad.contiguous(), cos, -sin, layout))


def test_backward_reads_the_gradient_without_a_dense_copy():
    """Issue 27: copying the expanded gradient of a sum to a dense tensor made the backward 3x slower."""
    cos, sin = _angles()
    q, k = torch.randn(SHAPE, requires_grad=True), torch.randn(SHAPE, requires_grad=True)
    a, b = rotation.apply_rotary(q, cos, sin), rotation.apply_rotary(k, cos, sin)
    loss = a.sum() + b.sum()
    with torch.profiler.profile() as profile:
        loss.backward()
    ops = {event.name for event in profile.events()}
    assert "_RotationBackward" in ops or any("Rotation" in name for name in ops)
    assert not ops & {"aten::clone", "aten::contiguous", "aten::copy_"}, sorted(ops)


# ------------------------------------------------------- the compiled kernel in bf16 and fp16


@pytest.mark.slow
@compiles
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout, rotary_dim", [("half", 8), ("interleaved", 6)])
def test_half_precision_kernel_is_as_accurate_as_the_eager_path(dtype, layout, rotary_dim):
    """Read and write bf16/fp16, rotate in float32: against an fp32 reference, no worse than eager."""
    cos, sin = rope_cos_sin(torch.arange(40) * 997, rope_inv_freq(rotary_dim))  # large angles
    x32 = torch.randn(2, 3, 40, 8) * 4
    grad32 = torch.randn(2, 3, 40, 8)
    x, grad = x32.to(dtype), grad32.to(dtype)
    reference = rotation.apply_rotary(x.float(), cos, sin, layout)  # fp32 maths on the same inputs
    reference_grad = rotation.rotate_reference(grad.float(), cos, -sin, layout)
    results = {}
    for compiled in (False, True):
        leaf = x.clone().requires_grad_()
        out = rotation.apply_rotary(leaf, cos, sin, layout, compiled=compiled)
        out.backward(grad)
        assert out.dtype == leaf.grad.dtype == dtype
        results[compiled] = (out, leaf.grad)
    for index, truth in enumerate((reference, reference_grad)):
        eager, fast = results[False][index].float(), results[True][index].float()
        eager_error, fast_error = (eager - truth).abs(), (fast - truth).abs()
        assert fast_error.max() <= eager_error.max() + 1e-6 * truth.abs().max()
        assert_close(fast, eager, atol=0, rtol=torch.finfo(dtype).eps)  # at most one rounding apart


@compiles
def test_half_precision_kernel_rounds_once():
    """bf16 in, float32 rotation, one rounding out: equals rotating in fp32 and casting, not bf16 maths."""
    cos, sin = rope_cos_sin(torch.arange(64), rope_inv_freq(8))
    x = (torch.randn(1, 2, 64, 8) * 3).to(torch.bfloat16)
    with torch.no_grad():
        fast = rotation.apply_rotary(x, cos, sin, compiled=True)
    once = rotation.rotate_reference(x.float(), cos, sin).to(torch.bfloat16)
    in_bf16 = rotation.rotate_reference(x, cos.to(torch.bfloat16), sin.to(torch.bfloat16))
    mismatched = (fast != once).float().mean().item()
    assert mismatched < 0.01  # a rare float32 contraction difference flips a rounding, no more
    assert (fast.float() - once.float()).abs().max() < (in_bf16.float() - once.float()).abs().max()


@compiles
def test_compile_failure_in_half_precision_falls_back_to_the_same_numbers(monkeypatch):
    def broken():
        raise RuntimeError("no compiler")

    forget_logged()
    state = rotation.CompiledRotation(build=broken)
    monkeypatch.setattr(rotation, "compiled_rotation", lambda: state)
    cos, sin = _angles()
    x = torch.randn(SHAPE).to(torch.bfloat16).requires_grad_()
    out = rotation.apply_rotary(x, cos, sin, compiled=True)
    out.backward(torch.ones_like(out))
    eager = x.detach().clone().requires_grad_()
    expected = rotation.apply_rotary(eager, cos, sin, compiled=False)
    expected.backward(torch.ones_like(expected))
    assert state.error == "no compiler"
    assert torch.equal(out, expected) and torch.equal(x.grad, eager.grad)


# --------------------------------------------------------------- the dispatch's device policy


def test_device_policy_compiles_on_cuda_only():
    assert rotation.compiled_by_default(torch.device("cuda", 0))
    assert not rotation.compiled_by_default(torch.device("cpu"))
    assert not rotation.compiled_by_default(torch.device("meta"))
    assert not rotation.compile_available("meta")


def test_cpu_default_stays_on_the_eager_path(monkeypatch):
    spy = _Spy()
    monkeypatch.setattr(rotation, "compiled_rotation", spy)
    cos, sin = _angles()
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = torch.randn(SHAPE, dtype=dtype, requires_grad=True)
        out = rotation.apply_rotary(x, cos, sin)  # compiled=None: the device's policy
        out.sum().backward()
        expected = rotation.rotate_reference(x.detach().float(), cos, sin).to(dtype)
        assert torch.equal(out, expected)  # the eager numbers, bit for bit
    assert spy.calls == 0


@compiles
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cuda_policy_takes_the_compiled_kernel(monkeypatch, dtype):
    """The device policy mocked to CUDA's (the computation is the real kernel, built for the CPU)."""
    spy = _Spy()
    monkeypatch.setattr(rotation, "compiled_rotation", spy)
    monkeypatch.setattr(rotation, "compiled_by_default", lambda device: True)
    cos, sin = _angles()
    x = torch.randn(SHAPE, dtype=dtype, requires_grad=True)
    out = rotation.apply_rotary(x, cos, sin)
    out.backward(torch.ones_like(out))
    assert spy.calls == 1  # the forward (its backward runs the kernel saved on the autograd node)
    assert out.dtype == x.grad.dtype == dtype
    eager = rotation.apply_rotary(x.detach(), cos, sin, compiled=False)
    assert_close(out, eager)


@compiles
def test_the_module_default_follows_the_device_policy(monkeypatch):
    """RotaryEmbedding() leaves the choice to the policy; compiled=False keeps the eager path everywhere."""
    spy = _Spy()
    monkeypatch.setattr(rotation, "compiled_rotation", spy)
    monkeypatch.setattr(rotation, "compiled_by_default", lambda device: True)
    q = torch.randn(SHAPE, dtype=torch.bfloat16)
    default, eager = RotaryEmbedding(8), RotaryEmbedding(8, compiled=False)
    assert default.compiled is None and "compiled" not in repr(default) and "compiled=False" in repr(eager)
    eager(q, q)
    assert spy.calls == 0
    out, _ = default(q, q)
    assert spy.calls == 2 and out.dtype == torch.bfloat16
    assert_close(out, eager(q, q)[0])


@pytest.mark.parametrize(
    "case",
    ["asked_off", "float64", "learned_angles", "cannot_compile"],
)
def test_cuda_policy_keeps_the_eager_path_where_the_kernel_does_not_apply(monkeypatch, caplog, case):
    spy = _Spy()
    monkeypatch.setattr(rotation, "compiled_rotation", spy)
    monkeypatch.setattr(rotation, "compiled_by_default", lambda device: True)
    if case == "cannot_compile":
        monkeypatch.setattr(rotation, "compile_available", lambda device_type="cpu": False)
    forget_logged()
    cos, sin = _angles()
    x = torch.randn(SHAPE, dtype=torch.float64 if case == "float64" else torch.float32)
    if case == "learned_angles":
        cos, sin = cos.clone().requires_grad_(), sin.clone().requires_grad_()
    with caplog.at_level("WARNING"):
        out = rotation.apply_rotary(x, cos, sin, compiled=False if case == "asked_off" else None)
    assert spy.calls == 0
    assert_close(out, rotation.rotate_reference(x, cos.detach().to(x.dtype), sin.detach().to(x.dtype)))
    assert "rotating eagerly" not in caplog.text  # the device default falls back silently


def test_asking_for_the_kernel_where_it_cannot_build_is_logged_once(monkeypatch, caplog):
    monkeypatch.setattr(rotation, "compile_available", lambda device_type="cpu": False)
    forget_logged()
    cos, sin = _angles()
    with caplog.at_level("WARNING"):
        for _ in range(2):
            rotation.apply_rotary(torch.randn(SHAPE), cos, sin, compiled=True)
    assert caplog.text.count("cannot build cpu kernels here; rotating eagerly") == 1


# ------------------------------------------------------------------------- no host reads


def _forbid_host_reads(monkeypatch):
    def refuse(name):
        def read(*args, **kwargs):
            raise AssertionError(f"RoPE read a tensor's value back to the host: Tensor.{name}")

        return read

    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, refuse(name))


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=compiles)])
@pytest.mark.parametrize("max_len, explicit", [(None, False), (32, False), (None, True), (32, True)])
def test_forward_and_backward_never_read_a_value_back(monkeypatch, compiled, max_len, explicit):
    rope = RotaryEmbedding(8, max_len=max_len, compiled=compiled)
    _never_reads(monkeypatch, rope, explicit)


def test_dynamic_frequencies_never_read_a_value_back(monkeypatch):
    """Dynamic NTK's frequencies follow the largest position, on the device."""
    from posembed.schemes.rotary.scaling import DynamicNTKRotary

    _never_reads(monkeypatch, DynamicNTKRotary(8, factor=2.0, original_max_len=8), explicit=True)


def _never_reads(monkeypatch, rope, explicit):
    positions = torch.stack([torch.arange(SHAPE[2]), torch.arange(SHAPE[2]) + 7]) if explicit else None

    def step():
        q, k = torch.randn(SHAPE, requires_grad=True), torch.randn(SHAPE, requires_grad=True)
        a, b = rope(q, k, positions)
        (a.sum() + b.sum()).backward()
        return q.grad

    expected = step()  # the first call compiles (the compiler may read values; RoPE may not)
    with monkeypatch.context() as patch:
        _forbid_host_reads(patch)
        got = step()
    assert got.shape == expected.shape


def test_host_read_guard_catches_a_read(monkeypatch):
    """The guard above can fail: a value read inside it raises."""
    with monkeypatch.context() as patch:
        _forbid_host_reads(patch)
        with pytest.raises(AssertionError, match="Tensor.item"):
            torch.ones(1).item()
        with pytest.raises(AssertionError, match="Tensor.__bool__"):
            bool(torch.ones(1))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("explicit", [False, True])
def test_rope_on_cuda_never_synchronises(dtype, explicit):
    device = torch.device("cuda")
    rope = RotaryEmbedding(64, max_len=256, device=device)  # compiled=None: the compiled kernel on CUDA
    positions = torch.arange(128, device=device).expand(2, 128) if explicit else None

    def step():
        q = torch.randn(2, 4, 128, 64, device=device, dtype=dtype, requires_grad=True)
        k = torch.randn(2, 4, 128, 64, device=device, dtype=dtype, requires_grad=True)
        a, b = rope(q, k, positions)
        (a.float().sum() + b.float().sum()).backward()
        return q.grad

    step()  # compiles
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        grad = step()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert grad.dtype == dtype and grad.device.type == "cuda"
