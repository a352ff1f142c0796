"""The scheme factory: every entry builds from sizes, round-trips its config bit-exactly, and
declares exactly its class's constructor arguments; bad names and arguments are clear errors."""

from __future__ import annotations

import inspect
import json

import pytest
import torch

from posembed.schemes import SCHEMES, all_schemes, base
from posembed.schemes.catalog import has_length_limit
from posembed.schemes.config import build_scheme, scheme_config
from posembed.schemes.factory import ENTRIES, FACTORY, ModelSizes, build_from_sizes, scheme_entry

SIZES = ModelSizes(dim=16, num_heads=2, head_dim=8, max_len=32, causal=True)

#: the scheme-specific arguments each entry needs (those no size fills), with working values
NEEDS = {
    "rope_linear": {"factor": 2.0},
    "rope_ntk": {"factor": 2.0},
    "rope_dynamic_ntk": {"factor": 2.0, "original_max_len": 16},
    "rope_llama3": {"factor": 8.0, "original_max_len": 16},
    "rope_proportional": {"rope_fraction": 0.5},
    "rope_yarn": {"factor": 4.0, "original_max_len": 16},
    "rope_longrope": {
        "short_factor": [1.0, 1.5, 2.0, 2.5],
        "long_factor": [2.0, 3.0, 4.0, 5.0],
        "original_max_len": 16,
        "factor": 4.0,
    },
    "shaw": {"max_distance": 4},
    "cope": {"npos_max": 8},
}
_IGNORED = ("self", "device", "dtype")


def _build(name: str):
    torch.manual_seed(0)
    return build_from_sizes(name, SIZES, NEEDS.get(name))


def _constructor_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """Named constructor parameters, following ``**kwargs`` into the base classes' constructors."""
    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        forwards = False
        for param in inspect.signature(klass.__init__).parameters.values():
            if param.kind is param.VAR_KEYWORD:
                forwards = True
            elif param.name not in _IGNORED and param.kind is not param.VAR_POSITIONAL:
                found.setdefault(param.name, param)
        if not forwards:
            return found
    return found


def _tensors(scheme) -> dict[str, torch.Tensor]:
    return {**dict(scheme.named_parameters()), **dict(scheme.named_buffers())}


def test_every_scheme_class_has_one_entry():
    assert list(SCHEMES) == [entry.name for entry in ENTRIES] == list(all_schemes())
    assert len(set(SCHEMES)) == len(ENTRIES)
    for entry in ENTRIES:
        assert SCHEMES[entry.name] is entry.cls and entry.cls.name == entry.name
    # every library class that names itself (base.SCHEMES, filled as classes are defined) is in the factory
    named = {name: cls for name, cls in base.SCHEMES.items() if cls.__module__.startswith("posembed.")}
    assert named == dict(SCHEMES)
    assert set(NEEDS) == {entry.name for entry in ENTRIES if entry.needs}


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_declared_arguments_match_the_constructor(entry):
    params = _constructor_parameters(entry.cls)
    assert list(params) == list(entry.accepted), f"{entry.name}: constructor takes {list(params)}"
    for arg in entry.args:
        param = params[arg.name]
        assert arg.required == (param.default is inspect.Parameter.empty), arg.name
        assert arg.nullable or param.default is not None, arg.name  # a None default is accepted
        if not arg.required:
            assert arg.accepts(param.default), f"{entry.name}.{arg.name}: default {param.default!r} is not {arg.kind}"
    assert entry.length_limit == has_length_limit(entry.cls)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_builds_from_sizes(entry):
    scheme = _build(entry.name)
    assert type(scheme) is entry.cls
    for arg in entry.args:
        if arg.size is not None:
            assert scheme_config(scheme)[arg.name] == getattr(SIZES, arg.size), arg.name


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_config_round_trips_bit_exactly(entry):
    scheme = _build(entry.name)
    config = json.loads(json.dumps(scheme_config(scheme)))  # what a checkpoint stores
    assert list(config) == ["name", *entry.accepted]
    torch.manual_seed(1)  # a different init: learned tables come back through load_state_dict
    rebuilt = build_scheme(config)
    rebuilt.load_state_dict(scheme.state_dict())
    assert type(rebuilt) is type(scheme) and scheme_config(rebuilt) == config
    before, after = _tensors(scheme), _tensors(rebuilt)
    assert before.keys() == after.keys()
    for key in before:
        assert torch.equal(before[key], after[key]), key


