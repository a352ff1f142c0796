"""The facade names every scheme of the factory and every part (``posembed.lab``), lazily; every dotted name the
pages write resolves by attribute from ``import posembed``; a wrong guess gets the closest name."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import posembed
from posembed.schemes.factory import ENTRIES


def test_every_factory_scheme_is_exported():
    missing = [entry.cls.__name__ for entry in ENTRIES if getattr(posembed, entry.cls.__name__, None) is not entry.cls]
    assert not missing, f"not exported from posembed: {missing}"
    assert {entry.cls.__name__ for entry in ENTRIES} <= set(posembed.__all__)


def test_import_posembed_loads_no_scheme():
    code = "import sys, posembed; print(any(m.startswith('posembed.schemes') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_every_subpackage_is_in_the_facade_list():
    root = Path(posembed.__file__).parent
    folders = {p.parent.name for p in root.glob("*/__init__.py") if not p.parent.name.startswith("_")}
    assert folders <= set(posembed.SUBPACKAGES), sorted(folders - set(posembed.SUBPACKAGES))
    for name in posembed.SUBPACKAGES:
        assert (root / name / "__init__.py").is_file() or (root / f"{name}.py").is_file(), name


@pytest.mark.parametrize("name", ["schemes", "interop", "lab", "nn", "analysis", "kernels", "stats", "bench"])
def test_a_part_resolves_as_an_attribute_in_a_fresh_interpreter(name):
    """``import posembed; posembed.<part>`` with nothing imported before it (README's parts table)."""
    code = f"import sys, posembed; m = posembed.{name}; print(m.__name__, m is sys.modules['posembed.{name}'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [f"posembed.{name}", "True"]
    assert name in dir(posembed)


def test_import_posembed_and_version_load_no_torch():
    code = (
        "import sys, posembed; posembed.__version__; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        posembed.nonesuch  # noqa: B018


# -- every dotted name the pages write resolves by attribute, lazily (issue 41) ----------------------------------

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
DOTTED = re.compile(r"(?<![\w/.])posembed(?:\.[A-Za-z_]\w*)+")


def _dotted_names() -> list[str]:
    return sorted({m.group(0) for page in PAGES for m in DOTTED.finditer(page.read_text(encoding="utf-8"))})


def _fresh(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


#: walks each name from ``import posembed`` by attribute access only (no import statement), in a fresh interpreter
WALK = """
import json, sys, posembed
failed = {}
for name in json.loads(sys.argv[1]):
    value = posembed
    try:
        for part in name.split(".")[1:]:
            value = getattr(value, part)
    except Exception as error:
        failed[name] = f"{type(error).__name__}: {error}"
print(json.dumps(failed))
"""


def test_the_pages_name_the_parts_the_issue_found_unreachable():
    names = set(_dotted_names())
    assert {"posembed.interop.zoo", "posembed.interop.hf", "posembed.interop.extend", "posembed.stats.verdict"} <= names
    assert len(names) >= 40, names


@pytest.mark.slow
def test_every_dotted_name_the_pages_write_resolves_by_attribute():
    """README's ``posembed.interop.zoo``, ARCHITECTURE's ``posembed.lab.sweep.worker_plan.plan_workers``: attribute
    access from ``import posembed`` alone, as a reader would type them."""
    names = _dotted_names()
    done = _fresh(WALK.replace("sys.argv[1]", repr(json.dumps(names))))
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    # a part's old top-level place, named on the page as such, must fail with the way to its new one
    moved = {f"posembed.{old}": new for old, new in posembed._GUESSES.items()}
    for name in [name for name in failed if name in moved]:
        assert f"did you mean {moved[name]!r}" in failed.pop(name), name
    assert not failed, failed


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "posembed.interop.zoo",
        "posembed.interop.hf.load_embeddings",
        "posembed.interop.rope.config.rotary_from_hf_config",
        "posembed.interop.extend.retrieval_verdicts",
        "posembed.stats.verdict",
        "posembed.lab.sweep.worker_plan.plan_workers",
    ],
)
def test_a_deep_name_resolves_first_thing_in_a_fresh_interpreter(name):
    """Nothing imported before it: the lazy lookup of each package, not a side effect of an earlier import."""
    code = f"import posembed\nvalue = {name}\nprint(getattr(value, '__module__', None) or value.__name__)"
    done = _fresh(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().startswith(".".join(name.split(".")[:3])), done.stdout


def test_every_package_resolves_its_files_lazily():
    """Each package's ``__init__`` gives its files as attributes on first read (lab.report aside: its rewrite)."""
    root = Path(posembed.__file__).parent
    for init in sorted(root.rglob("__init__.py")):
        package = ".".join(("posembed", *init.parent.relative_to(root).parts))
        if package in ("posembed.lab.report",):
            continue
        module = importlib.import_module(package)
        assert "__getattr__" in vars(module), f"{package}/__init__.py has no lazy __getattr__"
        with pytest.raises(AttributeError, match=rf"module '{re.escape(package)}' has no attribute 'nonesuch'"):
            vars(module)["__getattr__"]("nonesuch")


def test_import_posembed_imports_no_torch_by_importtime():
    """``python -X importtime -c "import posembed"`` lists no torch module; a wrong guess's hint loads none either."""
    imported = [line.split("|")[-1].strip() for line in _fresh_importtime().splitlines() if "|" in line]
    assert "posembed" in imported and not [name for name in imported if name.split(".")[0] == "torch"]
    check = _fresh(
        "import sys, posembed\ntry:\n    posembed.from_hf\nexcept AttributeError:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    )
    assert check.stdout.strip() == "[]", check.stdout


def _fresh_importtime() -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import posembed"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stderr


@pytest.mark.parametrize("guess", ["from_hf", "from_pretrained", "load_pretrained", "load_hf"])
def test_a_name_guessed_from_transformers_names_the_loader(guess):
    with pytest.raises(
        AttributeError, match=re.escape(f"no attribute {guess!r} (did you mean 'posembed.interop.hf.load_embeddings'?)")
    ):
        getattr(posembed, guess)


def test_every_guess_points_at_a_name_that_resolves_and_shadows_nothing():
    for guess, target in posembed._GUESSES.items():
        assert guess not in posembed._EXPORTS and guess not in posembed.SUBPACKAGES, guess
        value = posembed
        for part in target.split(".")[1:]:
            value = getattr(value, part)
        assert callable(value) or isinstance(value, types.ModuleType), target  # a function, or a part's new place


@pytest.mark.parametrize("path, message", [
    ("interop.zooo", "module 'posembed.interop' has no attribute 'zooo' (did you mean 'zoo'?)"),
    ("RotaryEmbeding", "module 'posembed' has no attribute 'RotaryEmbeding' (did you mean 'RotaryEmbedding'?)"),
    ("interop.hf.embedding_blok", "(did you mean 'embedding_block'?)"),
    ("__main__", "module 'posembed' has no attribute '__main__'"),
])  # fmt: skip
def test_a_wrong_name_is_an_attribute_error_with_the_closest(path, message):
    value = posembed
    with pytest.raises(AttributeError, match=re.escape(message)):
        for part in path.split("."):
            value = getattr(value, part)


def test_a_dotted_name_never_imports_a_deeper_module():
    with pytest.raises(AttributeError, match="'interop.zoo'"):
        getattr(posembed, "interop.zoo")


def test_a_file_that_fails_its_own_import_raises_as_it_is(tmp_path, monkeypatch):
    """A missing optional dependency inside a file is that error, not "no attribute"."""
    package = tmp_path / "lazy_pkg_41"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from posembed._utils.names import submodules\n__getattr__ = submodules(__name__)\n"
    )
    (package / "broken.py").write_text("import nonesuch_dependency_41\n")
    (package / "fine.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("lazy_pkg_41")
    assert module.fine.VALUE == 41
    with pytest.raises(ModuleNotFoundError, match="nonesuch_dependency_41"):
        module.broken  # noqa: B018
    for name in ("lazy_pkg_41", "lazy_pkg_41.fine", "lazy_pkg_41.broken"):
        sys.modules.pop(name, None)


def _type_checking_imports() -> tuple[dict[str, str], set[str]]:
    """``{name: module}`` and the bare subpackages the facade's ``if TYPE_CHECKING:`` block imports."""
    tree = ast.parse(Path(posembed.__file__).read_text(encoding="utf-8"))
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"]
    names, parts = {}, set()
    for node in block.body:
        for alias in node.names:
            if node.module == "posembed":
                parts.add(alias.name)
            else:
                names[alias.name] = node.module
    return names, parts


def test_type_checkers_see_every_lazy_export_from_its_module():
    """The ``TYPE_CHECKING`` block (what IDEs and type checkers read) and the run-time table agree name for name."""
    names, parts = _type_checking_imports()
    assert names == posembed._EXPORTS
    assert parts == set(posembed.SUBPACKAGES)
