"""Figures of the documentation's Questions pages, made from real weights and exact formulas.

The figures reuse the inspector's drawing code (:mod:`posembed.analysis.plots`,
:mod:`posembed.analysis.scheme_plots`) where a figure exists; this module adds the ones that did
not (the embedding lookup as a one-hot product, the sinusoidal table beside its closeness curve,
a learned and a sinusoidal similarity side by side, a sentence pair's three input parts, attention
shares under add and concatenate, what each RoPE scaling does to each frequency, T5's buckets)
and the house style every docs figure is drawn in:

- :func:`docs_style`: a colour-blind-safe cycle (matplotlib's ``tableau-colorblind10``) and
  fonts that stay legible when a figure is shown 750-960 px wide;
- :func:`svg_text`: a deterministic SVG (``svg.hashsalt`` fixed, no date in the metadata), so a
  stored figure can be compared with its regeneration byte for byte;
- :func:`readability_problems`: what a figure lacks (a title, an axis label, a legend where an
  axes has more than one labelled line), checked by the tests for every docs figure.

Every function returns a matplotlib ``Figure`` on the Agg canvas (no pyplot state).

The same drawing saves to the same bytes: draw the figure afresh for each comparison (a figure
saved twice may differ in its second save, as constrained layout moves on a redraw).

Example:
    >>> import torch
    >>> table = torch.nn.Embedding(6, 4)
    >>> def drawn():
    ...     with docs_style():
    ...         return svg_text(lookup_figure(table, torch.tensor([3, 1, 3])))
    >>> drawn() == drawn()
    True
    >>> with docs_style():
    ...     readability_problems(lookup_figure(table, torch.tensor([3, 1, 3])))
    []
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch

from posembed._utils.html import new_figure

__all__ = [
    "COLUMN_INCHES",
    "MIN_FONT",
    "STYLE",
    "add_concat_figure",
    "docs_style",
    "fit_column",
    "legible",
    "lookup_figure",
    "pair_parts_figure",
    "readability_problems",
    "scaling_figure",
    "similarity_pair_figure",
    "sinusoidal_figure",
    "svg_text",
    "t5_bucket_figure",
]  # fmt: skip

#: matplotlib's colour-blind-safe style (Tableau's colour-blind 10 colours as the cycle)
STYLE = "tableau-colorblind10"
#: the smallest font size (points) a docs figure keeps after :func:`legible`
MIN_FONT = 10.0
#: the salt of SVG element ids: fixed, so the same figure gives the same bytes
HASH_SALT = "posembed-docs"


@contextlib.contextmanager
def docs_style() -> Iterator[None]:
    """Draw figures made inside the block in the docs' style (colour-blind cycle, fonts, fixed SVG ids)."""
    import matplotlib
    import matplotlib.style

    with matplotlib.style.context(STYLE), matplotlib.rc_context({
        "svg.hashsalt": HASH_SALT, "font.size": 11.0, "axes.titlesize": 12.0, "axes.labelsize": 11.0,
        "legend.fontsize": 10.0, "xtick.labelsize": 10.0, "ytick.labelsize": 10.0, "image.cmap": "viridis",
    }):  # fmt: skip
        yield


def legible(figure, minimum: float = MIN_FONT):
    """Raise every text of ``figure`` smaller than ``minimum`` points to ``minimum``; returns the figure.

    The inspector's figures set 7-9 pt labels for a report read at full size; shown in a docs column
    they need more.
    """
    from matplotlib.text import Text

    if not (isinstance(minimum, (int, float)) and math.isfinite(minimum) and minimum > 0):
        raise ValueError(f"minimum must be a font size > 0 points, got {minimum!r}")
    for text in figure.findobj(Text):
        if text.get_text() and text.get_fontsize() < minimum:
            text.set_fontsize(minimum)
    return figure


#: the widest a docs figure is drawn (inches): shown in a 750-px column, its points stay points
COLUMN_INCHES = 8.5


def fit_column(figure, width: float = COLUMN_INCHES):
    """Narrow a wider figure to ``width`` inches (its height kept), so its text is not shrunk on screen;
    returns the figure. The inspector draws some figures 11-13 inches wide for a full-width report."""
    if not (isinstance(width, (int, float)) and math.isfinite(width) and width > 0):
        raise ValueError(f"width must be a number of inches > 0, got {width!r}")
    current, height = figure.get_size_inches()
    if current > width:
        figure.set_size_inches(width, height)
    return figure


