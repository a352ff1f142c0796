"""The catalogue's verdicts as docs/zoo.md's generated table and as the expected-failures list.

:func:`summary` counts the verdicts of each variant; :func:`markdown` is the block between
``<!-- generated:rope-catalogue -->`` markers in docs/zoo.md (one row per pair: its verdict under
each variant and the reason of its first failure); :func:`failures` is the known-list the test
compares with ``rope_catalogue_expected.json`` (every row that is not exact).
"""

from __future__ import annotations

import collections
import json
import os
import re
from pathlib import Path

from tests.interop.rope_catalogue_compare import EXACT, VARIANTS, VERDICTS

EXPECTED = Path(__file__).with_name("rope_catalogue_expected.json")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "zoo.md"
NAME = "rope-catalogue"
_SHORT = {"exact": "✓", "layout wrong": "layout", "values wrong": "values", "refused": "refused",
          "no reference": "no ref"}  # fmt: skip

Row = tuple[str, str, str, str]


def failures(rows: list[Row]) -> dict[str, str]:
    """``{"model_type/Class variant": verdict}`` of every row that is not exact."""
    return {f"{key} {variant}": verdict for key, variant, verdict, _ in rows if verdict != EXACT}


def summary(rows: list[Row]) -> dict[str, dict[str, int]]:
    """``{variant: {verdict: count}}``."""
    counts: dict[str, collections.Counter] = {v: collections.Counter() for v in VARIANTS}
    for _, variant, verdict, _ in rows:
        counts[variant][verdict] += 1
    return {v: {k: c[k] for k in VERDICTS} for v, c in counts.items() if c}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(rows: list[Row], version: str) -> str:
    """The generated block's body: the counts, then one row per (model type, rotary class)."""
    lines = [f"Every `*RotaryEmbedding` class of transformers {version}, enumerated by "
             "`tests/interop/rope_catalogue.py` and checked by `tests/interop/test_rope_catalogue.py` "
             "(cos/sin within 1e-6, q·kᵀ within 1e-5 of the largest score, through the rotation function "
             "the model's attention calls). Written by `python tools/zoo_table.py`.", "",
             "| variant | " + " | ".join(VERDICTS) + " |", "|---|" + "---|" * len(VERDICTS)]  # fmt: skip
    for variant, counts in summary(rows).items():
        lines.append(f"| {variant} | " + " | ".join(str(counts[v]) for v in VERDICTS) + " |")
    by_pair: dict[str, dict[str, tuple[str, str]]] = collections.defaultdict(dict)
    for key, variant, verdict, why in rows:
        by_pair[key][variant] = (verdict, why)
    lines += ["", "| model type | rotary class | " + " | ".join(VARIANTS) + " | first failure |",
              "|---|---|" + "---|" * (len(VARIANTS) + 1)]  # fmt: skip
    for key in sorted(by_pair):
        cells = by_pair[key]
        model_type, rotary = key.split("/")
        marks = [_SHORT[cells[v][0]] if v in cells else "" for v in VARIANTS]
        first = next((f"{v}: {cells[v][0]}" + (f" ({cells[v][1]})" if cells[v][1] else "")
                      for v in VARIANTS if v in cells and cells[v][0] != EXACT), "")  # fmt: skip
        lines.append(f"| `{model_type}` | {rotary} | " + " | ".join(marks) + f" | {_cell(first)} |")
    return "\n".join(lines)


def _pattern() -> re.Pattern:
    return re.compile(rf"(<!-- generated:{NAME} -->\n)(.*?)(\n<!-- /generated:{NAME} -->)", re.S)


def page_block(text: str) -> str | None:
    match = _pattern().search(text)
    return None if match is None else match.group(2)


def write_page(body: str, page: Path = PAGE) -> None:
    """Replace the generated block of ``page`` (appending one at the end when there is none), atomically."""
    text = page.read_text(encoding="utf-8")
    if page_block(text) is None:
        text = (
            text.rstrip("\n")
            + f"\n\n## Every rotary class in transformers\n\n<!-- generated:{NAME} -->\n\n<!-- /generated:{NAME} -->\n"
        )
    text = _pattern().sub(lambda m: m.group(1) + body + m.group(3), text)
    _atomic(page, text)


def write_expected(rows: list[Row], version: str, path: Path = EXPECTED) -> None:
    data = {"transformers": version, "failures": dict(sorted(failures(rows).items()))}
    _atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def read_expected(path: Path = EXPECTED) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
