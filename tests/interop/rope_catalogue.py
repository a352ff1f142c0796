"""Every rotary embedding class transformers defines, found by reading transformers itself.

The catalogue is a list of :class:`Pair`: a model type (a key of transformers'
``CONFIG_MAPPING``), one ``*RotaryEmbedding`` class its modeling module defines, the path of the
sub-config its model passes to that class (``""``: the model type's own config; ``"text_config"``,
``"vision_config"``, ``"thinker_config.text_config"``, ...) and the rotation function its
attention calls. Nothing here lists families by hand:

- the rotary classes are the ``class *RotaryEmbedding*(`` lines of ``models/<module>/modeling_<module>.py``;
- the sub-config is read from the source: the class ``C`` whose ``__init__`` builds the rotary
  class, ``C``'s config class (its ``config: XConfig`` annotation, or the argument its own builder
  passes, ``config.<x>_config`` or ``config.encoder`` / ``.decoder``, followed up to three builders up; where
  builders use different config classes, or pass another config they hold, the one the rotary class's own
  ``__init__`` names),
  then where an instance of that config class sits in the model type's default config (found by walking
  its sub-configs);
- the rotation function is the module-level function that the attention classes of the same tower
  (vision / audio / text, by class name) call, choosing the interleaved one where the attention
  switches on ``config.rope_interleave`` (a config field; see :func:`apply_name`).

Finding the pairs imports every configuration class (about 10 s); :func:`catalogue` caches them in
``rope_catalogue_pairs.json`` beside this file, keyed by the transformers version, and finds them
again when the installed version differs (moving the pin re-enumerates; ``tools/zoo_table.py
--refresh`` rewrites the cache).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from functools import cache
from pathlib import Path

CACHE = Path(__file__).with_name("rope_catalogue_pairs.json")
_CLASS = re.compile(r"^class (\w*RotaryEmbedding\w*)\((.*?)\):", re.M)
_ANY_CLASS = re.compile(r"^class (\w+)\((.*?)\):", re.M)
_APPLY = re.compile(r"^def (\w*(?:rotary|rope|pos_emb)\w*)\(", re.M)
_TOWERS = ("Vision", "Audio", "DiT", "Talker", "Code2Wav", "SaProt", "Sam", "Atom")


@dataclasses.dataclass(frozen=True)
class Pair:
    """One (model type, rotary class) the model type's config builds.

    ``config_path``: dotted path of the sub-config the model passes (``""``: its own config);
    ``apply``: the rotation function its attention calls (``None``: none found);
    ``interleave_switch``: the attention picks ``apply_rotary_pos_emb_interleave`` when
    ``config.rope_interleave`` is true.
    """

    model_type: str
    module: str
    rotary_class: str
    config_path: str
    apply: str | None
    interleave_switch: bool = False

    @property
    def key(self) -> str:
        return f"{self.model_type}/{self.rotary_class}"


def transformers_root() -> Path:
    import transformers

    return Path(transformers.__file__).parent


def _class_bodies(source: str) -> dict[str, str]:
    """``{class name: its source}`` for every top-level class of a module's source."""
    starts = [(m.group(1), m.start()) for m in _ANY_CLASS.finditer(source)]
    bodies = {}
    for (name, start), nxt in zip(starts, [s for _, s in starts[1:]] + [len(source)]):
        first = source.index("\n", start) + 1
        tail = re.search(r"^[^\s#@)]", source[first:nxt], re.M)  # stop at the next top-level statement
        bodies[name] = source[start : first + tail.start() if tail else nxt]
    return bodies


def _init_config(body: str) -> str | None:
    """The config class a class's ``__init__(self, config: XConfig)`` names."""
    init = re.search(r"def __init__\(self, config: (\w+Config)", body)
    return init.group(1) if init else None


def _config_class_of(
    name: str, bodies: dict[str, str], depth: int = 0, hint: str | None = None
) -> tuple[str | None, str]:
    """``(config class name, attribute path below it)`` that class ``name`` is built with. Where several builders
    build it with different config classes, the one ``hint`` names (the rotary class's own ``__init__``
    annotation) wins: Moshi's depth decoder builds its layers with ``MoshiDepthConfig`` and ``use_rope=False``, its
    language model with ``MoshiConfig``, the config ``MoshiRotaryEmbedding.__init__`` names."""
    body = bodies.get(name, "")
    annotated = re.search(r"^    config(?:_class)?\s*[:=]\s*(\w+Config)\b", body, re.M)
    if annotated:
        return annotated.group(1), ""
    if depth < 3:
        found = []
        for other, other_body in bodies.items():
            call = re.search(
                rf"\b{name}\((?:[^()]*?\bconfig=|\s*)(self\.)?config((?:\.\w+_config|\.encoder|\.decoder)*)[,)]",
                other_body,
            )
            if call and other != name:
                owner, path = _config_class_of(other, bodies, depth + 1, hint)
                if owner is not None:
                    found.append((owner, ".".join(p for p in (path, call.group(2).strip(".")) if p)))
        if found:
            return next((f for f in found if f[0] == hint), found[0])
    return _init_config(body), ""


