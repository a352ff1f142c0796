"""Every sentence of the context report follows from its numbers (issue 35 item 5): the figures'
axes read as plain numbers at the measured lengths, published figures cite their papers and data
(not a file the package does not ship), exploratory text has no winner words, and each wording
threshold holds on either side."""

from __future__ import annotations

import re

import pytest

from posembed.lab.context.published import CLAIMS, PASSKEY_32K
from posembed.lab.context.store import NO_DEPTH
from posembed.lab.report.context import Results, context_page
from posembed.lab.report.context_results import FLAT, reference_note, reference_rows

BODY = {
    "name": "context",
    "context": 96,
    "finetune_scale": 2,
    "finetune_steps": 10,
    "references": ["alibi", "fire"],
    "dim": 64,
    "depth": 2,
    "steps": 2000,
    "passkey_only_steps": 800,
    "passkey_fraction": 0.5,
}


def _study(perplexity: dict[tuple[str, str], tuple[float, ...]], lengths=(96, 192, 384)) -> Results:
    rows = [
        {"model": m, "method": meth, "length": n, "metric": "perplexity", "depth": NO_DEPTH, "value": v, "seed": 0}
        for (m, meth), values in perplexity.items()
        for n, v in zip(lengths, values)
    ]
    rows += [
        {"model": m, "method": meth, "length": n, "metric": "passkey_mean", "depth": NO_DEPTH, "value": 0.0, "seed": 0}
        for (m, meth) in perplexity
        for n in lengths
    ]
    return Results(rows, BODY)


def _labels(ticks) -> list[str]:
    return [t.get_text() for t in ticks if t.get_text()]


def test_the_perplexity_plot_reads_plain_numbers_at_the_measured_lengths():
    from posembed.lab.report.context_plots import perplexity_figure

    # within one decade (17.9 to 19.6): matplotlib's default labels these "1.85 x 10^1"
    study = _study({("rope", "extrapolate"): (17.9, 18.5, 19.6), ("alibi", "none"): (18.0, 18.1, 18.3)})
    axes = perplexity_figure(study).axes[0]
    axes.figure.canvas.draw()
    assert _labels(axes.get_xticklabels()) == ["96", "192", "384"]
    assert not _labels(axes.get_xticklabels(minor=True))
    y = _labels(axes.get_yticklabels()) + _labels(axes.get_yticklabels(minor=True))
    assert y and all(re.fullmatch(r"\d+(\.\d+)?", label) for label in y), y  # no "\times", "^", "$"
    wide = _study({("rope", "extrapolate"): (6.0, 30.0, 200.0)})  # across decades: plain too
    axes = perplexity_figure(wide).axes[0]
    axes.figure.canvas.draw()
    y = _labels(axes.get_yticklabels()) + _labels(axes.get_yticklabels(minor=True))
    assert y and all(re.fullmatch(r"\d+(\.\d+)?", label) for label in y), y


def test_published_figures_cite_their_papers_and_data_not_a_file_the_package_lacks():
    import posembed.lab.context.published as published

    assert "REFERENCES.md" not in (published.__doc__ or "")
    for claim in CLAIMS:
        assert "REFERENCES.md" not in claim.checked + claim.source
        assert re.search(r"[A-Z][a-z]+ et al\. 20\d\d", claim.source), claim.source  # a paper by its authors, year
    assert "jquesnelle/yarn" in PASSKEY_32K["source"] and "arXiv 2309.00071" in PASSKEY_32K["source"]
    text = context_page(_study({("rope", "yarn"): (6.0, 7.0, 8.0), ("rope", "linear"): (6.0, 9.0, 12.0)})).markdown()
    assert "REFERENCES.md" not in text and "Peng et al. 2023 (YaRN, arXiv 2309.00071)" in text


@pytest.mark.parametrize(
    ("ratio", "word"),
    [
        (1.0 + FLAT - 1e-9, "flat (within 5%)"),
        (1.0 + FLAT + 1e-6, "rises"),
        (1.0 - FLAT + 1e-9, "flat (within 5%)"),
        (1.0 - FLAT - 1e-6, "falls"),
        (1.5 - 1e-9, "rises"),
        (1.5, "fails (>= 1.5x)"),
    ],
)
def test_a_reference_is_described_by_its_mean_ratio_on_either_side_of_each_threshold(ratio, word):
    study = _study({("alibi", "none"): (10.0, 10.0, 10.0 * ratio)})
    assert reference_rows(study)[0]["perplexity past L"] == word


def test_exploratory_text_has_no_winner_words_and_says_it_is_untested():
    study = _study(
        {
            ("rope", "yarn"): (6.0, 8.0, 12.0),
            ("rope", "linear"): (6.0, 20.0, 40.0),
            ("alibi", "none"): (7.0, 7.0, 7.0),
            ("fire", "none"): (6.5, 7.5, 9.0),
        }
    )
    note = reference_note(study, reference_rows(study))
    assert not re.search(r"\b(best|beats?|better|lowest|wins?|worse|leads?)\b", note, re.IGNORECASE), note
    assert note.startswith("Exploratory (means over the seeds, no test)")
    assert (
        "Mean perplexity at 4x: references 7 to 9; RoPE's methods without fine-tuning 12 to 40 (which of them "
        "differ is not tested here)." in note
    )
