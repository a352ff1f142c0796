"""``posembed lab run --help`` lists every preset with its size and its measured time."""

from __future__ import annotations

import re

import pytest

from posembed.cli import build_parser, main
from posembed.lab.presets import PRESETS
from posembed.lab.sweep.runner import expand


def test_every_preset_is_listed_with_its_size_and_time(capsys):
    with pytest.raises(SystemExit):
        main(["lab", "run", "--help"])
    out = capsys.readouterr().out
    listed = dict(re.findall(r"^  ([a-z]+) +(\d+) trials?, [\d/]+ steps; .+$", out, re.M))
    assert set(listed) == set(PRESETS) and "lengthgen" in listed
    assert {name: int(count) for name, count in listed.items()} == {
        name: len(expand(b())) for name, b in PRESETS.items()
    }
    assert "not timed" not in out.split("smoke", 1)[1].split("\n", 1)[0]  # smoke, at least, was timed


def test_the_list_is_built_only_when_help_is_asked(monkeypatch):
    import posembed.lab.sweep.runner as runner

    monkeypatch.setattr(runner, "expand", lambda experiment: pytest.fail("expanded at parser build"))
    build_parser()
