"""A scheme as a JSON-able dict and back: what model configs and lab checkpoints store.

``scheme_config(scheme)`` reads ``{"name": <registry name>, **constructor kwargs}`` off a scheme;
``build_scheme(config)`` rebuilds it from the registry (:data:`~posembed.schemes.base.SCHEMES`).
"""

from __future__ import annotations

import importlib
import inspect

import torch

from posembed.schemes.base import SCHEMES, PositionScheme

__all__ = ["build_scheme", "scheme_config"]

_SKIPPED_ARGS = ("self", "device", "dtype")


def scheme_config(scheme: PositionScheme) -> dict:
    """``{"name": <registry name>, **constructor kwargs}`` of a scheme, read from its attributes.

    A scheme may define ``config()`` returning its kwargs; otherwise every constructor argument
    must be stored as an attribute of the same name (as :class:`~posembed.LearnedAbsolute` does),
    on the scheme or on a scheme it wraps (composition, one level).
    """
    if scheme.name is None:
        raise ValueError(f"{type(scheme).__name__} has no registry name; it cannot be saved in a config")
    if hasattr(scheme, "config"):
        return {"name": scheme.name, **scheme.config()}
    kwargs = {}
    for arg in _constructor_args(type(scheme)):
        owners = [scheme, *(m for m in scheme.children() if isinstance(m, PositionScheme))]
        owner = next((o for o in owners if hasattr(o, arg)), None)
        if owner is None:
            raise ValueError(
                f"cannot save {type(scheme).__name__} in a config: argument {arg!r} is not stored as an attribute"
            )
        kwargs[arg] = _jsonable(getattr(owner, arg), arg)
    return {"name": scheme.name, **kwargs}


def _constructor_args(cls: type) -> list[str]:
    """Named constructor arguments, following ``**kwargs`` up to the base classes' constructors."""
    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or not issubclass(klass, PositionScheme):
            continue
        forwards = False
        for arg in inspect.signature(klass.__init__).parameters.values():
            if arg.kind == arg.VAR_KEYWORD:
                forwards = True
            elif arg.name not in _SKIPPED_ARGS and arg.kind != arg.VAR_POSITIONAL and arg.name not in names:
                names.append(arg.name)
        if not forwards:
            break
    return names


def _jsonable(value, name: str):
    if isinstance(value, (tuple, list)):
        return [_jsonable(v, name) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, name) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return str(value)
    raise ValueError(f"scheme argument {name!r}={value!r} is not JSON-able")


def build_scheme(config: dict) -> PositionScheme:
    """Rebuild a scheme from :func:`scheme_config`'s dict (looked up in ``SCHEMES``)."""
    config = dict(config)
    name = config.pop("name", None)
    if name not in SCHEMES:
        from posembed.schemes import SCHEME_MODULES

        for module in SCHEME_MODULES:
            try:
                importlib.import_module(f"posembed.schemes.{module}")
            except ModuleNotFoundError:
                continue
    if name not in SCHEMES:
        raise ValueError(f"unknown scheme {name!r}; known: {', '.join(sorted(SCHEMES))}")
    return SCHEMES[name](**config)
