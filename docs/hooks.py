"""MkDocs hooks: the benchmarks page, lists as the pages write them, and no raw Sphinx role.

- The benchmarks page is the repository's BENCHMARKS.md, read at build time: it stays where the
  benchmark scripts write it (the repository root) without a second copy to keep in step.
- Lists render as written on GitHub: Python-Markdown wants a blank line before a list and four
  spaces per nesting level; the pages write lists straight under a sentence and nest them by two
  spaces. :func:`loosen_lists` adds the blank line and doubles the nesting indent (outside code).
- A Sphinx role left raw in a built page (``:meth:`` followed by code, from a docstring the
  griffe extension docs/griffe_sphinx.py did not convert) is a warning, so ``mkdocs build
  --strict`` fails on it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("mkdocs.plugins.posembed")

ITEM = re.compile(r"^( *)([-*+]|\d+[.)]) ")
#: a list may start right under a sentence only with a bullet or "1." (a wrapped "2. " stays prose)
OPENS_LIST = re.compile(r"^ *([-*+]|1[.)]) ")
RAW_ROLE = re.compile(r":(?:py:)?(?:meth|func|class|attr|data|mod|exc|obj|const):(?:`|<code>)")


def on_files(files, config):
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "benchmarks.md", content=text))
    return files


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def loosen_lists(markdown: str) -> str:
    """Blank line before a list that follows a paragraph line; indents inside a list doubled
    (nesting by 2 spaces made 4).

    >>> print(loosen_lists("Three:\\n- a\\n  - b\\n    more of b\\n- c"))
    Three:
    <BLANKLINE>
    - a
        - b
            more of b
    - c
    >>> loosen_lists("text\\n2. not a list")
    'text\\n2. not a list'

    """
    out: list[str] = []
    in_fence = in_list = False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence, in_list = not in_fence, False
        if in_fence:
            out.append(line)
            continue
        item = ITEM.match(line)
        if item:
            previous = out[-1] if out else ""
            if not in_list and OPENS_LIST.match(line) and previous.strip() and not previous.lstrip().startswith(
                    ("#", "|", ">", "<")):
                out.append("")
            in_list = True
        elif line.strip() and _indent(line) == 0:
            in_list = False  # a paragraph (or table, heading) after the list
        if in_list and line.strip() and _indent(line) > 0:
            line = " " * (2 * _indent(line)) + line.lstrip(" ")
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):
    return loosen_lists(markdown)


def on_post_page(output, page, config):
    for match in RAW_ROLE.finditer(output):
        context = re.sub(r"<[^>]+>", "", output[max(0, match.start() - 80) : match.end() + 60]).strip()
        log.warning("%s: a raw Sphinx role is left in the page: ...%s...", page.file.src_uri, context)
    return output
