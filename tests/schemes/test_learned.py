import pytest
import torch
from torch import nn

from posembed import LearnedAbsolute, LearnedParameter
from tests.helpers import assert_close


def test_embedding_lookup_is_one_hot_matmul():
    """Seed 000: nn.Embedding is a table; lookup == one_hot(ids) @ weight."""
    table = nn.Embedding(50, 16)
    ids = torch.randint(0, 50, (3, 7))
    one_hot = nn.functional.one_hot(ids, 50).float()
    assert_close(table(ids), one_hot @ table.weight)


def test_parameter_and_embedding_are_the_same_scheme():
    """Seed 001: a bare nn.Parameter table is the same learned position embedding."""
    a = LearnedAbsolute(32, 8)
    b = LearnedParameter(32, 8)
    with torch.no_grad():
        b.weight.copy_(a.weight)
    positions = torch.randint(0, 32, (4, 10))
    assert torch.equal(a(positions), b(positions))
    a(positions).sum().backward()
    b(positions).sum().backward()
    assert torch.equal(a.weight.grad, b.weight.grad)


@pytest.mark.parametrize("cls", [LearnedAbsolute, LearnedParameter])
def test_positions_beyond_table_name_size_and_ways_out(cls):
    scheme = cls(16, 4)
    with pytest.raises(ValueError, match=r"16.*max_len=16.*Sinusoidal.*interpolat"):
        scheme(torch.arange(17))
    with pytest.raises(ValueError, match="-1"):
        scheme(torch.tensor([-1, 0]))
    with pytest.raises(TypeError, match="float"):
        scheme(torch.arange(4).float())


def test_resized_keeps_endpoints():
    scheme = LearnedAbsolute(8, 4)
    bigger = scheme.resized(15)
    assert bigger.max_positions == 15
    assert_close(bigger.weight[0], scheme.weight[0])
    assert_close(bigger.weight[-1], scheme.weight[-1])
    assert_close(bigger.weight[2], scheme.weight[1])


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_sizes(bad):
    with pytest.raises((TypeError, ValueError)):
        LearnedAbsolute(bad, 4)


@pytest.mark.parametrize("cls", [LearnedAbsolute, LearnedParameter])
def test_limit_hint_names_the_class_that_has_resized(cls):
    scheme = cls(16, 4)
    with pytest.raises(ValueError, match=rf"{cls.__name__}\.resized\(new_len\)"):
        scheme(torch.arange(17))


def test_learned_parameter_resized_equals_learned_absolute_resized():
    absolute = LearnedAbsolute(8, 4, dtype=torch.float64)
    parameter = LearnedParameter(8, 4, dtype=torch.float64)
    with torch.no_grad():
        parameter.weight.copy_(absolute.weight)
    bigger = parameter.resized(15)
    assert isinstance(bigger, LearnedParameter) and bigger.max_positions == 15
    assert bigger.weight.dtype == torch.float64 and bigger.weight.requires_grad
    assert_close(bigger.weight, absolute.resized(15).weight)
    assert_close(bigger.weight[0], parameter.weight[0])
    assert_close(bigger.weight[-1], parameter.weight[-1])
    assert_close(bigger.weight[2], parameter.weight[1])  # row 2 of 15 sits at old position 1
    assert_close(bigger.weight[1], (parameter.weight[0] + parameter.weight[1]) / 2)
    assert_close(bigger(torch.arange(15)), bigger.weight)
    with pytest.raises(ValueError, match="new_len must be positive, got 0"):
        parameter.resized(0)


@pytest.mark.parametrize("cls", [LearnedAbsolute, LearnedParameter])
def test_absurd_table_is_refused_before_allocating(cls):
    with pytest.raises(MemoryError, match=r"position table .* would need 32.0 TB"):
        cls(10**12, 8)
