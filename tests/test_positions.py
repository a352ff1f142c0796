import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.schemes.positions import (
    default_positions,
    positions_from_documents,
    positions_from_mask,
    positions_with_offset,
    resolve_positions,
)


@given(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.integers(0, 3), st.booleans())
@settings(max_examples=50, deadline=None)
def test_mask_positions_count_real_tokens(lengths, extra, left):
    width = max(lengths) + extra
    rows = []
    for n in lengths:
        row = [1] * n + [0] * (width - n)
        rows.append(row[::-1] if left else row)
    mask = torch.tensor(rows, dtype=torch.long).reshape(len(rows), width)
    positions = positions_from_mask(mask)
    for row_mask, row_pos in zip(mask, positions):
        assert row_pos[row_mask.bool()].tolist() == list(range(int(row_mask.sum())))
        assert (row_pos[~row_mask.bool()] == 0).all()


def test_full_mask_equals_default():
    assert torch.equal(positions_from_mask(torch.ones(2, 7, dtype=torch.long))[0], default_positions(7))


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_document_positions_reset(doc_lengths):
    doc_ids = torch.cat([torch.full((n,), i) for i, n in enumerate(doc_lengths)])
    expected = torch.cat([torch.arange(n) for n in doc_lengths])
    assert torch.equal(positions_from_documents(doc_ids), expected)
    assert torch.equal(positions_from_documents(doc_ids[None].repeat(2, 1))[1], expected)


def test_single_document_equals_default():
    assert torch.equal(positions_from_documents(torch.zeros(9, dtype=torch.long)), default_positions(9))


def test_offset_positions():
    assert torch.equal(positions_with_offset(4, 0), default_positions(4))
    assert positions_with_offset(3, torch.tensor([1, 10])).tolist() == [[1, 2, 3], [10, 11, 12]]


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: positions_with_offset(3, -1), ValueError, r"offset must be >= 0, got -1"),
        (lambda: positions_with_offset(3, 1.5), TypeError, r"offset must be an int or a tensor, got 1\.5"),
        (
            lambda: positions_from_mask(torch.ones(3)),
            ValueError,
            r"attention_mask must have shape \(B, T\), got \(3,\)",
        ),
        (
            lambda: positions_from_mask(torch.ones(2, 3)),
            TypeError,
            r"0/1 integers or booleans, got dtype torch\.float32",
        ),
        (lambda: positions_from_mask(torch.full((2, 3), 2)), ValueError, r"attention_mask must hold only 0 and 1"),
        (lambda: positions_from_mask(torch.full((2, 3), -1)), ValueError, r"attention_mask must hold only 0 and 1"),
        (lambda: positions_from_mask(torch.ones(1, 2, 3, dtype=torch.long)), ValueError, r"\(B, T\), got \(1, 2, 3\)"),
        (lambda: positions_with_offset(2, torch.tensor(3)), ValueError, r"a \(B,\) tensor, got shape \(\)"),
        (lambda: positions_from_mask("1100"), TypeError, r"attention_mask must be a tensor .* got str"),
        (
            lambda: positions_from_documents(torch.zeros(2, 3, 4)),
            ValueError,
            r"shape \(T,\) or \(B, T\), got \(2, 3, 4\)",
        ),
        (
            lambda: positions_from_documents([[0, 1], [2]]),
            TypeError,
            r"document_ids must be a tensor or a \(nested\) list",
        ),
        (
            lambda: resolve_positions(torch.zeros(4, dtype=torch.long), 5, None),
            ValueError,
            r"position_ids has shape \(4,\); expected \(5,\) or \(B, 5\)",
        ),
        (
            lambda: resolve_positions(torch.zeros(5), 5, None),
            TypeError,
            r"integers \(torch\.long\), got dtype torch\.float32",
        ),
        (lambda: resolve_positions(torch.ones(5, dtype=torch.bool), 5, None), TypeError, r"got dtype torch\.bool"),
        (
            lambda: positions_with_offset(2, torch.tensor([[1]])),
            ValueError,
            r"offset must be an int or a \(B,\) tensor",
        ),
        (lambda: positions_with_offset(2, torch.tensor([3, -2])), ValueError, r"offset must be >= 0, got -2"),
        (lambda: positions_with_offset(2, True), TypeError, r"offset must be an int or a tensor, got True"),
        (lambda: positions_with_offset(True, 0), TypeError, r"length must be an int, got True"),
    ],
)
def test_bad_positions(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    "length, offset, error, match",
    [
        (3, torch.tensor([1.5, 2.0]), TypeError, r"offset must hold integers.*float32"),
        (3, torch.tensor([True]), TypeError, r"offset must hold integers.*bool"),
        (-2, 0, ValueError, r"length must be >= 0 \(the number of new tokens\), got -2"),
        (-2, torch.tensor([0, 4]), ValueError, "length must be >= 0"),
        (2.0, 0, TypeError, "length must be an int, got 2.0"),
    ],
)
def test_offset_positions_refuse_float_offsets_and_negative_lengths(length, offset, error, match):
    with pytest.raises(error, match=match):
        positions_with_offset(length, offset)
    assert positions_with_offset(0, 7).shape == (0,)


