"""A small, self-contained HTML report builder shared by ``posembed inspect`` and ``posembed lab report``.

Figures are saved as PNG files beside the report *and* embedded as base64 ``data:`` URIs, so the
HTML opens offline, alone, in any browser. Text is always escaped. Matplotlib is imported lazily
(with the non-interactive Agg backend) only when a figure is added.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> report = HtmlReport("Demo <1>")
    >>> report.heading("Numbers")
    >>> report.paragraph("a < b & c")
    >>> report.table([{"name": "phi(0)", "value": 384.0}])
    >>> path = report.write(folder / "report.html")
    >>> text = path.read_text()
    >>> "a &lt; b &amp; c" in text and "<td>384</td>" in text and "Demo &lt;1&gt;" in text
    True
    >>> report.section("Decay")
    '1. Decay'
    >>> report.paragraph("details")
    >>> report.finding("it decays")
    >>> report.html().index("it decays") < report.html().index("details")
    True
"""

from __future__ import annotations

import base64
import html
import io
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from posembed._utils.io import atomic_write_bytes, atomic_write_text

__all__ = ["HtmlReport", "format_cell", "new_figure", "too_small_banner"]

logger = logging.getLogger(__name__)


def too_small_banner(what: str, reasons: Sequence[str], instead: str) -> str:
    """The warning a report too small to conclude opens with, ``""`` when there is no reason.

    One wording for every report (the lab's smoke presets, ``extend-eval --quick``): what is too
    small, why, that no verdict is a finding, and the command that gives answers.

    >>> too_small_banner("run", ["it has one seed"],
    ...                  "`posembed lab run --preset quick` (7 seeds)")  # doctest: +NORMALIZE_WHITESPACE
    'This run is too small to conclude: it has one seed. No verdict below is a finding;
    run `posembed lab run --preset quick` (7 seeds) for answers.'
    >>> too_small_banner("run", [], "anything")
    ''
    """
    if not reasons:
        return ""
    return (
        f"This {what} is too small to conclude: " + "; ".join(reasons) + ". No verdict below is a finding; "
        f"run {instead} for answers."
    )


