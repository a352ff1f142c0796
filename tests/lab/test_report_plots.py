"""Lab report figures: faceted by scheme family, at most six lines a panel, legends outside the data."""

from __future__ import annotations

from types import SimpleNamespace as S

import pytest

from posembed.lab.report.plots import MAX_LINES, facets, length_figure, loss_figure, scheme_family

SCHEMES = ("learned", "sinusoidal", "rope", "rope_yarn", "rope_ntk", "rope_linear", "rope_llama3", "xpos",
           "rope_dynamic_ntk", "alibi", "t5_bias", "nope")  # fmt: skip


class _Data:
    """What the figures read of a LabData: ``groups(task)``."""

    def __init__(self, groups):
        self._groups = groups

    def groups(self, task=None):
        return self._groups


def _trial(scale: float):
    evals = [S(metric="accuracy", length=n, value=1 / (1 + scale * n), note="") for n in (4, 8, 16)]
    return S(config=S(context=4), evals=evals, curve=[(1, 2.0 * scale), (2, 1.0 * scale)])


@pytest.fixture()
def data():
    keys = [("copy", scheme, "base") for scheme in SCHEMES]
    return _Data({key: [_trial(i + 1.0)] for i, key in enumerate(keys)})


def test_families_and_panels():
    assert [scheme_family(s) for s in ("learned", "rope_yarn", "t5_bias", "nope", "mystery")] == [
        "absolute", "rotary", "bias", "NoPE", "other"]  # fmt: skip
    panels = facets([("copy", s, "base") for s in SCHEMES])
    assert [(title, len(keys)) for title, keys in panels] == [
        ("absolute", 2),
        ("rotary (1/2)", 4),
        ("rotary (2/2)", 3),
        ("bias + NoPE", 3),
    ]


def test_no_panel_holds_a_lonely_curve():
    """The quick preset's groups: 7 absolute lines were 6 + 1 ("absolute (2/2)" with one curve)."""
    absolute = [("copy", s, v) for s in ("learned", "sinusoidal") for v in ("base", "concat", "every_layer", "frozen")][
        :7
    ]
    keys = absolute + [
        ("copy", "rope", "base"),
        ("copy", "alibi", "base"),
        ("copy", "t5_bias", "base"),
        ("copy", "t5_bias", "frozen"),
        ("copy", "nope", "base"),
    ]
    panels = facets(keys)
    assert [(title, len(members)) for title, members in panels] == [
        ("absolute (1/2)", 4),
        ("absolute (2/2)", 3),
        ("rotary + bias + NoPE", 5),
    ]
    assert [k for _, members in panels for k in members] == keys  # every line once, in order
    # a lonely line between two full panels borrows one from the neighbour it would join (the next, on a tie)
    full = (
        [("copy", "learned", f"v{i}") for i in range(6)]
        + [("copy", "rope", "base")]
        + [("copy", "alibi", f"v{i}") for i in range(6)]
    )
    borrowed = facets(full)
    assert [(title, len(members)) for title, members in borrowed] == [
        ("absolute", 6),
        ("rotary + bias", 2),
        ("bias", 5),
    ]
    assert facets([("copy", "rope", "base")]) == [("rotary", [("copy", "rope", "base")])]


@pytest.mark.parametrize("draw", ["length", "loss"])
def test_at_most_six_lines_a_panel_and_legends_outside(data, draw):
    figure = length_figure(data, "copy", "accuracy") if draw == "length" else loss_figure(data, "copy")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    panels = [axes for axes in figure.axes if axes.get_legend() is not None]
    assert len(panels) == 4
    for axes in panels:
        # the dotted training-length marker (2 points) is not a data line; curves have 3 (length) or 2 (loss) points
        data_lines = [line for line in axes.lines if line.get_linestyle() != ":"]
        assert 2 <= len(data_lines) <= MAX_LINES
        legend = axes.get_legend().get_window_extent(renderer)
        assert legend.x0 >= axes.get_window_extent(renderer).x1  # to the right of the data, not over it
