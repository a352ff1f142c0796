"""The embedding block's CUDA path (one compiled kernel) and its device-side id checks, on the CPU.

No GPU is needed: the device policy is mocked (``devices._device_type`` says ``cuda``, so the
CPU-tuned path and the host reads are off; ``compiled_applies`` says yes), and Inductor compiles
the same formula for the CPU that it compiles to Triton on CUDA. Two compiles in all (eval and
train, at one small shape): each costs seconds. ``test_block_on_cuda_never_synchronises`` runs
the real thing under ``torch.cuda.set_sync_debug_mode("error")``.
"""

from __future__ import annotations

import pytest
import torch

from posembed._utils import devices
from posembed._utils.devices import host_checks
from posembed.kernels import embedding_compiled
from posembed.kernels.embedding_compiled import compiled_applies, embedding_formula
from posembed.nn.embedding import block as embeddings_module
from posembed.nn.embedding import fast as embedding_fast
from posembed.nn.embedding.block import TransformerEmbeddings
from posembed.nn.embedding.checks import check_ids
from posembed.schemes.absolute.learned import LearnedAbsolute
from tests.helpers import assert_close

VOCAB, WIDTH, POSITIONS, BATCH, LENGTH = 40, 32, 24, 4, 16
#: gradients summed over tokens in another order than eager's (scatter-adds, fused reductions): fp32, a few ulps per
#: term
GRAD_ATOL, GRAD_RTOL = 3e-5, 1e-4


def _pair(dropout: float) -> tuple[TransformerEmbeddings, TransformerEmbeddings]:
    """The block (fast path) and a copy that always runs eager (``fused=False``)."""
    torch.manual_seed(0)
    fast = TransformerEmbeddings(VOCAB, WIDTH, position=LearnedAbsolute(POSITIONS, WIDTH), dropout=dropout)
    with torch.no_grad():  # a non-trivial LayerNorm, so its gradients are compared too
        fast.norm.weight.uniform_(0.5, 1.5)
        fast.norm.bias.normal_()
    eager = TransformerEmbeddings(
        VOCAB, WIDTH, position=LearnedAbsolute(POSITIONS, WIDTH), dropout=dropout, fused=False
    )
    eager.load_state_dict(fast.state_dict())
    return fast, eager


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, LENGTH), generator=generator)
    ids[0, :3] = 0  # padding tokens: their row gets no gradient
    types = torch.randint(0, 2, (BATCH, LENGTH), generator=generator)
    return ids, types


def _grads(module, out, grad) -> dict[str, torch.Tensor]:
    module.zero_grad(set_to_none=True)
    out.backward(grad)
    return {name: p.grad.clone() for name, p in module.named_parameters()}


@pytest.fixture
def on_cuda(monkeypatch):
    """The device policy of a CUDA machine with Triton, for the CPU's tensors."""
    monkeypatch.setattr(devices, "_device_type", lambda device: "cuda")
    monkeypatch.setattr(embeddings_module, "compiled_applies", lambda device: True)


def test_the_policy_picks_the_compiled_kernel_on_cuda_only(monkeypatch):
    block, _ = _pair(0.0)
    assert block._fused_path(torch.arange(LENGTH)) == "chunked"  # the CPU keeps its tuned path
    assert not compiled_applies(torch.device("cpu")) and not compiled_applies(torch.device("meta"))
    monkeypatch.setattr(embedding_compiled, "_triton_available", lambda: True)
    assert compiled_applies(torch.device("cuda"))
    monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: True)
    assert not compiled_applies(torch.device("cuda"))  # atomic scatter-adds: not deterministic
    monkeypatch.undo()
    monkeypatch.setattr(embedding_compiled, "_triton_available", lambda: False)
    assert not compiled_applies(torch.device("cuda"))  # CUDA without Triton: the eager block
    monkeypatch.setattr(devices, "_device_type", lambda device: "cuda")
    assert block._fused_path(torch.arange(LENGTH)) is None  # compiled_applies is False for these tensors
    monkeypatch.setattr(embeddings_module, "compiled_applies", lambda device: True)
    assert block._fused_path(torch.arange(LENGTH)) == "compiled"
    assert block._fused_path(torch.arange(LENGTH).float()) is None  # what no fast path covers stays eager
    assert TransformerEmbeddings(VOCAB, WIDTH, position=LearnedAbsolute(POSITIONS, WIDTH), fused=False)._fused_path(
        torch.arange(LENGTH)) is None  # fmt: skip


