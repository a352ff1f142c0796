"""HtmlReport: escaping, tables, figures saved beside the page and embedded; renders in chromium."""

from __future__ import annotations

import base64
import re

import pytest

from posembed._utils.html import HtmlReport, format_cell, new_figure
from tests.browser import render_images


def _figure(values):
    figure = new_figure(3, 2)
    axes = figure.add_subplot(1, 1, 1)
    axes.plot(values)
    return figure


def test_text_is_escaped():
    report = HtmlReport("<script>x</script>")
    report.heading("a<b", level=3)
    report.paragraph("<img src=x onerror=alert(1)>")
    page = report.html()
    assert "<script>x</script>" not in page
    assert "<h3>a&lt;b</h3>" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_table_from_dicts_and_from_header():
    report = HtmlReport("t")
    report.table([{"a": 1, "b": 0.123456}, {"a": 2, "c": "x"}])
    report.table([[1, 2.5]], header=["k", "v"])
    page = report.html()
    assert '<tr><th>a</th><th>b</th><th class="text">c</th></tr>' in page  # a column of words: header left too
    assert "<tr><td>1</td><td>0.1235</td><td></td></tr>" in page
    assert '<tr><td>2</td><td></td><td class="text">x</td></tr>' in page  # words: left-aligned, wrapped at spaces
    assert "<tr><th>k</th><th>v</th></tr>" in page and "<td>2.5</td>" in page


def test_text_cells_are_left_aligned_and_never_broken_mid_word():
    report = HtmlReport("t")
    report.table(
        [["does not reproduce (reversed)", "0.61 [0.5, 0.7]", 0.25, "n/a"]], header=["verdict", "ours", "x", "y"]
    )
    page = report.html()
    assert (
        '<td class="text">does not reproduce (reversed)</td><td>0.61 [0.5, 0.7]</td><td>0.25</td><td>n/a</td>' in page
    )
    assert "td.text { text-align: left; overflow-wrap: normal; word-break: normal;" in page


def test_table_bad_input():
    report = HtmlReport("t")
    with pytest.raises(ValueError, match="2 cells but the header has 3"):
        report.table([[1, 2]], header=["a", "b", "c"])
    with pytest.raises(TypeError, match="must all be dicts"):
        report.table([[1, 2]])
    with pytest.raises(ValueError, match="level"):
        report.heading("x", level=7)


def test_figure_is_saved_and_embedded(tmp_path):
    report = HtmlReport("figs")
    report.figure(_figure([0, 1, 4]), "curve", "a curve")
    with pytest.raises(ValueError, match="used twice"):
        report.figure(_figure([1]), "curve")
    with pytest.raises(ValueError, match="plain file stem"):
        report.figure(_figure([1]), "../evil")
    path = report.write(tmp_path / "out" / "report.html")
    png = (tmp_path / "out" / "curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    embedded = re.search(r'src="data:image/png;base64,([^"]+)"', path.read_text()).group(1)
    assert base64.b64decode(embedded) == png
    assert report.image_names == ["curve"]
    assert not list((tmp_path / "out").glob(".*.tmp"))


def test_sections_are_numbered_and_open_with_their_finding():
    report = HtmlReport("t")
    mark = report.mark()
    assert report.section("First") == "1. First"
    report.paragraph("how it was measured")
    report.table([{"a": 1}])
    report.finding("computed after the table, shown first")
    report.finding("a probe worse than chance", suspicious=True)
    assert report.section("Second") == "2. Second"
    report.bullets(["summary line"], at=mark)
    page = report.html()
    order = ["summary line", '<h2 id="section-1">1. First</h2>', "computed after the table", "worse than chance",
             "how it was measured", '<h2 id="section-2">2. Second</h2>']  # fmt: skip
    assert [page.index(text) for text in order] == sorted(page.index(text) for text in order)
    assert '<p class="finding suspicious"><strong>Suspicious:</strong> a probe worse than chance</p>' in page
    with pytest.raises(ValueError, match="outside"):
        report.bullets(["x"], at=99)


def test_every_table_sits_in_a_sideways_scrolling_wrapper():
    report = HtmlReport("t")
    report.table([{f"c{i}": i for i in range(50)}])
    page = report.html()
    assert page.count('<div class="table-wrap"><table>') == page.count("<table>") == 1
    assert re.search(r"\.table-wrap \{[^}]*overflow-x: auto", page)
    assert "overflow-wrap: anywhere" in page  # long words wrap instead of widening the page


def test_format_cell():
    assert format_cell(True) == "yes"
    assert format_cell(float("nan")) == "nan"
    assert format_cell(12) == "12"


@pytest.mark.browser
def test_report_renders_in_chromium(tmp_path):
    report = HtmlReport("browser")
    report.figure(_figure([0, 1]), "one", "first")
    report.figure(_figure([1, 0]), "two", "second")
    result = render_images(report.write(tmp_path / "r.html"))
    assert result.count == 2
    assert result.all_loaded


@pytest.mark.browser
def test_probe_detects_a_broken_image(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img src="data:image/png;base64,AAAA"></body></html>')
    result = render_images(page)
    assert result.count == 1
    assert not result.all_loaded
