"""The shared HTML builder's table layout and summary links (what every report gains).

The browser checks (tests/test_report_browser.py) measure the same in chromium at 1200 px; these
read the HTML, so they run everywhere.
"""

from __future__ import annotations

import re

import pytest

from posembed._utils.html import HtmlReport


def _page(build) -> str:
    report = HtmlReport("t")
    build(report)
    return report.html()


def test_column_names_are_words():
    page = _page(lambda r: r.table([{"val_loss": 1.5, "ppl @ 2x": 3.0, "max_len": 8}]))
    assert "<tr><th>val loss</th><th>ppl @ 2x</th><th>max len</th></tr>" in page


def test_a_column_of_words_is_left_aligned_header_included_a_mixed_one_is_not():
    page = _page(
        lambda r: r.table(
            [
                {"scheme": "rope", "verdict": "beats", "mixed": 1.0},
                {"scheme": "alibi", "verdict": "", "mixed": "n/a yet"},
            ]
        )
    )
    assert '<tr><th class="text">scheme</th><th class="text">verdict</th><th>mixed</th></tr>' in page
    assert re.search(r", th\.text \{ text-align: left; \}", page)


def test_cells_never_break_inside_a_word_or_a_number():
    page = _page(
        lambda r: r.table([{"source": "bob80333/investigating_extrapolation", "x": 0.5, "ppl": "64.83 ± 0.13"}])
    )
    style = page.split("<style>")[1].split("</style>")[0]
    cell_rules = " ".join(rule for rule in style.split("}") if re.search(r"(^|[\s,])(td|th)[\s.,:{]", rule))
    assert "anywhere" not in cell_rules and "break-all" not in cell_rules and "break-word" not in cell_rules
    assert "<td>64.83 ±&nbsp;0.13</td>" in page  # may wrap before the ±, never after it
    # a path or snake_case name may wrap after / and _ only
    assert '<td class="text">bob80333/<wbr>investigating_<wbr>extrapolation</td>' in page


def test_sections_have_anchors_and_a_summary_links_to_them_from_before():
    def build(report):
        report.heading("Summary", anchor="summary")
        at = report.mark()
        report.section("First")
        report.finding("one")
        report.section("Second")
        report.links([(f"{text}: verdict", anchor) for text, anchor in report.section_anchors], at=at)

    page = _page(build)
    assert '<h2 id="section-1">1. First</h2>' in page and '<h2 id="section-2">2. Second</h2>' in page
    links = '<ul class="summary"><li><a href="#section-1">1. First: verdict</a></li><li><a href="#section-2">'
    assert page.index('id="summary"') < page.index(links) < page.index('id="section-1"')


def test_links_at_a_bad_mark():
    report = HtmlReport("t")
    with pytest.raises(ValueError, match="mark 5 is outside the report's 0 parts"):
        report.links([("x", "")], at=5)
