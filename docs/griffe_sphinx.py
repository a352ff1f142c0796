"""Griffe extension for the API page: the package's docstrings rendered as their authors meant.

The docstrings follow torch.nn's habits, which mkdocstrings' Google parser does not read:

- Sphinx roles (``:meth:`~posembed.kernels.embedding.fused_embedding```, ``:class:`Foo```) become
  autorefs links: the object's page anchor where the API page renders it, else its name as code
  (an *optional* reference: no warning, no broken link);
- doctest lines (``>>> x``, with the output under them) become a fenced ``pycon`` block, so a
  docstring's example outside an ``Examples:`` section renders as code, not as nested quotes;
- reStructuredText's double backticks (````x````) become Markdown's single ones.

The package's sources are not touched: this runs on the text griffe reads, at build time only
(mkdocs.yml: ``extensions: [docs/griffe_sphinx.py:SphinxDocstrings]``).
"""

from __future__ import annotations

import html
import re

import griffe

ROLE = re.compile(r":(?:py:)?(meth|func|class|attr|data|mod|exc|obj|const):`(~?)\.?([^`]+?)`")
DOCTEST = re.compile(r"^(>>>|\.\.\.)( |$)")
FENCE = re.compile(r"^\s*(```|~~~)")
DOUBLE_TICKS = re.compile(r"``([^`\n]+?)``")
CALLABLE_ROLES = ("meth", "func")


def role_to_autoref(match: re.Match, owner: str) -> str:
    """One Sphinx role as an optional autorefs reference; ``owner`` qualifies a bare name."""
    kind, short, target = match.group(1), match.group(2) == "~", match.group(3).strip()
    if "<" in target and target.endswith(">"):  # :func:`title <target>`
        title, target = (part.strip() for part in target[:-1].split("<", 1))
    else:
        title = target.rsplit(".", 1)[-1] if short else target
        if kind in CALLABLE_ROLES and not title.endswith(")"):
            title += "()"
    identifier = target if "." in target or not owner else f"{owner}.{target}"
    return f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code></autoref>'


def fence_doctests(text: str) -> str:
    """Wrap every run of doctest lines (and the output under them) in a ``pycon`` fence at their indent."""
    out: list[str] = []
    lines = text.split("\n")
    in_fence, i = False, 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence or not line.lstrip().startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        block = []
        while i < len(lines) and lines[i].strip() and not FENCE.match(lines[i]):
            block.append(lines[i])
            i += 1
        previous = out[-1] if out else ""
        if previous.strip() and len(previous) - len(previous.lstrip()) >= len(indent):  # not a section's title
            out.append("")
        out += [f"{indent}```pycon", *block, f"{indent}```", ""]
    return "\n".join(out)


def convert(text: str, owner: str) -> str:
    """A docstring's text with roles linked, top-level doctests fenced and double backticks single."""
    pieces = re.split(r"(^ *```.*?^ *```)", fence_doctests(text), flags=re.S | re.M)  # keep code as it is
    for index in range(0, len(pieces), 2):
        prose = DOUBLE_TICKS.sub(r"`\1`", pieces[index])
        pieces[index] = ROLE.sub(lambda match: role_to_autoref(match, owner), prose)
    return "".join(pieces)


class SphinxDocstrings(griffe.Extension):
    """Rewrite every docstring griffe loads (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is None:
            return
        owner = obj.path if obj.is_class or obj.is_module else (obj.parent.path if obj.parent else "")
        obj.docstring.value = convert(obj.docstring.value, owner)
