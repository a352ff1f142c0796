"""What a factory entry is: the model's sizes, a scheme's constructor arguments and the names it goes by.

:mod:`posembed.schemes.factory` holds the one table of these entries and builds through it; this file
holds only the types (:class:`ModelSizes`, :class:`Arg`, :class:`StudyReference`, :class:`SchemeEntry`)
and how an argument's value is checked.

Example:
    >>> Arg("factor", "float", required=True).accepts(4)
    True
    >>> Arg("factor", "float").describe_kind()
    'a number'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from posembed.schemes.base import PositionScheme

__all__ = ["ModelSizes", "SIZE_FIELDS", "Reader", "Arg", "StudyReference", "SchemeEntry", "listed"]


@dataclass(frozen=True)
class ModelSizes:
    """The sizes of the model a scheme goes into.

    Attributes:
        dim: width C of absolute position vectors (the model width, or its concatenated part).
        num_heads: attention heads H.
        head_dim: width D of one head (rotary schemes rotate it).
        max_len: number of positions a table holds (learned tables).
        causal: decoder (True) or encoder (False); ``bidirectional`` is its negation.
    """

    dim: int
    num_heads: int
    head_dim: int
    max_len: int
    causal: bool

    @property
    def bidirectional(self) -> bool:
        """Whether attention looks both ways (ALiBi's ``symmetric``, T5's ``bidirectional``)."""
        return not self.causal


#: the :class:`ModelSizes` values an argument can be filled from
SIZE_FIELDS = ("dim", "num_heads", "head_dim", "max_len", "bidirectional")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: argument kind -> (check, words for the error)
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "int": (_is_int, "an integer"),
    "float": (_is_number, "a number"),
    "bool": (lambda value: isinstance(value, bool), "true or false"),
    "str": (lambda value: isinstance(value, str), "a string"),
    "floats": (lambda value: isinstance(value, (list, tuple)) and all(map(_is_number, value)), "a list of numbers"),
    "strs": (
        lambda value: isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value),
        "a list of strings",
    ),
}

#: how to read an argument back off a built scheme: a dotted attribute path, or a function
Reader = str | Callable[[PositionScheme], Any]


@dataclass(frozen=True)
class Arg:
    """One constructor argument of a scheme.

    Attributes:
        name: the constructor's keyword.
        kind: ``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"floats"`` or ``"strs"`` (lists).
        size: the :data:`SIZE_FIELDS` entry that fills it when building from sizes, or ``None``.
        required: the constructor has no default for it.
        nullable: ``None`` is accepted (the constructor's default is ``None``).
        stored_at: where the value is on a built scheme: a dotted attribute path (default
            ``name``) or a function of the scheme, for arguments not kept as given; how
            :func:`posembed.schemes.config.scheme_config` reads it back.
        rope: the keys of a RoPE config's values it is read from (:func:`rope_kwargs`), the first
            that is not ``None`` winning: a ``rope_parameters`` field (``"factor"``) or a setting
            (``"original_max_position_embeddings"``, ``"head_dim"``); ``()``: never read from one.
    """

    name: str
    kind: str
    size: str | None = None
    required: bool = False
    nullable: bool = False
    stored_at: Reader | None = None
    rope: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"Arg {self.name!r}: kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")
        if self.size is not None and self.size not in SIZE_FIELDS:
            raise ValueError(f"Arg {self.name!r}: size must be one of {', '.join(SIZE_FIELDS)}, got {self.size!r}")

    def accepts(self, value: Any) -> bool:
        return (value is None and self.nullable) or _KINDS[self.kind][0](value)

    def describe_kind(self) -> str:
        return _KINDS[self.kind][1] + (" or null" if self.nullable else "")


@dataclass(frozen=True)
class StudyReference:
    """How the lab's context study (:mod:`posembed.lab.context`) trains a scheme as a length-robust
    reference: its place in the study's tables (``rank``) and its arguments from the training
    length L (``args``; the sizes fill the rest). NoPE is trained as a model without a scheme."""

    rank: int
    args: Callable[[int], dict] = lambda context: {}


@dataclass(frozen=True)
class SchemeEntry:
    """How one scheme is built, and the names it goes by.

    Attributes:
        cls: the scheme class; its ``name`` is the factory's name for it.
        args: its constructor arguments, in constructor order.
        rope_type: transformers' ``rope_type`` for this scheme (``"yarn"``), or ``None``
            (:func:`rope_entry`; :data:`posembed.interop.rope.config.ROPE_TYPES` lists them).
        method: the context-extension method name of the lab (``posembed lab extend --method``,
            :data:`posembed.lab.context.METHODS`), or ``None``.
        rope_field: a field whose presence makes a ``default`` or ``axial`` RoPE config this scheme
            (``"mrope_section"``: M-RoPE; ``"pixtral_frequencies"``, the reader's: Pixtral), or ``None``.
        rope_needs: the ``rope_parameters`` fields transformers' init function of ``rope_type`` needs
            (a config without one is refused, naming it, though the constructor has a default).
        reference: how the context study trains it as a reference (:class:`StudyReference`), or ``None``.
    """

    cls: type[PositionScheme]
    args: tuple[Arg, ...]
    rope_type: str | None = None
    method: str | None = None
    rope_field: str | None = None
    rope_needs: tuple[str, ...] = ()
    reference: StudyReference | None = None

    @property
    def name(self) -> str:
        name = self.cls.name
        if name is None:
            raise TypeError(
                f"{self.cls.__name__} has no scheme name (an abstract base); only a named scheme has an entry"
            )
        return name

    @property
    def accepted(self) -> tuple[str, ...]:
        return tuple(arg.name for arg in self.args)

    @property
    def needs(self) -> tuple[str, ...]:
        """Required arguments no size fills: what a caller must give (``--set`` / ``scheme_kwargs``)."""
        return tuple(arg.name for arg in self.args if arg.required and arg.size is None)

    @property
    def length_limit(self) -> bool:
        """Whether positions beyond some size are refused (the class declares it)."""
        return bool(self.cls.has_length_limit)

    def arg(self, name: str) -> Arg:
        for arg in (arg for arg in self.args if arg.name == name):
            return arg
        raise ValueError(f"scheme {self.name!r} takes no argument {name!r}; it takes: {listed(self.accepted)}")


def listed(names: tuple[str, ...]) -> str:
    return ", ".join(names) or "no arguments"