def test_stored_configs_keep_loading():
    """Configs written before the factory (model configs, lab checkpoints) build the same schemes."""
    old = {
        "learned": {"name": "learned", "max_len": 48, "dim": 16, "init_std": 0.02},
        "rope": {
            "name": "rope",
            "head_dim": 8,
            "rotary_dim": 8,
            "base": 10000.0,
            "layout": "half",
            "max_len": None,
            "compiled": False,
        },
        "alibi": {"name": "alibi", "num_heads": 2, "symmetric": True},
        "t5_bias": {
            "name": "t5_bias",
            "num_heads": 2,
            "num_buckets": 32,
            "max_distance": 128,
            "bidirectional": False,
            "init_std": 0.02,
        },
        "sinusoidal": {"name": "sinusoidal", "dim": 16, "base": 10000.0, "layout": "interleaved", "max_len": None},
        "nope": {"name": "nope"},
    }
    for name, config in old.items():
        stored = scheme_config(build_scheme(config))  # arguments added since take their defaults
        assert {key: stored[key] for key in config} == config, name


def test_sizes_fill_the_right_arguments():
    encoder = ModelSizes(dim=16, num_heads=4, head_dim=4, max_len=10, causal=False)
    assert build_from_sizes("alibi", encoder).symmetric is True
    assert build_from_sizes("alibi", SIZES).symmetric is False
    assert build_from_sizes("t5_bias", encoder).bidirectional is True
    assert (build_from_sizes("learned", encoder).max_len, build_from_sizes("learned", encoder).dim) == (10, 16)
    assert build_from_sizes("rope", encoder).head_dim == 4
    assert build_from_sizes("rope", encoder, {"head_dim": 8, "base": 500}).head_dim == 8  # overrides win


def test_unknown_scheme():
    with pytest.raises(
        ValueError, match=r"unknown scheme 'rop' \(did you mean 'rope'\?\); known: alibi, .*learned, .*rope, "
    ):
        scheme_entry("rop")
    with pytest.raises(ValueError, match="unknown scheme 'rop'"):
        build_scheme({"name": "rop"})
    with pytest.raises(ValueError, match="a scheme config needs a 'name'"):
        build_scheme({"dim": 4})


def test_unknown_and_wrong_typed_arguments():
    takes = "it takes: head_dim, rotary_dim, base, layout, max_len, compiled"
    with pytest.raises(ValueError, match=f"scheme 'rope' takes no argument 'bsae'; {takes}"):
        build_from_sizes("rope", SIZES, {"bsae": 500.0})
    with pytest.raises(ValueError, match=f"scheme 'rope' argument 'base' must be a number, got '500'; {takes}"):
        build_from_sizes("rope", SIZES, {"base": "500"})
    with pytest.raises(ValueError, match="'compiled' must be true or false or null, got 1;"):
        build_from_sizes("rope", SIZES, {"compiled": 1})
    with pytest.raises(ValueError, match="'rotary_dim' must be an integer or null, got 4.0;"):
        build_from_sizes("rope", SIZES, {"rotary_dim": 4.0})
    with pytest.raises(ValueError, match="'short_factor' must be a list of numbers, got 'x'"):
        build_from_sizes("rope_longrope", SIZES, {**NEEDS["rope_longrope"], "short_factor": "x"})
    with pytest.raises(ValueError, match="scheme 'nope' takes no argument 'dim'; it takes: no arguments"):
        build_scheme({"name": "nope", "dim": 4})
    with pytest.raises(ValueError, match="scheme 'learned' takes no argument 'base'; it takes: max_len, dim, init_std"):
        build_scheme({"name": "learned", "max_len": 4, "dim": 4, "base": 1.0})


def test_missing_required_arguments():
    with pytest.raises(ValueError, match="scheme 'rope_yarn' needs 'factor', 'original_max_len'; it takes: head_dim,"):
        build_from_sizes("rope_yarn", SIZES)
    with pytest.raises(ValueError, match="scheme 'learned' needs 'dim'"):
        build_scheme({"name": "learned", "max_len": 4})


def test_subclass_without_its_own_entry_is_refused():
    from posembed.schemes.absolute.learned import LearnedAbsolute

    class Mine(LearnedAbsolute):
        pass

    with pytest.raises(ValueError, match="its name 'learned' belongs to LearnedAbsolute"):
        scheme_config(Mine(4, 4))


def test_factory_is_read_only():
    with pytest.raises(TypeError):
        FACTORY["mine"] = ENTRIES[0]  # type: ignore[index]


@pytest.mark.parametrize("typed, suggested", [("Rope", "rope"), ("sinus", "sinusoidal"), ("alibii", "alibi")])
def test_an_unknown_scheme_suggests_the_closest(typed, suggested):
    with pytest.raises(ValueError, match=rf"unknown scheme '{typed}' \(did you mean '{suggested}'\?\); known: "):
        scheme_entry(typed)


def test_an_entry_for_an_unnamed_class_says_it_has_no_name():
    from posembed.schemes.entry import SchemeEntry

    entry = SchemeEntry(base.BiasScheme, ())
    with pytest.raises(
        TypeError, match=r"^BiasScheme has no scheme name \(an abstract base\); only a named scheme has an entry$"
    ):
        _ = entry.name  # the property raises