def _builder_of(rotary: str, bodies: dict[str, str]) -> tuple[str | None, str]:
    """``(config class name, attribute path)`` of the config the rotary class is built with."""
    named = re.search(r"def __init__\(self, \w*config: (\w+Config)", bodies.get(rotary, ""))
    hint = named.group(1) if named else None
    for name, body in bodies.items():
        call = re.search(rf"\b{rotary}\(\s*(?:config=)?(self\.)?(\w*config)((?:\.\w+_config)*)", body)
        if call and name != rotary:
            if call.group(2) != "config" and hint:  # another config its builder holds (ESMFold2's ``atom_config``)
                return hint, ""
            owner, path = _config_class_of(name, bodies, hint=hint)
            return owner, ".".join(p for p in (path, call.group(3).strip(".")) if p)
    return None, ""


def _tower(name: str) -> str:
    return next((t for t in _TOWERS if t in name), "")


def apply_name(rotary: str, source: str, bodies: dict[str, str]) -> tuple[str | None, bool]:
    """The rotation function the attention of ``rotary``'s tower calls, and whether it switches on
    ``rope_interleave``."""
    applies = _APPLY.findall(source)
    tower = _tower(rotary)
    best: list[tuple[int, str, str]] = []
    for fn in applies:
        for name, body in bodies.items():
            if name != rotary and re.search(rf"(?<![\w.]){fn}\(", body):
                score = (2 if _tower(name) == tower else 0) + ("Attention" in name or "Layer" in name)
                best.append((score, fn, body))
    if not best:
        return None, False
    top = max(score for score, _, _ in best)
    chosen = [(fn, body) for score, fn, body in best if score == top]
    fns = list(dict.fromkeys(fn for fn, _ in chosen))
    switch = any("rope_interleave" in body for _, body in chosen) and len(fns) > 1
    plain = [fn for fn in fns if "interleave" not in fn] or fns
    return plain[0], switch


def _sub_config_paths(config, prefix: str = "", depth: int = 0) -> dict[str, object]:
    """``{dotted path: config}`` of ``config`` and every sub-config below it."""
    from transformers import PreTrainedConfig

    found = {prefix: config}
    if depth < 3:
        for attr, value in vars(config).items():
            if isinstance(value, PreTrainedConfig) and not attr.startswith("_"):
                found.update(_sub_config_paths(value, f"{prefix}.{attr}".strip("."), depth + 1))
    return found


def _pairs_of(model_type: str, module: str, source: str) -> list[Pair]:
    from transformers import CONFIG_MAPPING

    rotaries = _CLASS.findall(source)
    if not rotaries:
        return []
    try:
        root = CONFIG_MAPPING[model_type]()
    except Exception:  # a config class that cannot be built from its defaults has no pair
        return []
    paths = _sub_config_paths(root)
    bodies = _class_bodies(source)
    pairs = []
    for rotary, _ in rotaries:
        owner, below = _builder_of(rotary, bodies)
        if owner is None:
            continue
        for path, sub in paths.items():
            if type(sub).__name__ == owner:
                full = ".".join(p for p in (path, below) if p)
                apply, switch = apply_name(rotary, source, bodies)
                pairs.append(Pair(model_type, module, rotary, full, apply, switch))
                break
    return pairs


def enumerate_pairs() -> list[Pair]:
    """Every (model type, rotary class) pair of the installed transformers (slow: imports every config class)."""
    import warnings

    from transformers.models.auto import configuration_auto

    root = transformers_root() / "models"
    pairs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type in configuration_auto.CONFIG_MAPPING_NAMES:
            module = configuration_auto.model_type_to_module_name(model_type)
            path = root / module / f"modeling_{module}.py"
            if path.exists():
                pairs.extend(_pairs_of(model_type, module, path.read_text(encoding="utf-8")))
    return pairs


def write_cache(pairs: list[Pair], path: Path = CACHE) -> None:
    """Write the pairs with the transformers version (atomically)."""
    import transformers

    data = {"transformers": transformers.__version__, "pairs": [dataclasses.asdict(p) for p in pairs]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@cache
def catalogue() -> tuple[Pair, ...]:
    """The pairs of the installed transformers: from the cache when its version matches, else enumerated."""
    import transformers

    if CACHE.exists():
        data = json.loads(CACHE.read_text(encoding="utf-8"))
        if data.get("transformers") == transformers.__version__:
            return tuple(Pair(**p) for p in data["pairs"])
    return tuple(enumerate_pairs())
