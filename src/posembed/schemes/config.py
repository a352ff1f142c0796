"""A scheme as a JSON-able dict and back: what model configs and lab checkpoints store.

``scheme_config(scheme)`` reads ``{"name": <scheme name>, **constructor kwargs}`` off a scheme,
each argument from where its :class:`~posembed.schemes.factory.Arg` says it is stored;
``build_scheme(config)`` checks the arguments against the scheme's
:class:`~posembed.schemes.factory.SchemeEntry` and rebuilds it.

Example:
    >>> from posembed.schemes.absolute.learned import LearnedAbsolute
    >>> scheme_config(LearnedAbsolute(32, 8))
    {'name': 'learned', 'max_len': 32, 'dim': 8, 'init_std': 0.02}
    >>> build_scheme({"name": "learned", "max_len": 32, "dim": 8}).max_positions
    32
"""

from __future__ import annotations

import functools

from posembed.schemes.base import PositionScheme
from posembed.schemes.factory import Arg, build_from_kwargs, scheme_entry

__all__ = ["build_scheme", "scheme_config"]


def scheme_config(scheme: PositionScheme) -> dict:
    """``{"name": <scheme name>, **constructor kwargs}`` of a scheme, in constructor order."""
    if scheme.name is None:
        raise ValueError(f"{type(scheme).__name__} has no scheme name; it cannot be saved in a config")
    entry = scheme_entry(scheme.name)
    if type(scheme) is not entry.cls:
        raise ValueError(
            f"cannot save {type(scheme).__name__} in a config: its name {scheme.name!r} belongs to "
            f"{entry.cls.__name__}; give the subclass its own name and factory entry"
        )
    if getattr(scheme, "dealt", None) is not None:  # MRoPE.deal: a scaled type's frequencies no argument states
        raise ValueError(
            f"cannot save {type(scheme).__name__} dealing {type(scheme.dealt).__name__}'s frequencies in a config"
        )
    return {"name": scheme.name, **{arg.name: _stored_value(scheme, arg) for arg in entry.args}}


def _stored_value(scheme: PositionScheme, arg: Arg):
    if callable(arg.stored_at):
        return _jsonable(arg.stored_at(scheme), arg.name)
    path = arg.stored_at or arg.name
    try:
        value = functools.reduce(getattr, path.split("."), scheme)
    except AttributeError:
        raise ValueError(
            f"cannot save {type(scheme).__name__} in a config: argument {arg.name!r} is not stored at {path!r}"
        ) from None
    return _jsonable(value, arg.name)


def _jsonable(value, name: str):
    if isinstance(value, (tuple, list)):
        return [_jsonable(v, name) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"scheme argument {name!r}={value!r} is not JSON-able")


def build_scheme(config: dict) -> PositionScheme:
    """Rebuild a scheme from :func:`scheme_config`'s dict.

    ``ValueError`` for an unknown name, an unknown or wrong-typed argument, or a missing one.
    """
    kwargs = dict(config)
    name = kwargs.pop("name", None)
    if not isinstance(name, str):
        raise ValueError(f"a scheme config needs a 'name' (a string), got {name!r}")
    return build_from_kwargs(name, kwargs)
