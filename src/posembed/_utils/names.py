"""Names: the closest known name to a mistyped one, and a package's names looked up on first use.

Torch-free, so ``import posembed`` and its "did you mean" stay cheap. Every ``__init__.py`` of the
package reaches its submodules through :func:`submodules` (``posembed.interop.zoo`` imports
``posembed/interop/zoo.py`` the first time it is read); the top-level facade adds its re-exported
names and the guesses people carry over from transformers (:func:`facade_attribute`).

>>> import posembed
>>> posembed.interop.zoo.__name__
'posembed.interop.zoo'
>>> posembed.from_pretrained  # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
AttributeError: module 'posembed' has no attribute 'from_pretrained'
(did you mean 'posembed.interop.hf.load_embeddings'?)
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType

__all__ = ["did_you_mean", "closest", "submodules", "submodule_names", "import_submodule", "facade_attribute"]


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name closest to a mistyped ``name``, ``""`` when none is close.

    Case, ``-`` and ``_`` are ignored when comparing (``Llama-3`` finds ``llama3``); a name
    the start of a known one (``sinus``) finds the shortest such. The suggestion goes right
    after the unknown name in an error message.

    >>> did_you_mean("llama_3", ["default", "linear", "llama3", "yarn"])
    " (did you mean 'llama3'?)"
    >>> did_you_mean("smok", ["quick", "smoke"]), did_you_mean("zzz", ["quick", "smoke"])
    (" (did you mean 'smoke'?)", '')
    >>> did_you_mean("sinus", ["rope", "sinusoidal_2d", "sinusoidal"])
    " (did you mean 'sinusoidal'?)"
    """
    match = closest(name, known)
    return f" (did you mean {match!r}?)" if match is not None else ""


def closest(name: object, known: Iterable[str]) -> str | None:
    """The known name :func:`did_you_mean` would suggest for ``name``, or ``None``.

    >>> closest("contxt", ["context", "steps"]), closest("x", ["context"])
    ('context', None)
    """
    if not isinstance(name, str):
        return None
    plain = {_plain(option): option for option in known}
    typed = _plain(name)
    close = difflib.get_close_matches(typed, list(plain), n=1, cutoff=0.75)
    if not close and len(typed) >= 3:  # a cut-short name: the shortest known one it begins
        close = sorted((option for option in plain if option.startswith(typed)), key=len)[:1]
    return plain[close[0]] if close else None


def _plain(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def submodule_names(package: str) -> list[str]:
    """The modules and subpackages inside the (imported) ``package``, by file name, without importing them.

    >>> "zoo" in submodule_names("posembed.interop")
    True
    """
    path = getattr(sys.modules[package], "__path__", None)
    return sorted(info.name for info in pkgutil.iter_modules(path)) if path is not None else []


def import_submodule(package: str, name: str, known: Iterable[str] = ()) -> ModuleType:
    """``package.name`` imported, or an ``AttributeError`` with the closest of ``known`` and the submodules.

    A module the submodule itself fails to import (an optional dependency) raises as it is.
    """
    full = f"{package}.{name}"
    if name.isidentifier() and not name.startswith("__"):  # a dotted or dunder name is never a submodule
        try:
            return importlib.import_module(full)
        except ModuleNotFoundError as error:
            if error.name != full:
                raise
    suggestion = "" if name.startswith("_") else did_you_mean(name, [*known, *submodule_names(package)])
    raise AttributeError(f"module {package!r} has no attribute {name!r}{suggestion}")


def submodules(package: str) -> Callable[[str], ModuleType]:
    """A package's module-level ``__getattr__``: its submodules, each imported when first read.

    In ``__init__.py``: ``__getattr__ = submodules(__name__)``. Python sets an imported
    submodule on its package, so the lookup runs once per name.
    """

    def __getattr__(name: str) -> ModuleType:
        return import_submodule(package, name)

    return __getattr__


def facade_attribute(package: str, name: str, exports: Mapping[str, str], guesses: Mapping[str, str]) -> object:
    """The top-level facade's lookup: a re-exported name from its module, else a submodule, else an error.

    ``exports`` maps a public name to the module that defines it; ``guesses`` maps a name people
    guess (``from_hf``, from transformers' habits) to the dotted name that does the job, which the
    error suggests. A found value is stored on the package, so the lookup runs once per name.
    """
    if name in guesses:
        raise AttributeError(f"module {package!r} has no attribute {name!r} (did you mean {guesses[name]!r}?)")
    if name in exports:
        value: object = getattr(importlib.import_module(exports[name]), name)
    else:
        value = import_submodule(package, name, known=exports)
    setattr(sys.modules[package], name, value)
    return value
