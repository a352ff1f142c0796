import pytest
import torch
from torch import nn

from posembed import LearnedAbsolute, LearnedParameter
from tests.helpers import assert_close


@pytest.mark.parametrize("cls", [LearnedAbsolute, LearnedParameter])
def test_lookup_is_one_hot_matmul_of_the_scheme_table(cls):
    """Seed 000: a learned position embedding is a table: ``scheme(ids) == one_hot(ids) @ weight``.

    Checked on the schemes themselves (values and gradient), not on a bare ``nn.Embedding``.
    """
    scheme = cls(50, 16, dtype=torch.float64)
    ids = torch.tensor([[0, 49, 3, 3, 17], [5, 4, 3, 2, 1]])
    one_hot = nn.functional.one_hot(ids, 50).double()
    out = scheme(ids)
    assert out.shape == (2, 5, 16) and out.dtype == torch.float64
    assert_close(out, one_hot @ scheme.weight, atol=0, rtol=0)
    assert torch.equal(scheme(torch.arange(50)), scheme.weight)  # row p is position p
    assert torch.equal(scheme(torch.tensor([49]))[0], scheme.weight[49])
    out.sum().backward()
    # each row's gradient counts how often its position occurs (3 occurs three times)
    counts = torch.zeros(50, dtype=torch.float64).index_add_(0, ids.flatten(), torch.ones(10, dtype=torch.float64))
    assert_close(scheme.weight.grad, counts[:, None].expand(50, 16), atol=0, rtol=0)
    assert scheme.weight.grad[3].tolist() == [3.0] * 16 and scheme.weight.grad[6].abs().sum() == 0


def test_init_is_normal_with_the_given_std():
    torch.manual_seed(0)
    weight = LearnedAbsolute(4096, 64, init_std=0.5).weight.detach()
    assert abs(float(weight.mean())) < 0.01
    assert float(weight.std()) == pytest.approx(0.5, rel=0.01)
    torch.manual_seed(0)
    assert float(LearnedParameter(4096, 64).weight.detach().std()) == pytest.approx(0.02, rel=0.01)


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


@pytest.mark.parametrize("cls", [LearnedAbsolute, LearnedParameter])
@pytest.mark.parametrize(
    "bad, error, match",
    [
        (0, ValueError, "max_len must be positive, got 0"),
        (-3, ValueError, "max_len must be positive, got -3"),
        (2.5, TypeError, "max_len must be an int, got 2.5"),
        (True, TypeError, "max_len must be an int, got True"),
    ],
)
def test_bad_sizes(cls, bad, error, match):
    with pytest.raises(error, match=match):
        cls(bad, 4)
    with pytest.raises(error, match=match.replace("max_len", "dim")):
        cls(4, bad)


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
