"""Write ``src/posembed/interop/rope/rotations.json``: the rotation each transformers family's attention applies.

The run time reads that table (:mod:`posembed.interop.rope.table`); this tool derives it from the installed
transformers (the pinned one, ``constraints.txt``) with the probes the reader used to run at run time: for every
config class transformers knows (``CONFIG_MAPPING`` and their sub-configs), the module-level rotation function its
attention calls (read from the modeling module's source: the classes of its tower that call a function named like
``apply_rotary_pos_emb``, the interleaved one where the attention switches on ``config.rope_interleave``), called
on one-hot vectors: the channel it pairs with channel 0 (``"interleaved"`` or ``"half"``), the sign of a quarter
turn (``"forward"`` or ``"reversed"``), and with cos / sin half as wide, the ``"first"`` or ``"last"`` channels.

Usage (from the repository root)::

    PYTHONPATH=src python tools/rope_table.py            # rewrites the table
    PYTHONPATH=src python tools/rope_table.py --check    # exit 1 (naming the entries) when it differs from a fresh run

``tests/interop/test_rope_table.py`` runs the ``--check`` comparison in CI.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

import torch

TABLE = Path(__file__).resolve().parents[1] / "src" / "posembed" / "interop" / "rope" / "rotations.json"
#: the name of a module-level rotation function (``apply_rotary_pos_emb``, ``apply_rotary_emb``, ...)
_APPLY = re.compile(r"(rotary|rope|pos_emb)", re.I)
#: source that rotates pairs of adjacent channels (when a probe cannot call the function)
_INTERLEAVED_SOURCE = ("::2]", "0::2", "view_as_complex", "repeat_interleave", "d // 2, 2", "-1, 2)")


@functools.cache
def _classes(module_name: str) -> list[ast.ClassDef]:
    """The classes of a modeling module, in source order (the module parsed once)."""
    source = inspect.getsource(importlib.import_module(module_name))
    return [node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]


@functools.cache
def _called(module_name: str, index: int) -> tuple[list[str], bool]:
    """The module-level rotation functions the module's ``index``-th class calls, and whether it reads
    ``rope_interleave`` (each class walked once, and only where it is asked about)."""
    module, names, switch = importlib.import_module(module_name), set(), False
    for node in ast.walk(_classes(module_name)[index]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names.add(node.func.id)
        elif isinstance(node, ast.Attribute) and node.attr == "rope_interleave":
            switch = True
    return sorted(n for n in names if _APPLY.search(n) and inspect.isfunction(getattr(module, n, None))), switch


def _apply_function(module: Any, interleave: bool, tower: str):
    """The rotation function the attention of ``tower`` (``""``: the language model) calls (its interleaved one where
    it switches on ``rope_interleave`` and ``interleave``)."""
    from posembed.interop.rope.model import tower_of

    classes = [(i, cls.name) for i, cls in enumerate(_classes(module.__name__)) if tower_of(cls.name) == tower]
    for wanted in ("Attention", "Layer", ""):
        for index, class_name in classes:
            applies, switch = _called(module.__name__, index) if wanted in class_name else ([], False)
            if applies:
                picked = [name for name in applies if ("interleave" in name) == (switch and interleave)] or applies
                return getattr(module, picked[0])
    return None


def _caller(apply):
    """``call(x, cos, sin)`` of a rotation function taking ``(q, k, cos, sin, ...)`` or ``(x, cos, sin, ...)``."""
    names = list(inspect.signature(apply).parameters)
    if len(names) > 1 and names[1] == "cos":
        return lambda x, cos, sin: apply(x, cos, sin)
    return lambda x, cos, sin: apply(x, x, cos, sin)[0]


def probe(apply) -> tuple[str, str, str] | None:
    """``(layout, direction, channels)`` of a rotation function, from one-hot vectors: the channel it pairs with
    channel 0 (1: interleaved, ``D / 2``: half), the sign of a quarter turn (``-``: reversed, nanochat), and with
    cos / sin half as wide, the first or the last channels turned (DeepSeek-V4); ``None``: unclear."""
    d, call = 8, _caller(apply)
    eye = torch.eye(d)
    for width in (d, d // 2):  # cos / sin as wide as the head, or one entry per pair
        one, zero = torch.ones(1, 1, width), torch.zeros(1, 1, width)
        try:
            turned = call(eye[:1].view(1, 1, 1, d), zero, one).reshape(d).float()  # a quarter turn
            scores = call(eye[[1, d // 2]].view(2, 1, 1, d), one, zero).reshape(2, d).float() @ turned  # none
            break
        except (RuntimeError, TypeError, ValueError, IndexError):  # another width, or another signature: its source
            continue
    else:
        return None
    if scores.abs()[0] > 0.5 > scores.abs()[1]:
        layout, sign = "interleaved", scores[0]
    elif scores.abs()[1] > 0.5 > scores.abs()[0]:
        layout, sign = "half", scores[1]
    else:
        return None
    try:  # cos / sin half as wide: which end turns
        ends = eye[[0, d - 1]].view(2, 1, 1, d)
        moved = (
            call(ends, zero[..., : width // 2], one[..., : width // 2]).reshape(2, d).float() - eye[[0, d - 1]]
        ).abs()
        channels = "last" if moved[1].sum() > 0.5 > moved[0].sum() else "first"
    except (RuntimeError, TypeError, ValueError, IndexError):  # a function needing cos / sin as wide as the head
        channels = "first"
    return layout, "reversed" if sign < 0 else "forward", channels


@functools.cache
def module_rotation(module_name: str, interleave: bool, tower: str) -> tuple[str, str, str] | None:
    """``(layout, direction, channels)`` of the rotation function the attention of ``tower`` in a modeling module
    calls; ``None``: none found."""
    module = importlib.import_module(module_name)
    apply = _apply_function(module, interleave, tower)
    if apply is None:
        return None
    probed = probe(apply)
    if probed is not None:
        return probed
    source = inspect.getsource(apply) + "".join(
        inspect.getsource(getattr(module, name))
        for name in apply.__code__.co_names
        if inspect.isfunction(getattr(module, name, None))
    )
    return ("interleaved" if any(mark in source for mark in _INTERLEAVED_SOURCE) else "half"), "forward", "first"


def _config_classes() -> dict[str, type]:
    """``{class name: class}`` of every config class in ``CONFIG_MAPPING`` and, depth first, its sub-configs."""
    from transformers import CONFIG_MAPPING

    found: dict[str, type] = {}
    todo = [CONFIG_MAPPING[name] for name in sorted(CONFIG_MAPPING.keys())]
    while todo:
        cls = todo.pop(0)
        if not isinstance(cls, type) or cls.__name__ in found:
            continue
        found[cls.__name__] = cls
        todo += [sub for _, sub in sorted((getattr(cls, "sub_configs", None) or {}).items()) if isinstance(sub, type)]
    return found


def _interleave_default(config_type: type) -> bool | None:
    """The ``rope_interleave`` a config class's default object holds (``None``: none, or a class that needs
    arguments)."""
    try:
        value = getattr(config_type(), "rope_interleave", None)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    return None if value is None else bool(value)


def class_entry(config_type: type) -> dict | None:
    """The table entry of a config class: ``{"rotation": [layout, direction, channels]}``, with ``"interleave"``: the
    rotation where its config sets ``rope_interleave`` (the attention switches on it) and ``"interleave_default"``:
    the class's own setting; ``None``: no rotation function found."""
    from posembed.interop.rope.model import modeling_module, own_position_class, rotary_classes, tower_of

    try:
        module = modeling_module(config_type)
    except ImportError:  # a config class without a modeling module
        return None
    own = own_position_class(config_type)  # Llama 4's vision tower: its own attention's rotation
    found = rotary_classes(config_type)
    tower = tower_of((own or found[0]).__name__) if own or found else ""  # GPT-J: no rotary class, the language model
    plain, switched = (module_rotation(module.__name__, interleave, tower) for interleave in (False, True))
    if plain is None:
        return None
    entry: dict[str, Any] = {"rotation": list(plain)}
    if switched != plain:
        entry |= {"interleave": list(switched), "interleave_default": bool(_interleave_default(config_type))}
    return entry