# --- hand-computed values: documents that do not come in increasing order ---------------------


@pytest.mark.parametrize(
    "ids, expected",
    [
        ([0, 0, 1, 1, 0, 0], [0, 1, 0, 1, 0, 1]),  # a later document may reuse a smaller id
        ([2, 2, 1, 0, 0, 0], [0, 1, 0, 0, 1, 2]),  # decreasing ids
        ([5, 3, 5, 3], [0, 0, 0, 0]),  # every token its own document
        ([1, 1, 1], [0, 1, 2]),
        ([7], [0]),
        ([-1, -1, 4, 4, -1], [0, 1, 0, 1, 0]),  # any integer is an id, negative ones too
    ],
)
def test_document_positions_hand_values(ids, expected):
    assert positions_from_documents(torch.tensor(ids)).tolist() == expected
    assert positions_from_documents(ids).tolist() == expected  # list input
    batch = positions_from_documents(torch.tensor([ids, ids[::-1]]))
    assert batch.tolist() == [expected, positions_from_documents(ids[::-1]).tolist()]
    assert batch.dtype == torch.long


def test_document_positions_rows_are_independent():
    ids = torch.tensor([[0, 0, 1, 1, 0, 0], [3, 3, 3, 3, 2, 2]])
    assert positions_from_documents(ids).tolist() == [[0, 1, 0, 1, 0, 1], [0, 1, 2, 3, 0, 1]]


def _documents_reference(ids: list[int]) -> list[int]:
    """Plain Python: a document is a run of equal consecutive ids."""
    out = []
    for index, value in enumerate(ids):
        out.append(0 if index == 0 or value != ids[index - 1] else out[-1] + 1)
    return out


@given(st.lists(st.lists(st.integers(-3, 3), min_size=6, max_size=6), min_size=1, max_size=3))
@settings(max_examples=60, deadline=None)
def test_document_positions_equal_a_plain_python_reference(rows):
    """Any ids, in any order (the generator of ``test_document_positions_reset`` only counts up)."""
    got = positions_from_documents(torch.tensor(rows))
    assert got.tolist() == [_documents_reference(row) for row in rows]
    assert positions_from_documents(torch.tensor(rows[0])).tolist() == _documents_reference(rows[0])


def test_empty_inputs_keep_their_shape():
    assert positions_from_documents(torch.zeros(0, dtype=torch.long)).shape == (0,)
    assert positions_from_documents(torch.zeros(2, 0, dtype=torch.long)).shape == (2, 0)
    assert positions_from_mask(torch.zeros(2, 0, dtype=torch.long)).shape == (2, 0)
    assert positions_with_offset(0, torch.tensor([3, 4])).shape == (2, 0)
    assert positions_with_offset(2, torch.zeros(0, dtype=torch.long)).shape == (0, 2)


# --- hand-computed values: masks, offsets, bounds --------------------------------------------


@pytest.mark.parametrize(
    "mask, expected",
    [
        ([[1, 1, 1, 0, 0]], [[0, 1, 2, 0, 0]]),
        ([[0, 0, 1, 1, 1]], [[0, 0, 0, 1, 2]]),
        ([[0, 1, 0, 1, 1]], [[0, 0, 0, 1, 2]]),  # holes: real tokens still count 0, 1, 2
        ([[0, 0, 0]], [[0, 0, 0]]),
        ([[1]], [[0]]),
        ([[True, False, True]], [[0, 0, 1]]),
    ],
)
def test_mask_positions_hand_values(mask, expected):
    got = positions_from_mask(torch.tensor(mask))
    assert got.tolist() == expected and got.dtype == torch.long
    assert positions_from_mask(mask).tolist() == expected