_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #bbb; margin-top: 2em; }
.table-wrap { overflow-x: auto; max-width: 100%; margin: 1em 0; }
table { border-collapse: collapse; font-size: .92em; }
p, li, figcaption { overflow-wrap: anywhere; }
p.finding { background: #eef5ee; border-left: 4px solid #3a7d44; padding: .35em .7em; }
p.finding.suspicious { background: #fbf1e4; border-left-color: #c77700; }
p.banner { background: #fdecea; border: 2px solid #b3261e; padding: .5em .8em; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: right; vertical-align: top;
         overflow-wrap: normal; word-break: normal; hyphens: manual; }
th { background: #f0f0f0; font-weight: 600; }
td:first-child, th:first-child, th.text { text-align: left; }
td.text { text-align: left; overflow-wrap: normal; word-break: normal; min-width: 6em; white-space: normal; }
ul.summary li { margin: .2em 0; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: .9em; color: #555; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; }
"""


def format_cell(value: Any) -> str:
    """Render one table cell: floats with 4 significant digits, ints and text as they are.

    >>> format_cell(373.7712), format_cell(384.0), format_cell(0.000123), format_cell(None)
    ('373.8', '384', '0.000123', '')
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:  # NaN
            return "nan"
        return f"{value:.4g}"
    return str(value)


def new_figure(width: float = 6.0, height: float = 4.0):
    """A matplotlib Figure on the Agg canvas (no pyplot state, no display needed; constrained layout)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _figure_png(figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(figure.canvas, FigureCanvasAgg):
        FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def inline(text: object) -> str:
    """``text`` escaped for HTML, each `backticked` span as ``<code>`` (the markdown twin's code).

    >>> inline("run `posembed lab run --preset full` <now>")
    'run <code>posembed lab run --preset full</code> &lt;now&gt;'
    """
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(str(text)))


class HtmlReport:
    """Build an HTML page from headings, paragraphs, tables and matplotlib figures.

    Args:
        title: page title and top heading (escaped).

    Figures are rendered to PNG immediately; :meth:`write` saves each as ``<name>.png`` beside
    the HTML file (atomically) and embeds the same bytes in the page.
    """

    def __init__(self, title: str) -> None:
        self.title = str(title)
        self._parts: list[str] = []
        self._images: dict[str, bytes] = {}
        self._sections = 0
        self._finding_at: int | None = None
        #: ``(heading text, anchor)`` of every :meth:`section`, in order
        self.section_anchors: list[tuple[str, str]] = []

    def heading(self, text: str, level: int = 2, anchor: str = "") -> None:
        """Add a heading ``<h{level}>`` (level 1..6), with ``id="anchor"`` when given (a :meth:`links` target)."""
        if not isinstance(level, int) or not 1 <= level <= 6:
            raise ValueError(f"heading level must be an int in 1..6, got {level!r}")
        ident = f' id="{html.escape(anchor)}"' if anchor else ""
        self._parts.append(f"<h{level}{ident}>{html.escape(str(text))}</h{level}>")

    def links(self, items: Sequence[tuple[str, str]], css: str = "summary", at: int | None = None) -> None:
        """Add a bulleted list of ``(text, anchor)`` items, each linking to ``#anchor`` (``""``: no link),
        at the end or at a :meth:`mark` taken earlier (a summary written once the sections are known).

        >>> report = HtmlReport("t"); report.links([("Q1: alike", "q1"), ("no link", "")])
        >>> '<li><a href="#q1">Q1: alike</a></li>' in report.html(), "<li>no link</li>" in report.html()
        (True, True)
        """
        entries = [
            f'<a href="#{html.escape(anchor)}">{inline(text)}</a>' if anchor else inline(text) for text, anchor in items
        ]
        self._insert(f'<ul class="{html.escape(css)}">' + "".join(f"<li>{e}</li>" for e in entries) + "</ul>", at)

    def banner(self, text: str) -> None:
        """Add a warning box (``<p class="banner">``), e.g. "this run is too small to conclude"."""
        self._parts.append(f'<p class="banner"><strong>Warning:</strong> {inline(text)}</p>')

    def section(self, title: str) -> str:
        """Add a numbered ``<h2 id="section-3">`` section heading ("3. title") and return it; findings
        go right under it, and :attr:`section_anchors` lists it for a summary's :meth:`links`."""
        self._sections += 1
        text = f"{self._sections}. {title}"
        self.heading(text, anchor=f"section-{self._sections}")
        self.section_anchors.append((text, f"section-{self._sections}"))
        self._finding_at = len(self._parts)
        return text

    def finding(self, text: str, suspicious: bool = False) -> None:
        """Open the current section with a one-line conclusion, even when computed after its tables.

        The line goes right under the last :meth:`section` heading (after any finding already there);
        ``suspicious`` marks a result to distrust (e.g. a probe worse than chance).
        """
        label = "Suspicious" if suspicious else "Finding"
        css = "finding suspicious" if suspicious else "finding"
        line = f'<p class="{css}"><strong>{label}:</strong> {html.escape(str(text))}</p>'
        where = len(self._parts) if self._finding_at is None else self._finding_at
        self._parts.insert(where, line)
        if self._finding_at is not None:
            self._finding_at += 1

    def mark(self) -> int:
        """Where the next part will go: pass it to :meth:`bullets` ``at=`` to fill a place later (a summary)."""
        return len(self._parts)

    def bullets(self, items: Sequence[str], at: int | None = None) -> None:
        """Add a bulleted list of plain-text items (escaped), at the end or at a :meth:`mark` taken earlier."""
        self._insert("<ul>" + "".join(f"<li>{html.escape(str(item))}</li>" for item in items) + "</ul>", at)

    def _insert(self, part: str, at: int | None) -> None:
        if at is None:
            self._parts.append(part)
            return
        if not 0 <= at <= len(self._parts):
            raise ValueError(f"mark {at} is outside the report's {len(self._parts)} parts")
        self._parts.insert(at, part)
        if self._finding_at is not None and self._finding_at >= at:
            self._finding_at += 1

    def paragraph(self, text: str) -> None:
        """Add a paragraph of plain text (escaped; `backticked` spans become ``<code>``)."""
        self._parts.append(f"<p>{inline(text)}</p>")

    def preformatted(self, text: str) -> None:
        """Add preformatted text (escaped), e.g. a command line."""
        self._parts.append(f"<pre>{html.escape(str(text))}</pre>")

    def table(self, rows: Sequence[Mapping[str, Any]] | Sequence[Any], header: Sequence[str] | None = None) -> None:
        """Add a table from a list of dicts (columns = union of keys, in first-seen order),
        or from ``header`` plus a list of row sequences.

        Column names are shown as words (``val_loss`` -> ``val loss``) and wrap between them;
        a column of words is left-aligned, header included; numbers stay right-aligned and
        wrap only at their spaces (``64.8`` / ``± 0.13``), never inside a word or a number.
        """
        header, body = _table_cells(rows, header)
        words = [_column_is_text(row[index] for row in body) for index in range(len(header))]
        head = "".join(
            f'<th class="text">{_header_text(name)}</th>' if text else f"<th>{_header_text(name)}</th>"
            for name, text in zip(header, words)
        )
        lines = ['<div class="table-wrap"><table>', f"<tr>{head}</tr>"]
        for row in body:
            lines.append("<tr>" + "".join(_cell(v) for v in row) + "</tr>")
        lines.append("</table></div>")
        self._parts.append("\n".join(lines))

    def figure(self, fig, name: str, caption: str = "") -> None:
        """Add a matplotlib Figure as ``<name>.png`` (embedded and saved beside the report)."""
        if not name or any(ch in name for ch in "/\\") or name.startswith("."):
            raise ValueError(f"figure name must be a plain file stem, got {name!r}")
        if name in self._images:
            raise ValueError(f"figure name {name!r} is used twice in this report")
        data = _figure_png(fig)
        self._images[name] = data
        encoded = base64.b64encode(data).decode("ascii")
        alt = html.escape(caption or name)
        self._parts.append(
            f'<figure id="fig-{html.escape(name)}"><img src="data:image/png;base64,{encoded}" alt="{alt}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )

    @property
    def image_names(self) -> list[str]:
        """Stems of the figures added so far, in order."""
        return list(self._images)

    def html(self) -> str:
        """The whole page as a string."""
        title = html.escape(self.title)
        body = "\n".join(self._parts)
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{title}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{title}</h1>\n{body}\n</body>\n</html>\n"
        )

    def write(self, path: str | os.PathLike) -> Path:
        """Write the page and its PNGs (atomically) and return the HTML file's path."""
        target = Path(path)
        for name, data in self._images.items():
            atomic_write_bytes(target.parent / f"{name}.png", data)
        atomic_write_text(target, self.html())
        logger.info("wrote %s (%d figures)", target, len(self._images))
        return target


def _is_text(value: Any) -> bool:
    """Whether a cell holds words (left-aligned, wrapped between words) rather than a number.

    >>> [_is_text(v) for v in ("does not reproduce", "0.61 [0.5, 0.7]", 3.5, "n/a", "1.2e-3")]
    [True, False, False, False, False]
    """
    if not isinstance(value, str):
        return False
    head = value.split(" ")[0].lstrip("+-−±")
    return not (head[:1].isdigit() or head[:1] == "." or value in ("n/a", "nan", ""))


def _header_text(name: str) -> str:
    """A column name as words: snake_case keys get spaces (so headers wrap between words).

    >>> _header_text("val_loss"), _header_text("ppl @ 2x"), _header_text("a<b")
    ('val loss', 'ppl @ 2x', 'a&lt;b')
    """
    text = str(name)
    if "_" in text and " " not in text:
        text = text.replace("_", " ")
    return html.escape(text)


def _column_is_text(cells) -> bool:
    """Whether a column holds words only (its header is then left-aligned like its cells)."""
    filled = [value for value in cells if format_cell(value) != ""]
    return bool(filled) and all(_is_text(value) for value in filled)


def _cell(value: Any) -> str:
    text = html.escape(format_cell(value))
    if not _is_text(value):
        # a number wraps only at its spaces, never inside it; "64.8 ± 0.13" keeps ± with its number
        return "<td>" + text.replace(" ± ", " ±&nbsp;") + "</td>"
    # a path or a snake_case name may wrap after its / and _ (never inside a word)
    return '<td class="text">' + text.replace("/", "/<wbr>").replace("_", "_<wbr>") + "</td>"


def _table_cells(rows: Sequence[Any], header: Sequence[str] | None) -> tuple[list[str], list[list[Any]]]:
    rows = list(rows)
    if header is not None:
        header = [str(h) for h in header]
        body = [list(row.values()) if isinstance(row, Mapping) else list(row) for row in rows]
        for row in body:
            if len(row) != len(header):
                raise ValueError(f"table row has {len(row)} cells but the header has {len(header)}: {row!r}")
        return header, body
    if not all(isinstance(row, Mapping) for row in rows):
        raise TypeError("table rows must all be dicts, or pass header= with sequences of cells")
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    return columns, [[row.get(key) for key in columns] for row in rows]