def derive() -> dict:
    """The table: ``{"transformers": version, "classes": {config class name: entry}, "model_types": {model_type:
    its config class's name}}`` (``model_types``: the reader of a dict without transformers)."""
    import transformers
    from transformers import CONFIG_MAPPING

    classes = {}
    for name, cls in _config_classes().items():
        entry = class_entry(cls)
        if entry is not None:
            classes[name] = entry
    types = {
        key: CONFIG_MAPPING[key].__name__
        for key in sorted(CONFIG_MAPPING.keys())
        if CONFIG_MAPPING[key].__name__ in classes
    }
    return {"transformers": transformers.__version__, "classes": dict(sorted(classes.items())), "model_types": types}


def dumps(table: dict) -> str:
    """The table as written: one entry a line."""
    lines = [f'{{"transformers": {json.dumps(table["transformers"])},']
    for section in ("classes", "model_types"):
        items = list(table[section].items())
        lines.append(f'"{section}": {{')
        lines += [
            f"  {json.dumps(key)}: {json.dumps(value)}{',' if i < len(items) - 1 else ''}"
            for i, (key, value) in enumerate(items)
        ]
        lines.append("}," if section == "classes" else "}")
    return "\n".join(lines) + "}\n"


def differences(shipped: dict, derived: dict) -> list[str]:
    """What differs between two tables, one line an entry (``[]``: none)."""
    found = (
        [f"transformers: {shipped.get('transformers')} shipped, {derived['transformers']} derived"]
        if shipped.get("transformers") != derived["transformers"]
        else []
    )
    for section in ("classes", "model_types"):
        mine, theirs = shipped.get(section, {}), derived[section]
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                found.append(f"{section}[{key!r}]: {mine.get(key)} shipped, {theirs.get(key)} derived")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare the shipped table with a fresh one; write nothing"
    )
    args = parser.parse_args(argv)
    derived = derive()
    if args.check:
        found = differences(json.loads(TABLE.read_text()), derived)
        for line in found:
            print(line, file=sys.stderr)
        return 1 if found else 0
    TABLE.write_text(dumps(derived))
    print(f"{TABLE}: {len(derived['classes'])} config classes, {len(derived['model_types'])} model types")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    raise SystemExit(main())
