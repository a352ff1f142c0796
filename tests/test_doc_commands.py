"""Every shell command README.md and docs/*.md show runs as written, or is plainly a template (issue 41).

A command is a line of a fenced shell block or an indented code block, or an inline code span that
begins with a command (``posembed``, ``python``, ``pip``, ``mkdocs``, ``.``), each part of an ``&&``
chain on its own, with leading ``NAME=value`` settings set aside. Each must be one of:

- a ``posembed`` command: one ``tests/test_readme_commands.py`` parses with the real command line
  (and runs where it is cheap), or one it misses (a span that opens with ``NAME=value`` settings),
  parsed here the same way;
- ``python SCRIPT ARGS`` of a script in the checkout: an argparse script's ``ARGS --help`` parses
  (nothing runs); a script without options is exercised by the test :data:`EXERCISED` names, which
  must name the script; ``python -m MODULE`` likewise, for a module of the checkout or pip's own;
- ``pip install`` / ``pip wheel`` of this project: the constraints file exists, every extra is one
  of pyproject.toml's, a wheel's file name carries pyproject's version; another package is one that
  pyproject.toml names;
- ``mkdocs serve`` / ``mkdocs build --strict`` (``tests/test_docs.py`` builds the site strictly),
  ``python -m venv``, ``. .venv/bin/activate``;
- or a template: it holds a placeholder (``N``, ``DIR``, ``CONFIG_OR_DIR``, ...) or ``[...]``.

Anything else fails here with its page and line.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from posembed.cli import build_parser
from tests.test_readme_commands import PLACEHOLDERS, SHOWN, _argv, _command_words

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHELL = {"", "bash", "sh", "shell", "console"}
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
STARTS = re.compile(r"(?:posembed|python|pip|mkdocs|\.) ")
SETTING = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*$")
#: scripts without options -> the test that runs what they do (and names them)
EXERCISED = {
    "results/extend/regenerate.py": "tests/interop/test_retrieval_page.py",
}
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
VERSION = PYPROJECT["project"]["version"]


def _indented_blocks(text: str) -> list[tuple[int, str]]:
    """``(offset, line)`` of each line of an indented code block: four spaces after a blank line, not a list."""
    found, inside = [], False
    for match in re.finditer(r"^.*$", text, re.M):
        line = match.group(0)
        if inside and line.startswith("    "):
            found.append((match.start(), line.strip()))
        elif inside and line.strip():
            inside = False
        elif not line.strip():
            prev = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            inside = not re.match(r"\s*([-*+]|\d+\.)\s", prev) and not prev.startswith("  ")
    return found


def _commands(page: Path) -> list[tuple[str, str]]:
    """``(page:line, command)`` of every shell command the page shows, ``&&`` parts apart."""
    text = page.read_text(encoding="utf-8")
    lines: list[tuple[int, str]] = []
    for match in FENCE.finditer(text):
        if match.group(1) in SHELL:
            start = match.start(2)
            for offset, line in ((m.start(), m.group(0)) for m in re.finditer(r"^.*$", match.group(2), re.M)):
                lines.append((start + offset, line))
    fenced = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    outside = "".join(
        " " * (e - s) if any(a <= s < b for a, b in fenced) else text[s:e]
        for s, e in ((i, i + 1) for i in range(len(text)))
    )
    lines += _indented_blocks(outside)
    lines += [(m.start(), m.group(1)) for m in SPAN.finditer(outside) if STARTS.match(_unset(m.group(1)))]
    found = []
    for offset, line in lines:
        where = f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, offset) + 1}"
        for part in line.split("&&"):
            command = _unset(" ".join(part.split("#")[0].split()) if " #" in part else " ".join(part.split()))
            if STARTS.match(command + " "):
                found.append((where, command))
    return found


def _unset(command: str) -> str:
    """``command`` without its leading ``NAME=value`` settings."""
    words = command.split(" ")
    while words and SETTING.match(words[0]):
        words = words[1:]
    return " ".join(words)


COMMANDS = sorted({item for page in PAGES for item in _commands(page)})
SHOWN_POSEMBED = {" ".join(command.split(" #")[0].split()) for _, command in SHOWN}


def _template(command: str) -> bool:
    words = re.split(r"[\s=/'\[\],]+", command)
    return bool(re.search(r"(^|\s)\[", command)) or any(w in PLACEHOLDERS for w in words)  # `[--opt N]`: optional


def _script_parses(script: str, args: list[str]) -> str:
    """Why ``python script args`` would not run as written (``""``: its parser accepts ``args``)."""
    path = ROOT / script
    if not path.is_file():
        return f"{script} does not exist"
    if "argparse" not in path.read_text(encoding="utf-8"):
        test = EXERCISED.get(script)
        if test is None or script not in (ROOT / test).read_text(encoding="utf-8"):
            return f"{script} takes no options and no test in EXERCISED runs it"
        return "" if not args else f"{script} takes no arguments, got {args}"
    return _help_runs([str(path), *args])


def _help_runs(argv: list[str]) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, *argv, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    return "" if done.returncode == 0 else f"`{' '.join(argv)} --help` exits {done.returncode}: {done.stderr[-500:]}"


def _posembed_parses(command: str) -> str:
    """Why the real command line refuses ``command`` (``""``: it parses), as test_readme_commands parses its own."""
    argv = _argv(command)
    if argv and _command_words(argv) == len(argv):
        argv = [*argv, "--help"]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exit_:
        if exit_.code != 0:
            return f"does not parse: {(err.getvalue().strip().splitlines() or [exit_.code])[-1]}"
    return ""


def _pip(words: list[str]) -> str:
    """Why a ``pip install`` / ``pip wheel`` line of the pages would not do what it says (``""``: it would)."""
    problems, known = [], {n.lower() for n in re.findall(r"[A-Za-z][\w.-]*", (ROOT / "pyproject.toml").read_text())}
    index = 2
    while index < len(words):
        word = words[index]
        if word in ("-c", "-w"):
            if word == "-c" and not (ROOT / words[index + 1]).is_file():
                problems.append(f"no constraints file {words[index + 1]}")
            index += 2
            continue
        index += 1
        if word.startswith("-"):
            continue
        target, _, extras = word.partition("[")
        for extra in filter(None, extras.rstrip("]").split(",")):
            if extra not in EXTRAS:
                problems.append(f"{word}: no extra {extra!r} in pyproject.toml ({', '.join(sorted(EXTRAS))})")
        if target.endswith(".whl") and f"posembed-{VERSION}-" not in target:
            problems.append(f"{target}: pyproject.toml's version is {VERSION}")
        elif target not in (".", "posembed") and not target.endswith(".whl") and target.lower() not in known:
            problems.append(f"{target}: a package pyproject.toml does not name")
    return "; ".join(problems)


def why_not(command: str) -> str:
    """Why ``command`` neither runs as written under a test nor reads as a template (``""``: it is fine)."""
    words = shlex.split(command, comments=True)
    if words[0] == "posembed" or words[:3] == ["python", "-m", "posembed"]:
        return "" if command in SHOWN_POSEMBED else _posembed_parses(command)
    if _template(command):
        return ""
    if words[:3] in (["python", "-m", "venv"], ["python", "-m", "pytest"]) or words[:2] == [".", ".venv/bin/activate"]:
        return ""  # the venv line; the test command .ci/run runs as README writes it (test_readme_commands)
    if words[0] == "mkdocs":
        return (
            "" if words[1:] in (["serve"], ["build", "--strict"]) else f"mkdocs {words[1:]}: not what test_docs builds"
        )
    if words[0] == "pip" and words[1] in ("install", "wheel"):
        return _pip(words)
    if words[:2] == ["python", "-m"]:
        module = ROOT / words[2].replace(".", "/")
        if not (module / "__main__.py").is_file():
            return f"no module {words[2]} with a __main__ in the checkout"
        return _help_runs(["-m", *words[2:]])
    if words[0] == "python" and words[1].endswith(".py"):
        return _script_parses(words[1], words[2:])
    return "no test runs it and it holds no placeholder"


def test_the_pages_show_shell_commands_of_every_kind():
    kinds = {shlex.split(c)[0] for _, c in COMMANDS}
    assert {"posembed", "python", "pip", "mkdocs"} <= kinds, kinds
    assert any("tools/zoo_table.py --print" in c for _, c in COMMANDS)


@pytest.mark.parametrize("where, command", COMMANDS, ids=[f"{w} {c}" for w, c in COMMANDS])
def test_every_shell_command_runs_as_written_or_is_a_template(where, command):
    problem = why_not(command)
    assert not problem, f"{where}: `{command}`: {problem}"


@pytest.mark.parametrize("command, reason", [
    ("python tools/no_such_tool.py", "does not exist"),
    ("python tools/lab_page.py no-such-step", "exits 2"),
    ("pip install -c constraints.txt '.[nonesuch]'", "no extra 'nonesuch'"),
    ("pip install 'dist/posembed-9.9.9-py3-none-any.whl[hf]'", "version is"),
    ("mkdocs gh-deploy", "not what test_docs builds"),
    ("posembed lab run --no-such-option", "does not parse"),
    ("make docs", "no test runs it"),
])  # fmt: skip
def test_the_check_sees_a_command_that_would_not_run(command, reason):
    assert reason in why_not(command)


def test_a_placeholder_marks_a_template():
    assert why_not("python tools/some_script.py --out DIR") == ""
    assert _template("posembed extend --to N --out DIR") and not _template("pip install -e '.[docs]'")
