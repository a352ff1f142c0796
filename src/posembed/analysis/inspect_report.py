"""``posembed inspect`` as a function: run every section that applies and write the report.

:func:`run_inspect` takes a :class:`~posembed.analysis.sources.Source` and writes ``report.html``
(self-contained), one PNG per figure and ``metrics.json`` into a folder, atomically. A section that
does not apply to the model (no position table, no tokenizer, no segments) is recorded in the
metrics as ``{"skipped": <reason>}`` and said in the report.

Example:
    >>> import tempfile, pathlib
    >>> from posembed.analysis.sources import load_scheme
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> metrics = run_inspect(load_scheme("sinusoidal", dim=32, max_len=64), out, options=InspectOptions.small())
    >>> round(metrics["properties"]["dot"]["phi_0"], 4), metrics["probes"]["absolute"]["score"]
    (16.0, 0.0)
    >>> sorted(p.name for p in out.iterdir())[:3]
    ['closeness.png', 'metrics.json', 'norms.png']
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from posembed._io import atomic_write_json
from posembed.analysis import model_sections, table_sections
from posembed.analysis.sources import Source
from posembed.analysis.text_model import DEFAULT_TEXT, load_probe_text
from posembed.report import HtmlReport

__all__ = ["InspectOptions", "run_inspect"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class InspectOptions:
    """Sizes of the slower analyses (defaults keep ``posembed inspect`` of MiniLM well under a minute)."""

    windows: int = 16
    window_length: int = 128
    decomposition_windows: int = 4
    relative_pairs: int = 2000
    num_frequencies: int = 32
    hidden_units: int = 128
    probe_epochs: int = 80

    @classmethod
    def small(cls) -> "InspectOptions":
        """Settings for smoke tests: a few short windows, small probes."""
        return cls(
            windows=10,
            window_length=32,
            decomposition_windows=2,
            relative_pairs=400,
            num_frequencies=8,
            hidden_units=64,
            probe_epochs=150,
        )


def _timed(timings: dict, name: str, function, *args):
    start = time.perf_counter()
    logger.info("section: %s", name)
    try:
        return function(*args)
    finally:
        timings[name] = round(time.perf_counter() - start, 3)


def _skip(report: HtmlReport, heading: str, reason: str) -> dict:
    report.heading(heading)
    report.paragraph(f"Skipped: {reason}")
    return {"skipped": reason}


def _table_sections(report: HtmlReport, source: Source, options: InspectOptions, timings: dict) -> dict:
    table = source.position_table
    headings = (
        "1. Position-to-position similarity",
        "2. Properties (Wang et al., ICLR 2021)",
        "3. Probes (Wang & Chen, EMNLP 2020)",
        "4. Is it sinusoidal?",
    )
    if table is None:
        reason = f"the model has no absolute position table: {source.positions}"
        found = dict(
            zip(("similarity", "properties", "probes", "spectrum"), (_skip(report, h, reason) for h in headings[:1]))
        )
        if source.closeness is not None:
            extra = {source.closeness_name: source.closeness}
            found["properties"] = _timed(
                timings, "properties", table_sections.section_properties, report, None, None, extra
            )
        else:
            found["properties"] = _skip(report, headings[1], reason + "; nor a closeness between positions")
        found["probes"], found["spectrum"] = (_skip(report, h, reason) for h in headings[2:])
        return found
    return {
        "similarity": _timed(timings, "similarity", table_sections.section_similarity, report, table),
        "properties": _timed(
            timings, "properties", table_sections.section_properties, report, table, source.first_layer
        ),
        "probes": _timed(timings, "probes", table_sections.section_probes, report, table, options.relative_pairs),
        "spectrum": _timed(
            timings, "spectrum", table_sections.section_spectrum, report, table, options.num_frequencies
        ),
    }


def _model_sections(
    report: HtmlReport, source: Source, text: str | None, options: InspectOptions, timings: dict
) -> dict:
    found: dict = {}
    windows = None
    if source.text_model is None:
        found["layers"] = _skip(report, "5. Position through depth", "no text model (tokenizer and weights)")
    else:
        windows = model_sections.text_windows(source.text_model, text, options.window_length, options.windows)
        args = (report, source.text_model, windows, options.hidden_units, options.probe_epochs)
        found["layers"] = _timed(timings, "layers", model_sections.section_layers, *args)
    found["decomposition"] = _decomposition(report, source, windows, options, timings)
    if source.segment_table is None or source.token_table is None:
        reason = "the model has no segment (token type) embeddings"
        found["segments"] = _skip(report, "7. Segment (token type) embeddings", reason)
    else:
        args = (report, source.segment_table, source.position_table, source.token_table)
        found["segments"] = _timed(timings, "segments", model_sections.section_segments, *args)
    return found


def _decomposition(report: HtmlReport, source: Source, windows, options: InspectOptions, timings: dict) -> dict:
    heading = "6. Four-term decomposition of first-layer attention (Ke et al., TUPE)"
    if source.first_layer is None or source.position_table is None or source.token_table is None:
        reason = "needs a BERT- or GPT-2-family checkpoint with a learned absolute position table"
        return _skip(report, heading, reason)
    if windows is None:
        return _skip(report, heading, "needs the checkpoint's tokenizer to build windows of real text")
    sample = windows[: options.decomposition_windows]
    return _timed(timings, "decomposition", model_sections.section_decomposition, report, sample, source)


def run_inspect(
    source: Source,
    out: str | os.PathLike,
    text_path: str | os.PathLike | None = None,
    options: InspectOptions | None = None,
) -> dict:
    """Run every applicable section on ``source`` and write ``report.html``, PNGs and ``metrics.json`` into ``out``."""
    options = options or InspectOptions()
    out = Path(out)
    needs_text = source.text_model is not None or text_path is not None
    text = load_probe_text(text_path) if needs_text else None  # fail early on a bad --text
    report = HtmlReport(f"posembed inspect: {source.name}")
    report.paragraph(f"Positions: {source.positions}.")
    for note in source.notes:
        report.paragraph(f"Note: {note}")
    timings: dict = {}
    metrics: dict = {
        "model": source.name,
        "family": source.family,
        "positions": source.positions,
        "notes": list(source.notes),
    }
    metrics.update(_table_sections(report, source, options, timings))
    metrics.update(_model_sections(report, source, text, options, timings))
    metrics["text"] = str(text_path) if text_path is not None else f"{DEFAULT_TEXT.name} (shipped with posembed)"
    metrics["options"] = asdict(options)
    metrics["timings_seconds"] = timings
    report.write(out / "report.html")
    atomic_write_json(out / "metrics.json", metrics)
    logger.info("wrote %s", out)
    return metrics