def test_offset_positions_hand_values():
    assert positions_with_offset(3, 5).tolist() == [5, 6, 7]
    assert positions_with_offset(1, 0).tolist() == [0]
    assert positions_with_offset(2, [0, 4]).tolist() == [[0, 1], [4, 5]]
    assert positions_with_offset(2, torch.tensor([7], dtype=torch.int32)).dtype == torch.long
    assert default_positions(3).tolist() == [0, 1, 2] and default_positions(3).dtype == torch.long
    assert default_positions(0).shape == (0,)


def test_offset_positions_stop_exactly_at_the_largest_long():
    from posembed.schemes.positions import MAX_POSITION

    assert MAX_POSITION == 2**63 - 1
    assert positions_with_offset(1, MAX_POSITION).tolist() == [MAX_POSITION]
    assert positions_with_offset(2, MAX_POSITION - 1).tolist() == [MAX_POSITION - 1, MAX_POSITION]
    assert positions_with_offset(0, MAX_POSITION).shape == (0,)
    assert positions_with_offset(1, torch.tensor([MAX_POSITION])).tolist() == [[MAX_POSITION]]
    last = r"offset 9223372036854775807 \+ length 2 - 1 = 9223372036854775808 is past the largest torch.long position"
    with pytest.raises(ValueError, match=last):
        positions_with_offset(2, MAX_POSITION)
    with pytest.raises(ValueError, match=r"offset 9223372036854775806 \+ length 3 - 1"):
        positions_with_offset(3, torch.tensor([0, MAX_POSITION - 1]))


def test_resolve_positions_hand_values():
    assert resolve_positions(None, 4, None).tolist() == [0, 1, 2, 3]
    assert resolve_positions([3, 1, 2], 3, None).tolist() == [3, 1, 2]
    given_ids = torch.tensor([[4, 5], [0, 9]])
    assert resolve_positions(given_ids, 2, None) is given_ids  # passed through, not copied
    assert resolve_positions(torch.tensor([1, 0], dtype=torch.int32), 2, None).dtype == torch.int32
    with pytest.raises(ValueError, match=r"position_ids has shape \(1, 2, 3\); expected \(3,\) or \(B, 3\)"):
        resolve_positions(torch.zeros(1, 2, 3, dtype=torch.long), 3, None)


# --- lengths, devices and host reads ----------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(6,), (2, 6), (4,), (2, 4)], ids=["longer", "longer_batched", "shorter", "shorter_batched"]
)
def test_resolve_positions_refuses_ids_of_another_length(shape):
    """Position ids longer than the sequence are refused as much as shorter ones, naming both lengths."""
    ids = torch.zeros(shape, dtype=torch.long)
    with pytest.raises(ValueError, match=rf"shape \({', '.join(map(str, shape))},?\); expected \(5,\) or \(B, 5\)"):
        resolve_positions(ids, 5, None)
    assert resolve_positions(torch.zeros(shape[:-1] + (5,), dtype=torch.long), 5, None).shape == shape[:-1] + (5,)


def test_resolve_positions_lands_on_the_device_asked():
    on_meta = resolve_positions(torch.arange(3), 3, "meta")
    assert on_meta.device.type == "meta" and on_meta.shape == (3,)
    assert resolve_positions([0, 1, 2], 3, "meta").device.type == "meta"
    assert resolve_positions(None, 3, "meta").device.type == "meta"
    ids = torch.arange(3)
    assert resolve_positions(ids, 3, "cpu") is ids  # already there: not copied


def test_offset_positions_are_built_on_the_offsets_device():
    """A (B,) offset decides the device: meta in, meta out (no value read), and the CPU's own."""
    offset = torch.tensor([2, 7], device="meta")
    out = positions_with_offset(3, offset)
    assert out.device.type == "meta" and out.shape == (2, 3) and out.dtype == torch.long
    assert positions_with_offset(3, offset, device="meta").device.type == "meta"
    assert positions_with_offset(0, offset).device.type == "meta"
    cpu = positions_with_offset(3, torch.tensor([2, 7]))
    assert cpu.device == torch.device("cpu") and cpu.tolist() == [[2, 3, 4], [7, 8, 9]]
    assert positions_with_offset(3, 4, device="meta").device.type == "meta"  # an int offset: the device argument
    with pytest.raises(ValueError, match=r"offset is a tensor on cpu but device='meta' was asked"):
        positions_with_offset(3, torch.tensor([2, 7]), device="meta")


def test_offset_positions_follow_the_offset_not_the_default_device(monkeypatch):
    """Where the base ``arange`` is built: on the offset's device, read from the tensor itself."""
    import posembed.schemes.positions as positions

    seen = []
    real = positions.default_positions

    def spy(length, device=None):
        seen.append(device)
        return real(length, device=device)

    monkeypatch.setattr(positions, "default_positions", spy)
    positions.positions_with_offset(2, torch.tensor([1], device="meta"))
    positions.positions_with_offset(2, torch.tensor([1]))
    assert [torch.device(d).type for d in seen] == ["meta", "cpu"]


