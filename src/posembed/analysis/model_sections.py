"""The model sections of the inspector report: the model on real text, attention logits, segment vectors.

Each ``section_*`` function adds to the :class:`~posembed._utils.html.HtmlReport` and returns its metrics.

Example:
    >>> import numpy as np
    >>> from posembed._utils.html import HtmlReport
    >>> found = section_segments(HtmlReport("t"), np.ones((2, 4)), np.ones((8, 4)), 2 * np.ones((10, 4)))
    >>> found["segment_norms"], found["segment_to_position_ratio"], found["segment_to_token_ratio"]
    ([2.0, 2.0], 1.0, 0.5)
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from posembed._utils.html import HtmlReport
from posembed.analysis import findings, plots
from posembed.analysis.decomposition import TERMS, add_or_concat, four_terms, layernorm_split, term_shares
from posembed.analysis.probes import layer_probes
from posembed.analysis.sources import FirstLayer
from posembed.analysis.text_model import TextModel, make_windows

__all__ = ["text_windows", "section_layers", "section_decomposition", "section_segments", "decompose_windows"]

logger = logging.getLogger(__name__)


def text_windows(model: TextModel, text: str, length: int, limit: int) -> torch.Tensor:
    """Token id windows ``(B, T)`` of the text with the model's special tokens, ``T <= model.max_length``."""
    length = min(length, model.max_length)
    return make_windows(model.encode(text), length, model.prefix, model.suffix, limit=limit)


