"""Every vocabulary of scheme names hangs off the factory's entries: one table, read everywhere."""

from __future__ import annotations

import pytest

from posembed.interop.rope.config import ROPE_TYPES
from posembed.lab.context import METHODS, method_scheme
from posembed.schemes.factory import ENTRIES, FACTORY, METHOD_SCHEMES, ROPE_TYPE_SCHEMES


def test_rope_types_are_the_factorys():
    assert list(ROPE_TYPES) == list(ROPE_TYPE_SCHEMES)
    assert ROPE_TYPE_SCHEMES["dynamic"] == "rope_dynamic_ntk" and ROPE_TYPE_SCHEMES["default"] == "rope"


def test_methods_are_the_factorys_in_table_order():
    assert METHODS == tuple(METHOD_SCHEMES) == (
        "extrapolate", "linear", "ntk", "dynamic_ntk", "yarn", "llama3", "longrope",
    )


def test_each_alias_names_one_entry():
    for field in ("rope_type", "method"):
        names = [getattr(entry, field) for entry in ENTRIES if getattr(entry, field) is not None]
        assert len(names) == len(set(names)), f"{field} repeated: {names}"


@pytest.mark.parametrize("method", METHODS)
def test_each_method_builds_its_entrys_class(method):
    scheme = method_scheme(method, head_dim=16, factor=4.0, original_len=64)
    assert type(scheme) is FACTORY[METHOD_SCHEMES[method]].cls


def test_an_unknown_method_suggests_the_closest():
    with pytest.raises(ValueError, match=r"'yarm' \(did you mean 'yarn'\?\)"):
        method_scheme("yarm", head_dim=16, factor=4.0, original_len=64)


def test_lab_extend_offers_exactly_the_methods(capsys):
    from posembed.cli import main

    with pytest.raises(SystemExit):
        main(["lab", "extend", "x", "--method", "yarm", "--factor", "2"])
    err = capsys.readouterr().err
    assert "invalid choice: 'yarm'" in err and all(method in err for method in METHODS)
