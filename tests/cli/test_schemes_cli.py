"""``posembed schemes``: the catalogue rows and the command's text / JSON output."""

import json

import pytest

from posembed.cli import main
from posembed.cli.schemes import format_table
from posembed.schemes.base import SCHEMES, AbsoluteScheme
from posembed.schemes.catalog import COLUMNS, constructor_parameters, has_length_limit, scheme_table

ABSOLUTE = {
    # name: (class, parameters, length limit)
    "learned": ("LearnedAbsolute", "max_len, dim, *, init_std=0.02", True),
    "learned_parameter": ("LearnedParameter", "max_len, dim, *, init_std=0.02", True),
    "sinusoidal": ("Sinusoidal", "dim, *, base=10000.0, layout='interleaved', max_len=None, angles='exact'", False),
    "scaled_sinusoidal": (
        "ScaledSinusoidal",
        "dim, *, base=10000.0, layout='interleaved', max_len=None, angles='exact'",
        False,
    ),
    "sinusoidal_2d": ("Sinusoidal2D", "dim, *, base=10000.0, layout='interleaved', angles='exact'", False),
    "sinusoidal_3d": ("Sinusoidal3D", "dim, *, base=10000.0, layout='interleaved', angles='exact'", False),
}


#: name: (class, kind, extrapolates, a word of the paper), written from the papers, not read from the classes
KNOWN = {
    "learned": ("LearnedAbsolute", "absolute", False, "Devlin"),
    "learned_parameter": ("LearnedParameter", "absolute", False, "Dosovitskiy"),
    "sinusoidal": ("Sinusoidal", "absolute", False, "Vaswani"),
    "scaled_sinusoidal": ("ScaledSinusoidal", "absolute", False, "Hua"),
    "sinusoidal_2d": ("Sinusoidal2D", "absolute", False, "Vaswani"),
    "sinusoidal_3d": ("Sinusoidal3D", "absolute", False, "Vaswani"),
    "rope": ("RotaryEmbedding", "rotary", False, "Su et al. 2021"),
    "rope_linear": ("LinearScalingRotary", "rotary", True, "Chen et al. 2023"),
    "rope_ntk": ("NTKAwareRotary", "rotary", True, "bloc97"),
    "rope_dynamic_ntk": ("DynamicNTKRotary", "rotary", True, "emozilla"),
    "rope_llama3": ("Llama3Rotary", "rotary", True, "Llama 3"),
    "rope_proportional": ("ProportionalRotary", "rotary", False, "proportional"),
    "rope_yarn": ("YaRNRotary", "rotary", True, "Peng et al. 2023"),
    "rope_longrope": ("LongRoPERotary", "rotary", True, "Ding et al. 2024"),
    "xpos": ("XPos", "rotary", True, "Sun et al. 2022"),
    "alibi": ("ALiBi", "bias", True, "Press et al. 2022"),
    "t5_bias": ("T5RelativeBias", "bias", True, "Raffel et al. 2020"),
    "shaw": ("ShawRelative", "bias", False, "Shaw et al. 2018"),
    "kerple": ("Kerple", "bias", True, "Chi et al. 2022"),
    "sandwich": ("Sandwich", "bias", True, "Chi et al. 2023"),
    "fire": ("FIRE", "bias", True, "Li et al. 2024"),
    "dynamic_bias": ("DynamicPositionBias", "bias", False, "CrossFormer"),
    "forgetting": ("ForgettingGate", "bias", True, "Lin et al. 2025"),
    "cope": ("CoPE", "bias", False, "Golovneva et al. 2024"),
    "deberta": ("DebertaRelative", "bias", False, "He et al. 2021"),
    "nope": ("NoPE", "bias", True, "Kazemnejad et al. 2023"),
}


def test_known_rows_hold_hand_written_values():
    """Expected values written here (independent of the classes the table reads them from)."""
    rows = {row["name"]: row for row in scheme_table()}
    assert set(KNOWN) <= set(rows), sorted(set(KNOWN) - set(rows))
    for name, (cls, kind, extrapolates, paper) in KNOWN.items():
        row = rows[name]
        assert (row["class"], row["kind"], row["extrapolates"]) == (cls, kind, extrapolates), name
        assert paper in row["paper"], (name, row["paper"])