def _probe_data(
    states: list[torch.Tensor], skip_first: int, skip_last: int
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    batch, length, _ = states[0].shape
    keep = torch.arange(skip_first, length - skip_last)  # text tokens only, not [CLS]/[SEP]
    positions = keep.repeat(batch).numpy()
    groups = torch.arange(batch).repeat_interleave(len(keep)).numpy()
    flat = [h[:, keep].reshape(-1, h.shape[-1]).double().numpy() for h in states]  # (B*T', C)
    return flat, positions, groups


def section_layers(
    report: HtmlReport, model: TextModel, windows: torch.Tensor, hidden_units: int, max_iter: int, nope: bool = False
) -> dict:
    """A 2-layer MLP probe of absolute position on every layer's hidden states (``nope``: say whether the
    model learned position without any positional encoding)."""
    report.section("Position through depth")
    logger.info("running the model on %d windows of %d tokens", *windows.shape)
    states = model.hidden_states(windows)
    flat, positions, groups = _probe_data(states, len(model.prefix), len(model.suffix))
    report.paragraph(
        f"The model reads {windows.shape[0]} consecutive windows of {windows.shape[1]} tokens of real text "
        f"(the checkpoint's own tokenizer, special tokens included). For every layer (0 = embedding output), a "
        f"2-layer ReLU MLP (scikit-learn MLPClassifier, {hidden_units} hidden units, {max_iter} epochs, "
        "standardised inputs; Haviv et al. 2022) classifies each text token's position from its hidden state "
        f"({len(positions)} tokens; special tokens excluded). Whole windows are held out (20%); the score is the mean "
        "|predicted - true position| on them, next to the error of always predicting the median position."
    )
    results = layer_probes(flat, positions, groups, hidden_units=hidden_units, max_iter=max_iter)
    rows = [{"layer": i, "error": r.score, "chance": r.chance} for i, r in enumerate(results)]
    report.table(rows)
    report.figure(
        plots.layer_probe_figure([r.score for r in results], [r.chance for r in results]),
        "layer_probe",
        "per-layer probe error",
    )
    finding, suspicious = findings.layers_finding(rows, nope=nope)
    report.finding(finding + ".", suspicious)
    return {
        "windows": int(windows.shape[0]),
        "window_length": int(windows.shape[1]),
        "tokens": int(len(positions)),
        "per_layer": rows,
        "finding": finding + ".",
        "suspicious": suspicious,
    }


def decompose_windows(
    windows: torch.Tensor,
    token_table: np.ndarray,
    position_table: np.ndarray,
    segment_table: np.ndarray | None,
    layer: FirstLayer,
    device: torch.device | None = None,
) -> dict[str, torch.Tensor]:
    """The four first-layer logit terms for windows of token ids (segment 0, positions 0..T-1),
    computed on ``device`` (default: the CPU) and returned on the CPU.

    Shape:
        windows ``(B, T)`` -> each term ``(B, H, T, T)``.
    """
    device = torch.device("cpu" if device is None else device)
    length = windows.shape[1]
    if length > position_table.shape[0]:
        raise ValueError(f"window length {length} exceeds the {position_table.shape[0]} positions of the table")
    words = torch.from_numpy(token_table)[windows]  # (B, T, C)
    if segment_table is not None:
        words = words + torch.from_numpy(segment_table[0])
    words = words.to(device)
    positions = torch.from_numpy(position_table[:length]).to(device).expand_as(words)
    layer = layer.to(device)
    word, where = layernorm_split(words, positions, layer.ln_weight, layer.ln_bias, layer.ln_eps)
    terms = four_terms(word, where, layer.wq, layer.bq, layer.wk, layer.bk, layer.num_heads)
    return {name: term.cpu() for name, term in terms.items()}


def section_decomposition(report: HtmlReport, windows: torch.Tensor, source) -> dict:
    """TUPE's four-term split of the first layer's attention logits."""
    report.section("Four-term decomposition of first-layer attention (Ke et al., TUPE)")
    layer: FirstLayer = source.first_layer
    terms = decompose_windows(windows, source.token_table, source.position_table, source.segment_table, layer,
                              source.device)  # fmt: skip
    shares = term_shares(terms)
    report.paragraph(
        "The first layer's logits ((w_i + p_i)W^Q + b^Q)((w_j + p_j)W^K + b^K)^T / sqrt(D) are split into "
        "word-word, word-position, position-word and position-position terms. " + layer.where + ": with the "
        "per-token mean and deviation of the real sum fixed, LayerNorm is linear, so LN(w + s + p) = "
        "g(w + s - mean)/sd + b  +  g(p - mean)/sd exactly; the segment vector (segment 0), the LayerNorm shift and "
        "the projection biases count as 'word'. The four terms add up to the real logits. Share = mean |term| "
        f"over {windows.shape[0]} windows of {windows.shape[1]} tokens and all {layer.num_heads} heads, divided by "
        "the sum of the four. Heatmaps: the first window, averaged over heads."
    )
    report.table(
        [{"term": name, "share": shares[name], "mean |term|": float(terms[name].abs().mean())} for name in TERMS]
    )
    first = {name: term[0].mean(dim=0).numpy() for name, term in terms.items()}
    report.figure(
        plots.decomposition_figure(first, shares),
        "decomposition",
        "four terms of the first-layer logits (first window, mean over heads)",
    )
    verdict, answer = add_or_concat(shares)
    report.paragraph(answer)
    finding, suspicious = findings.decomposition_finding(shares, verdict)
    report.finding(finding + ".", suspicious)
    return {
        "finding": finding + ".",
        "shares": shares,
        "mixed_share": shares["word-position"] + shares["position-word"],
        "add_vs_concat": verdict,
        "windows": int(windows.shape[0]),
        "window_length": int(windows.shape[1]),
        "layernorm": layer.where,
    }


def section_segments(
    report: HtmlReport, segment_table: np.ndarray, position_table: np.ndarray | None, token_table: np.ndarray
) -> dict:
    """Segment (token type) vector norms and their size relative to positions and tokens."""
    report.section("Segment (token type) embeddings")
    norms = np.linalg.norm(segment_table, axis=1)
    token_norm = float(np.linalg.norm(token_table, axis=1).mean())
    position_norm = float(np.linalg.norm(position_table, axis=1).mean()) if position_table is not None else None
    metrics = {
        "segment_norms": [float(v) for v in norms],
        "position_norm_mean": position_norm,
        "token_norm_mean": token_norm,
        "segment_to_position_ratio": None if position_norm is None else float(norms.mean() / position_norm),
        "segment_to_token_ratio": float(norms.mean() / token_norm),
        "segment_difference_norm": float(np.linalg.norm(segment_table[0] - segment_table[-1])),
    }
    report.paragraph(
        f"{len(norms)} segment vectors. Ratios use the mean segment norm over the mean L2 norm of the position "
        "rows and of all token rows; 'segment difference' is ||s_0 - s_last||, "
        "what actually tells the two segments apart."
    )
    report.table([metrics | {"segment_norms": ", ".join(f"{v:.4g}" for v in norms)}])
    report.figure(
        plots.segments_figure(norms, position_norm or 0.0, token_norm),
        "segments",
        "segment, position and token vector norms",
    )
    finding, suspicious = findings.segments_finding(metrics)
    report.finding(finding + ".", suspicious)
    return metrics | {"finding": finding + "."}
