"""tools/pages.py: read, replace and check a page's generated blocks."""

from __future__ import annotations

import pytest

from tools import pages

PAGE = (
    "top\n<!-- generated:a -->\nold a\n<!-- /generated:a -->\nmiddle <!-- generated:b -->1.5<!-- /generated:b --> end\n"
)


def test_read_replace_check_and_names():
    assert pages.block_names(PAGE) == ["a", "b"]
    assert pages.read_block(PAGE, "a") == "\nold a\n" and pages.read_block(PAGE, "b") == "1.5"
    new = pages.replace_block(PAGE, "b", "1.498")
    assert new == PAGE.replace(">1.5<", ">1.498<")
    assert pages.check_block(new, "b", "1.498") == []
    (message,) = pages.check_block(PAGE, "a", "\nnew a\n")
    assert "block a differs" in message and "-old a" in message and "+new a" in message


def test_write_block_changes_only_the_block(tmp_path):
    path = tmp_path / "page.md"
    path.write_text(PAGE, encoding="utf-8")
    assert pages.write_block(path, "a", "\nnew a\n") is True
    assert path.read_text(encoding="utf-8") == PAGE.replace("old a", "new a")
    assert pages.write_block(path, "a", "\nnew a\n") is False


@pytest.mark.parametrize(
    "page, name, message",
    [
        (PAGE, "c", "holds <!-- generated:c --> 0 times"),
        (PAGE + "<!-- generated:a -->", "a", "1 times|2 times"),
        ("<!-- generated:a --> no end", "a", "needs exactly one"),
        ("<!-- /generated:a --> <!-- generated:a -->", "a", "needs exactly one"),
        (PAGE, "bad name", "a block name is"),
    ],
)
def test_bad_pages_and_names_are_refused(page, name, message):
    with pytest.raises(ValueError, match=message):
        pages.read_block(page, name)


def test_the_command_line_shows_a_block(tmp_path, capsys):
    path = tmp_path / "page.md"
    path.write_text(PAGE, encoding="utf-8")
    assert pages.main(["show", str(path), "b"]) == 0
    assert capsys.readouterr().out == "1.5"
    pages.main(["names", str(path)])
    assert capsys.readouterr().out == "a\nb\n"
