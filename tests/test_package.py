"""The package stands alone: built as a wheel, installed non-editable into a fresh environment,
run from a folder with no checkout and no ``../shared`` beside it.

The wheel is built from a copy of the project's sources (the checkout is never written to),
installed into a virtual environment that sees this interpreter's site-packages (torch and the
optional packages) but has posembed itself only from the wheel, and every user-facing entry
point is run from an empty temporary folder.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "posembed"
#: what a source distribution holds: enough to build the wheel
PROJECT_FILES = ("pyproject.toml", "README.md", "constraints.txt")


def _run(command: list[str], cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict, Path]:
    """``(python of a fresh venv with the wheel installed, its environment, an empty work folder)``."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in PROJECT_FILES:
        shutil.copy2(ROOT / name, source / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "POSEMBED_TINYSHAKESPEARE")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    dist = base / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(dist),
            str(source),
        ],
        cwd=base,
        env=env,
    )
    wheels = list(dist.glob("posembed-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = base / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheels[0])],
        cwd=base,
        env=env,
    )
    work = base / "work"  # no checkout, no ../shared
    work.mkdir()
    return python, env, work


@pytest.mark.xdist_group("test_package:installed")
@pytest.mark.slow
def test_the_installed_copy_is_the_wheel_not_the_checkout(installed):
    python, env, work = installed
    done = _run(
        [
            str(python),
            "-c",
            "import posembed, importlib.resources as r; print(posembed.__file__); "
            "print(r.files('posembed') / 'data' / 'tinyshakespeare.txt')",
        ],
        cwd=work,
        env=env,
    )
    module, data = done.stdout.split()
    assert str(ROOT) not in module and "site-packages" in module
    assert Path(data).stat().st_size == 1_115_394


@pytest.mark.xdist_group("test_package:installed")
@pytest.mark.slow
def test_version_and_python_dash_m(installed):
    python, env, work = installed
    posembed = str(python.parent / "posembed")
    from importlib.metadata import version

    assert _run([posembed, "--version"], cwd=work, env=env).stdout.strip() == f"posembed {version('posembed')}"
    assert _run([str(python), "-m", "posembed", "--version"], cwd=work, env=env).stdout.startswith("posembed ")


@pytest.mark.xdist_group("test_package:installed")
@pytest.mark.slow
def test_main_job_commands_run_from_the_wheel(installed):
    """The smoke preset, the quickest bench, inspect of a library scheme, encode on the default model."""
    python, env, work = installed
    posembed = str(python.parent / "posembed")
    done = _run([posembed, "lab", "run", "--preset", "smoke", "--out", "lab-smoke"], cwd=work, env=env)
    assert "trained" in done.stdout + done.stderr
    _run([posembed, "lab", "report", "lab-smoke"], cwd=work, env=env)
    assert (work / "lab-smoke" / "report.html").is_file() or list((work / "lab-smoke").glob("*.html"))
    _run([posembed, "bench", "--quick", "--only", "rope", "--repeats", "1", "--out", "bench"], cwd=work, env=env)
    assert (work / "bench" / "results.json").is_file()
    _run(
        [posembed, "inspect", "--scheme", "sinusoidal", "--dim", "64", "--max-len", "64", "--quick", "--out", "insp"],
        cwd=work,
        env=env,
    )
    assert (work / "insp" / "report.html").is_file()
    done = _run([posembed, "encode", "where is the token"], cwd=work, env=env)
    assert "[CLS]" in done.stdout


def _string_constants(path: Path) -> list[str]:
    return [
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_no_source_file_reaches_outside_the_package():
    """No ``../shared`` or checkout paths at run time, no ``sys.path`` edits in ``src/``."""
    offenders = []
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        if "sys.path" in text:
            offenders.append(f"{path}: edits sys.path")
        for value in _string_constants(path):
            if value in ("shared", "benchmarks") or "shared/data" in value:
                offenders.append(f"{path}: names {value!r}")
    assert not offenders, offenders


def test_package_data_is_declared_for_every_shipped_file():
    """Every file in ``posembed/data`` is package data (the wheel test above proves it lands)."""
    text = (ROOT / "pyproject.toml").read_text()
    suffixes = {p.suffix for p in (SRC / "data").iterdir() if p.is_file()}
    for suffix in suffixes:
        assert f"data/*{suffix}" in text, suffix


def test_version_answers_without_importing_torch():
    """``--version`` reads the package metadata and builds no parser (whose subcommands import torch)."""
    from importlib.metadata import version

    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "posembed", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0 and done.stdout.strip() == f"posembed {version('posembed')}"
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "posembed.cli" in imported and not [name for name in imported if name.split(".")[0] == "torch"]


@pytest.mark.parametrize(
    "argv, asks",
    [
        (["--version"], True),
        (["-v", "--version"], True),
        (["encode", "--version"], False),
        (["--help", "--version"], False),
        ([], False),
    ],
)
def test_only_a_top_level_version_option_is_answered_early(argv, asks):
    from posembed.cli.command import _asks_version

    assert _asks_version(argv) is asks