def svg_text(figure) -> str:
    """The figure as SVG text, the same bytes for the same figure (run under :func:`docs_style`, or any
    ``svg.hashsalt``: without a salt matplotlib draws random ids)."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": matplotlib.rcParams["svg.hashsalt"] or HASH_SALT}):
        figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.05)
    return buffer.getvalue()


def _is_colorbar(axes) -> bool:
    return hasattr(axes, "_colorbar") or axes.get_label() == "<colorbar>"


def readability_problems(figure) -> list[str]:
    """What a docs figure lacks: a title (an axes title or the figure's), a label on each axis of each
    data panel (a colour bar needs none), a legend on a panel with more than one labelled line.

    An axes with its ticks labelled in words counts as labelled on that side.
    """
    problems = []
    panels = [axes for axes in figure.axes if not _is_colorbar(axes) and axes.get_visible()]
    if not panels:
        return ["no panel"]
    suptitle = figure._suptitle.get_text() if figure._suptitle is not None else ""
    if not suptitle and not any(axes.get_title() or axes.get_title(loc="left") for axes in panels):
        problems.append("no title")
    for index, axes in enumerate(panels):
        if not axes.axison:
            continue
        for side, label, ticks in (("x", axes.get_xlabel(), axes.get_xticklabels()),
                                   ("y", axes.get_ylabel(), axes.get_yticklabels())):  # fmt: skip
            worded = any(any(c.isalpha() for c in t.get_text()) for t in ticks)
            shared = _shares_label(panels, axes, side)
            if not label and not worded and not shared:
                problems.append(f"panel {index}: no {side} label")
        lines = [line for line in axes.get_lines() if line.get_label() and not line.get_label().startswith("_")]
        if len(lines) > 1 and axes.get_legend() is None and figure.legends == []:
            problems.append(f"panel {index}: {len(lines)} lines and no legend")
    return problems


def _shares_label(panels, axes, side: str) -> bool:
    """Whether another panel in the same column (x) or row (y) of a grid labels this side for it."""
    spec = axes.get_subplotspec()
    if spec is None:
        return False
    for other in panels:
        other_spec = other.get_subplotspec()
        if other is axes or other_spec is None:
            continue
        if side == "x" and other_spec.colspan == spec.colspan and other.get_xlabel():
            return True
        if side == "y" and other_spec.rowspan == spec.rowspan and other.get_ylabel():
            return True
    return False


def lookup_figure(embedding: torch.nn.Embedding, ids: torch.Tensor):
    """``one_hot(ids) @ weight`` beside ``embedding(ids)``: the same rows (an embedding is a lookup).

    Shape:
        ids ``(N,)`` of ints below ``embedding.num_embeddings``.
    """
    if ids.dim() != 1 or ids.numel() == 0:
        raise ValueError(f"ids must be a non-empty 1-D tensor, got shape {tuple(ids.shape)}")
    if int(ids.min()) < 0 or int(ids.max()) >= embedding.num_embeddings:
        raise ValueError(f"ids must lie in [0, {embedding.num_embeddings}), got {ids.tolist()}")
    with torch.no_grad():
        weight = embedding.weight.detach().double()
        one_hot = torch.nn.functional.one_hot(ids, embedding.num_embeddings).double()
        product, looked_up = one_hot @ weight, embedding(ids).double()
    limit = float(weight.abs().max())
    figure = new_figure(10, 3.6)
    panels = (
        (
            one_hot.numpy(),
            f"one_hot(ids)  ({len(ids)} x {embedding.num_embeddings})",
            "row of the table (id)",
            "token",
            "Greys",
            0.0,
            1.0,
        ),
        (
            weight.numpy(),
            f"weight  ({embedding.num_embeddings} x {embedding.embedding_dim})",
            "dimension",
            "id",
            "RdBu_r",
            -limit,
            limit,
        ),
        (product.numpy(), "one_hot @ weight = embedding(ids)", "dimension", "token", "RdBu_r", -limit, limit),
    )
    for index, (matrix, title, xlabel, ylabel, cmap, low, high) in enumerate(panels):
        axes = figure.add_subplot(1, 3, index + 1)
        image = axes.imshow(matrix, cmap=cmap, vmin=low, vmax=high, aspect="auto", interpolation="nearest")
        axes.set_title(title, fontsize=11)
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        axes.set_yticks(range(matrix.shape[0]))
        if index == 0:
            axes.set_yticks(range(len(ids)), [f"id {i}" for i in ids.tolist()])
    figure.colorbar(image, ax=figure.axes[1:], fraction=0.05, pad=0.02, label="value")
    same = torch.equal(product, looked_up)
    figure.suptitle(f"An embedding is a row lookup: one-hot product equal to the lookup: {same}", fontsize=12)
    return figure


def sinusoidal_figure(table: np.ndarray, curves: Mapping[str, np.ndarray]):
    """The sinusoidal table as a heatmap (positions x dimensions) beside ``phi(k) / phi(0)`` against
    the offset ``k``, one line per width (``curves``: label -> phi over k = 0, 1, ...)."""
    figure = new_figure(11, 4.2)
    axes = figure.add_subplot(1, 2, 1)
    image = axes.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04, label="PE(pos, i)")
    axes.set_xlabel("dimension i (sin, cos interleaved)")
    axes.set_ylabel("position pos")
    axes.set_title(f"sinusoidal table, d = {table.shape[1]}")
    axes = figure.add_subplot(1, 2, 2)
    styles = ("-", "--", "-.", ":")
    for index, (label, phi) in enumerate(curves.items()):
        axes.plot(np.arange(len(phi)), phi / phi[0], styles[index % len(styles)], lw=1.5, label=label)
    axes.axhline(0, color="0.6", lw=0.8)
    axes.set_xlabel("offset k (positions)")
    axes.set_ylabel("PE(x) · PE(x+k) / PE(x) · PE(x)")
    axes.set_title("dot product against distance")
    axes.grid(alpha=0.3)
    axes.legend(title="width d")
    return figure


def similarity_pair_figure(left: np.ndarray, right: np.ndarray, left_title: str, right_title: str):
    """Two position-by-position cosine similarity heatmaps on one colour scale (-1 to 1)."""
    figure = new_figure(11, 4.8)
    for index, (matrix, title) in enumerate(((left, left_title), (right, right_title))):
        axes = figure.add_subplot(1, 2, index + 1)
        image = axes.imshow(matrix, cmap="RdBu_r", vmin=-1, vmax=1, aspect="equal", interpolation="nearest")
        axes.set_title(title)
        axes.set_xlabel("position j")
        axes.set_ylabel("position i")
    figure.colorbar(image, ax=figure.axes, fraction=0.03, pad=0.02, label="cosine(p_i, p_j)")
    return figure


def pair_parts_figure(tokens: Sequence[str], parts: Mapping[str, np.ndarray], boundary: int):
    """Norm of each part of a sentence pair's input per token (``parts``: name -> ``(T,)`` norms),
    the second segment shaded from ``boundary`` on."""
    count = len(tokens)
    if any(len(v) != count for v in parts.values()):
        raise ValueError(f"every part needs one norm per token ({count}), got {[len(v) for v in parts.values()]}")
    figure = new_figure(11, 4.2)
    axes = figure.add_subplot(1, 1, 1)
    axes.axvspan(boundary - 0.5, count - 0.5, color="0.92", label="segment 1 (token_type_id 1)")
    styles = ("o-", "s--", "^-.", "d:")
    for index, (name, values) in enumerate(parts.items()):
        axes.plot(range(count), values, styles[index % len(styles)], ms=4, lw=1.3, label=name)
    axes.set_xticks(range(count), tokens, rotation=60, ha="right")
    axes.set_xlim(-0.5, count - 0.5)
    axes.set_xlabel("token of the pair, as the tokenizer splits it")
    axes.set_ylabel("L2 norm of the vector")
    axes.set_title("what each token's input is made of: token + position + segment rows")
    axes.grid(alpha=0.3, axis="y")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return figure


def add_concat_figure(shares: Mapping[str, float]):
    """Each term's share of the first-layer logits when word and position are added (measured) and when
    they are concatenated with separate projections (TUPE: the mixed terms are zero by construction,
    the pure ones as measured)."""
    names = list(shares)
    mixed = {"word-position", "position-word"}
    if set(names) != {"word-word", "word-position", "position-word", "position-position"}:
        raise ValueError(
            f"shares needs the four terms word-word, word-position, position-word, position-position, got {names}"
        )
    pure = sum(v for k, v in shares.items() if k not in mixed)
    concat = {k: (0.0 if k in mixed else v / pure if pure > 0 else 0.0) for k, v in shares.items()}
    figure = new_figure(9, 3.8)
    axes = figure.add_subplot(1, 1, 1)
    x = np.arange(len(names))
    axes.bar(x - 0.2, [shares[k] for k in names], width=0.4, label="add: w + p (measured)")
    axes.bar(x + 0.2, [concat[k] for k in names], width=0.4, hatch="//", label="concatenate: [w | p] (TUPE)")
    axes.set_xticks(x, names)
    axes.set_ylabel("share of mean |logit term|")
    axes.set_xlabel("term of q · k")
    axes.set_ylim(0, 1)
    axes.set_title("first-layer attention logits, split into four terms")
    axes.legend()
    axes.grid(alpha=0.3, axis="y")
    return figure


def scaling_figure(plain: np.ndarray, used: Mapping[str, np.ndarray], trained: int, target: int):
    """What each RoPE scaling does to each frequency pair: the wavelength it uses (log) and the factor
    it divides the pair's frequency by (1: kept, the scale factor: interpolated)."""
    if any(v.shape != plain.shape for v in used.values()):
        raise ValueError(f"every method needs {plain.shape[0]} frequencies, got {[v.shape for v in used.values()]}")
    figure = new_figure(11, 4.4)
    pairs = np.arange(len(plain))
    markers = ("o", "s", "^", "v", "D", "P")
    left = figure.add_subplot(1, 2, 1)
    right = figure.add_subplot(1, 2, 2)
    left.semilogy(pairs, 2 * np.pi / plain, color="0.3", lw=2.0, label="plain RoPE")
    for index, (name, inv_freq) in enumerate(used.items()):
        marker = markers[index % len(markers)]
        left.semilogy(pairs, 2 * np.pi / inv_freq, marker=marker, ms=3, lw=1.0, markevery=4, label=name)
        right.plot(pairs, plain / inv_freq, marker=marker, ms=3, lw=1.0, markevery=4, label=name)
    for axes in (left,):
        axes.axhline(trained, color="0.3", ls=":", lw=1, label=f"trained context L = {trained}")
        axes.axhline(target, color="0.3", ls="--", lw=1, label=f"target {target}")
    left.set_xlabel("frequency pair i (0 = fastest)")
    left.set_ylabel("wavelength 2π/θ_i (positions)")
    left.set_title("wavelength each method uses")
    right.set_xlabel("frequency pair i (0 = fastest)")
    right.set_ylabel("θ_plain / θ_used (1 = kept)")
    right.set_title("how much each pair is slowed")
    for axes in (left, right):
        axes.grid(alpha=0.3, which="both")
    figure.legend(*left.get_legend_handles_labels(), loc="outside lower center", ncol=4)  # one legend, off the data
    return figure


def t5_bucket_figure(distances: np.ndarray, buckets: Mapping[str, np.ndarray], num_buckets: int, max_distance: int):
    """T5's bucket of each relative distance (key minus query), one line per setting: exact buckets
    near 0, logarithmic ones up to ``max_distance``, one bucket for everything beyond."""
    figure = new_figure(9, 3.8)
    axes = figure.add_subplot(1, 1, 1)
    styles = ("-", "--")
    for index, (label, values) in enumerate(buckets.items()):
        axes.step(distances, values, styles[index % 2], where="mid", lw=1.5, label=label)
    for sign in (-1, 1):
        axes.axvline(sign * max_distance, color="0.5", ls=":", lw=1)
    axes.axvline(max_distance, color="0.5", ls=":", lw=1, label=f"max_distance = {max_distance}")
    axes.set_xlabel("relative position j − i (positions)")
    axes.set_ylabel(f"bucket (of {num_buckets})")
    axes.set_title("T5 relative bias: one learned scalar per bucket and head")
    axes.grid(alpha=0.3)
    axes.legend()
    return figure