class _HostReadRefused(AssertionError):
    pass


@pytest.fixture
def refuse_host_reads(monkeypatch):
    """Any read of a tensor's value back to Python raises (item, tolist, bool, int, float, index)."""

    def refuse(name):
        def method(self, *args, **kwargs):
            raise _HostReadRefused(f"host read: Tensor.{name}")

        return method

    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, refuse(name))


def test_value_checks_off_the_cpu_run_on_the_device(monkeypatch, refuse_host_reads):
    """With the device policy seen as CUDA, the checks read nothing back and assert on the device
    (torch._assert_async: on CPU tensors it raises at once, naming the check)."""
    import posembed._utils.devices as devices
    import posembed.schemes.positions as positions

    monkeypatch.setattr(devices, "cpu_tuned", lambda device: False)  # the device policy, seen as CUDA
    monkeypatch.delenv("POSEMBED_HOST_CHECKS", raising=False)
    assert positions.positions_with_offset(2, torch.tensor([3, 0])).shape == (2, 2)
    assert positions.positions_from_mask(torch.tensor([[1, 1, 0]])).shape == (1, 3)
    assert positions.resolve_positions(torch.arange(3), 3, "cpu").shape == (3,)
    with pytest.raises(
        RuntimeError, match=r"offset must be >= 0, got another value \(checked on cpu; POSEMBED_HOST_CHECKS=1"
    ):
        positions.positions_with_offset(2, torch.tensor([3, -1]))
    with pytest.raises(
        RuntimeError, match=r"an offset is past the largest torch.long position .* largest offset for length 3"
    ):
        positions.positions_with_offset(3, torch.tensor([0, positions.MAX_POSITION - 1]))
    with pytest.raises(RuntimeError, match=r"attention_mask must hold only 0 and 1, got another value"):
        positions.positions_from_mask(torch.tensor([[1, 2]]))


def test_the_debug_switch_names_the_value_off_the_cpu(monkeypatch):
    import posembed._utils.devices as devices
    import posembed.schemes.positions as positions

    monkeypatch.setattr(devices, "cpu_tuned", lambda device: False)  # the device policy, seen as CUDA
    monkeypatch.setenv("POSEMBED_HOST_CHECKS", "1")
    with pytest.raises(ValueError, match=r"offset must be >= 0, got -4"):
        positions.positions_with_offset(2, torch.tensor([3, -4]))
    with pytest.raises(ValueError, match=r"attention_mask must hold only 0 and 1, got 2"):
        positions.positions_from_mask(torch.tensor([[1, 2]]))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_positions_on_cuda_never_synchronise():
    device = torch.device("cuda")
    offset, mask, ids = (
        torch.tensor([3, 0], device=device),
        torch.ones(2, 5, device=device),
        torch.arange(5, device=device),
    )
    mask = mask.long()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = positions_with_offset(5, offset)
        from_mask = positions_from_mask(mask)
        resolved = resolve_positions(ids, 5, device)
        documents = positions_from_documents(ids[None])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert out.device.type == from_mask.device.type == resolved.device.type == documents.device.type == "cuda"
    assert out.cpu().tolist() == [[3, 4, 5, 6, 7], [0, 1, 2, 3, 4]]
    assert from_mask.cpu().tolist() == [[0, 1, 2, 3, 4]] * 2


def test_offset_errors_name_the_last_position_and_the_largest_offset():
    from posembed.schemes.positions import MAX_POSITION

    top = MAX_POSITION
    message = (
        rf"offset {top - 1} \+ length 3 - 1 = {top + 1} is past the largest torch.long position {top} "
        rf"\(the largest offset for length 3 is {top - 2}\)"
    )
    with pytest.raises(ValueError, match=message):
        positions_with_offset(3, top - 1)
    with pytest.raises(ValueError, match=message):
        positions_with_offset(3, torch.tensor([0, top - 1]))


def test_a_device_argument_naming_another_device_than_the_offsets_is_refused_both_ways():
    with pytest.raises(ValueError, match=r"offset is a tensor on meta but device='cpu' was asked"):
        positions_with_offset(3, torch.tensor([2, 7], device="meta"), device="cpu")
    with pytest.raises(ValueError, match=r"offset is a tensor on cpu but device='meta' was asked"):
        positions_with_offset(3, torch.tensor([2, 7]), device="meta")