def test_dispatch_on_cuda_calls_the_compiled_kernel_not_the_chunked_one(on_cuda, monkeypatch):
    """The dispatch alone (the kernel stood in for by its eager formula: nothing compiles here)."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return embedding_formula(*args, **kwargs)

    monkeypatch.setattr(embedding_fast, "compiled_embedding", spy)
    monkeypatch.setattr(embedding_fast, "fused_embedding", lambda *a, **k: pytest.fail("chunked path on cuda"))
    block, eager = _pair(0.1)
    ids, types = _inputs()
    block.eval(), eager.eval()
    assert_close(block(ids, token_type_ids=types), eager(ids, token_type_ids=types))
    assert calls == [{"eps": 1e-12, "dropout": 0.0, "training": False, "padding_idx": 0}]  # the block drops


def test_device_side_checks_name_the_tensor_and_the_limit(on_cuda):
    """Off the CPU an id out of range is asserted on the device (synchronous on the CPU, so it shows here)."""
    block, _ = _pair(0.0)
    ids, types = _inputs()
    assert not host_checks(ids.device)
    with pytest.raises(RuntimeError, match=r"input_ids holds a value outside \[0, 40\); vocab_size=40"):
        block(ids + VOCAB)
    with pytest.raises(RuntimeError, match=r"token_type_ids holds a value outside \[0, 2\)"):
        block(ids, token_type_ids=types + 1)
    with pytest.raises(RuntimeError, match=r"position_ids holds a value outside \[0, 24\)"):
        block(ids, position_ids=torch.arange(LENGTH) + POSITIONS - 1)
    with pytest.raises(TypeError, match="must hold integers"):
        check_ids(ids.float(), "input_ids", VOCAB)  # the dtype is still checked without reading a value


def test_debug_switch_reads_the_values_on_every_device(on_cuda, monkeypatch):
    monkeypatch.setenv("POSEMBED_HOST_CHECKS", "1")
    block, _ = _pair(0.0)
    ids, _ = _inputs()
    with pytest.raises(ValueError, match="input_ids holds 79, outside"):
        block(ids + VOCAB)


def test_the_cpu_keeps_its_clear_errors():
    block, _ = _pair(0.0)
    ids, _ = _inputs()
    with pytest.raises(ValueError, match=r"input_ids holds 79, outside \[0, 40\)"):
        block(ids + VOCAB)


def test_compiled_kernel_equals_eager_in_eval_forward_and_gradients(on_cuda):
    block, eager = _pair(0.1)
    block.eval(), eager.eval()
    ids, types = _inputs()
    grad = torch.randn(BATCH, LENGTH, WIDTH)
    expected = eager(ids, token_type_ids=types)
    actual = block(ids, token_type_ids=types)
    assert_close(actual, expected)
    actual_grads, expected_grads = _grads(block, actual, grad), _grads(eager, expected, grad)
    for name in expected_grads:
        assert_close(actual_grads[name], expected_grads[name], atol=GRAD_ATOL, rtol=GRAD_RTOL, msg=name)
    assert not actual_grads["token_embeddings.weight"][0].any()  # the padding row


def _train_step(block, eager, ids, types, grad, p):
    """The compiled block in training, and the eager block with the same keep mask: outputs and gradients."""
    actual = block(ids, token_type_ids=types)
    keep = actual != 0
    eager.eval()  # no dropout of its own: the compiled kernel's mask is applied instead
    expected = eager(ids, token_type_ids=types) * keep / (1 - p)
    return actual, expected, keep, _grads(block, actual, grad), _grads(eager, expected, grad)


def test_compiled_kernel_in_training_drops_with_probability_p(on_cuda):
    p = 0.25
    block, eager = _pair(p)
    block.train()
    ids, types = _inputs()
    grad = torch.randn(BATCH, LENGTH, WIDTH)
    actual, expected, keep, actual_grads, expected_grads = _train_step(block, eager, ids, types, grad, p)
    count = keep.numel()
    assert abs(keep.float().mean().item() - (1 - p)) < 5 * ((p * (1 - p) / count) ** 0.5)
    assert_close(actual, expected)  # kept values scaled by exactly 1 / (1 - p)
    for name in expected_grads:
        assert_close(actual_grads[name], expected_grads[name], atol=GRAD_ATOL, rtol=GRAD_RTOL, msg=name)
    again = block(ids, token_type_ids=types)
    assert not torch.equal(again != 0, keep)  # a fresh mask each call


def test_the_cuda_path_reads_no_value_back_to_the_host(on_cuda, monkeypatch):
    """Forward and backward of the compiled path with every host read of a tensor made to fail.

    Warmed up first, in both call forms the loop makes: compiling reads values (once per shape
    and form; torch 2.11 on an H200 read one while compiling the explicit-ids form); the steps
    after it must not.
    """
    block, _ = _pair(0.25)
    block.train()
    ids, types = _inputs()
    grad = torch.randn(BATCH, LENGTH, WIDTH)
    block(ids, token_type_ids=types).backward(grad)  # compiles (or reuses the cached graph)
    block(ids, position_ids=torch.arange(LENGTH), token_type_ids=types)  # and the explicit-ids form

    def host_read(*args, **kwargs):
        raise AssertionError("a tensor's value was read back to the host")

    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, host_read)
    for _ in range(2):
        block.zero_grad(set_to_none=True)
        out = block(ids, token_type_ids=types)
        out.backward(grad)
        block(ids, position_ids=torch.arange(LENGTH), token_type_ids=types)
    monkeypatch.undo()
    assert block.token_embeddings.weight.grad is not None and out.shape == (BATCH, LENGTH, WIDTH)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_block_on_cuda_never_synchronises(dtype):
    """The block's forward and backward on a GPU under ``set_sync_debug_mode("error")`` (after a
    warm-up, which compiles), and the compiled kernel against the eager block there."""
    torch.manual_seed(0)
    table = LearnedAbsolute(POSITIONS, WIDTH, device="cuda", dtype=dtype)  # every table in one dtype
    block = TransformerEmbeddings(VOCAB, WIDTH, position=table, device="cuda", dtype=dtype)
    assert block._fused_path(torch.arange(LENGTH, device="cuda")) == "compiled"
    ids, types = (t.cuda() for t in _inputs())
    grad = torch.randn(BATCH, LENGTH, WIDTH, device="cuda", dtype=dtype)
    for mode in (True, False):
        block.train(mode)
        block(ids, token_type_ids=types).backward(grad)  # warm-up: compiles
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            block.zero_grad(set_to_none=True)
            block(ids, token_type_ids=types).backward(grad)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    eager = TransformerEmbeddings(VOCAB, WIDTH, position=LearnedAbsolute(POSITIONS, WIDTH, device="cuda", dtype=dtype),
                                  device="cuda", dtype=dtype, fused=False).eval()  # fmt: skip
    eager.load_state_dict(block.state_dict())
    assert_close(block.eval()(ids, token_type_ids=types), eager(ids, token_type_ids=types))


def test_default_positions_past_the_table_are_the_schemes_error_without_a_device_read(on_cuda):
    """No position ids given: ``arange(T)`` is checked by its length against the table's rows (a host number)."""
    block = TransformerEmbeddings(VOCAB, WIDTH, position=LearnedAbsolute(8, WIDTH))
    with pytest.raises(ValueError, match=r"position_ids holds 15, outside \[0, 8\): input_ids of length 16 .* 8 rows"):
        block(torch.randint(0, VOCAB, (2, 16)))