def test_table_lists_every_registered_scheme_once():
    rows = scheme_table()
    names = [row["name"] for row in rows]
    assert sorted(names) == sorted(SCHEMES) and len(set(names)) == len(names)
    assert set(ABSOLUTE) <= set(names)
    for row in rows:
        assert tuple(row) == COLUMNS
        cls = SCHEMES[row["name"]]
        assert (row["class"], row["kind"], row["paper"], row["extrapolates"]) == (
            cls.__name__,
            cls.kind.value,
            cls.paper,
            cls.extrapolates,
        )
        assert row["paper"], f"{row['name']} cites no paper"
    kinds = [row["kind"] for row in rows]
    assert kinds == sorted(kinds, key=["absolute", "rotary", "bias"].index)


@pytest.mark.parametrize("name", sorted(ABSOLUTE))
def test_absolute_rows(name):
    row = {row["name"]: row for row in scheme_table()}[name]
    assert (row["class"], row["parameters"], row["length_limit"]) == ABSOLUTE[name]
    assert row["kind"] == "absolute" and row["extrapolates"] is False


def test_length_limit_rule():
    class Declared(AbsoluteScheme):
        has_length_limit = True

        def __init__(self, dim: int, *, max_len: int | None = None) -> None:
            super().__init__()

    class Table(AbsoluteScheme):
        def __init__(self, max_seq_len: int, dim: int, *, device=None, dtype=None) -> None:
            super().__init__()

    assert has_length_limit(Declared)  # the class attribute wins over the optional max_len
    assert has_length_limit(Table)  # a required table size is a limit
    assert constructor_parameters(Table) == "max_seq_len, dim"  # device/dtype hidden


def test_constructor_parameters_marks_varargs():
    def f(a, *rest, b=2, **extra):
        pass

    assert constructor_parameters(f) == "a, *rest, b=2, **extra"


def test_cli_prints_aligned_table(capsys):
    assert main(["schemes", "--wide"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["name", "class", "kind", "paper", "parameters"]
    assert lines[0].endswith("length limit  extrapolates")
    assert len(lines) == 1 + len(scheme_table())
    sinusoidal = next(line for line in lines if line.startswith("sinusoidal "))
    assert "Vaswani et al. 2017" in sinusoidal and sinusoidal.split()[-2:] == ["no", "no"]
    learned = next(line for line in lines if line.startswith("learned "))
    assert learned.split()[-2:] == ["yes", "no"]
    column = lines[0].index("kind")
    assert all(line[column:].startswith(("absolute", "rotary", "bias")) for line in lines[1:])


def test_cli_json_equals_table(capsys):
    assert main(["schemes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == scheme_table()


def test_format_table_yes_no():
    row = dict.fromkeys(COLUMNS, "v") | {"length_limit": True, "extrapolates": False}
    assert format_table([row]).splitlines()[1].split()[-2:] == ["yes", "no"]


def test_default_table_fits_100_columns(capsys):
    assert main(["schemes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 100
    assert lines[0].split()[:2] == ["name", "kind"] and len(lines) == 1 + len(scheme_table())
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["rope_yarn"].endswith("factor, original_max_len")  # what --set must give
    assert rows["learned"].split()[1:4] == ["absolute", "yes", "no"]


def test_narrow_table_cuts_the_last_column_to_fit():
    row = {"name": "x", "kind": "bias", "needs": "a" * 200}
    lines = format_table([row], ("name", "kind", "needs"), width=40).splitlines()
    assert max(map(len, lines)) == 40 and lines[1].endswith("...")
    with pytest.raises(ValueError, match="cannot fit in 10 characters"):
        format_table([row], ("name", "kind", "needs"), width=10)


def test_rows_say_what_the_sizes_fill():
    rows = {row["name"]: row for row in scheme_table()}
    assert (rows["learned"]["sizes"], rows["learned"]["needs"]) == ("max_len, dim", "")
    assert (rows["alibi"]["sizes"], rows["t5_bias"]["sizes"]) == (
        "num_heads, symmetric=bidirectional",
        "num_heads, bidirectional",
    )
    assert (rows["shaw"]["sizes"], rows["shaw"]["needs"]) == ("num_heads, head_dim", "max_distance")


def test_wide_and_json_exclude_each_other(capsys):
    with pytest.raises(SystemExit, match="^2$"):  # argparse's usage error
        main(["schemes", "--wide", "--json"])
    assert "not allowed with argument" in capsys.readouterr().err
