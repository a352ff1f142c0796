"""``posembed inspect`` as a function: run the sections that fit the model's positions and write the report.

:func:`run_inspect` takes a :class:`~posembed.analysis.sources.Source` and writes ``report.html``
(self-contained), one PNG per figure and ``metrics.json`` into a folder, atomically. The report is
organised by the kind of positions (:func:`~posembed.analysis.scheme_details.position_kind`):

- absolute table: similarity, Wang et al.'s properties, Wang & Chen's probes, "is it sinusoidal?",
  the per-layer probe, TUPE's four-term decomposition, segment embeddings;
- rotary: per-pair wavelengths against the trained and scaled context, the long-term decay of q.k,
  which frequency pairs the q/k projections use, properties of the rotary logits, the per-layer probe;
- bias: the bias against distance per head, the effective receptive field, properties, the probe;
- relative (biases that read q/k: Shaw, CoPE): properties where defined, the probe;
- NoPE: the per-layer probe, which tells whether position was learned implicitly.

Every section opens with a one-line finding computed from its numbers (also in the metrics as
``"finding"``); a section that fits the kind but lacks what it needs (no tokenizer) says
"Skipped" with the reason, and the sections that do not fit the kind are listed once, at the end.
Their metrics are ``{"skipped": <reason>}`` (plus ``"not_applicable": true``).

The model's forward on the text windows, the scheme's tables and closeness matrices and the
first-layer logits run on ``source.device`` (the loaders' ``device``, ``posembed inspect
--device``); their results come back to the CPU, where the probes (scikit-learn), the
statistics and the plots run.

Example:
    >>> import tempfile, pathlib
    >>> from posembed.analysis.sources import load_scheme
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> metrics = run_inspect(load_scheme("sinusoidal", dim=32, max_len=64), out, options=InspectOptions.small())
    >>> round(metrics["properties"]["dot"]["phi_0"], 4), metrics["probes"]["absolute"]["score"], metrics["kind"]
    (16.0, 0.0, 'absolute')
    >>> sorted(p.name for p in out.iterdir())[:3]
    ['closeness.png', 'metrics.json', 'norms.png']
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from posembed._utils.html import HtmlReport
from posembed._utils.io import atomic_write_json
from posembed._utils.progress import Progress, progress_mode
from posembed.analysis import bias_sections, model_sections, rotary_sections, table_sections
from posembed.analysis.scheme_details import position_kind
from posembed.analysis.sources import Source
from posembed.analysis.text_model import DEFAULT_TEXT, load_probe_text
from posembed.schemes.base import BiasScheme

__all__ = ["InspectOptions", "run_inspect", "PLANS", "TITLES"]

logger = logging.getLogger(__name__)
#: one INFO line per finished section; ``posembed inspect`` shows them on stderr (``--quiet``: off)
PROGRESS_LOGGER = "posembed.analysis.progress"
progress_logger = logging.getLogger(PROGRESS_LOGGER)

TITLES = {
    "similarity": "Position-to-position similarity",
    "properties": "Properties (Wang et al., ICLR 2021)",
    "probes": "Probes (Wang & Chen, EMNLP 2020)",
    "spectrum": "Is it sinusoidal?",
    "layers": "Position through depth",
    "decomposition": "Four-term decomposition of first-layer attention (Ke et al., TUPE)",
    "segments": "Segment (token type) embeddings",
    "rope_frequencies": "Rotary frequencies against the context",
    "rope_decay": "Long-term decay of q·k with distance (Su et al., RoFormer)",
    "rope_usage": "Frequency pairs the model uses",
    "bias_distance": "Attention bias against distance, per head",
    "receptive_field": "Effective receptive field",
}
#: the sections every report accounts for (run, skipped, or not applicable)
CLASSIC = ("similarity", "properties", "probes", "spectrum", "layers", "decomposition", "segments")
#: the sections run for each kind of positions, in order
PLANS = {
    "absolute": CLASSIC,
    "rotary": ("rope_frequencies", "rope_decay", "rope_usage", "properties", "layers"),
    "bias": ("bias_distance", "receptive_field", "properties", "layers"),
    "relative": ("properties", "layers"),
    "nope": ("layers",),
}
_NOT_APPLICABLE = {
    "similarity": "compares the vectors of an absolute position table",
    "probes": "reads position back from an absolute position table",
    "spectrum": "fits sinusoids to an absolute position table",
    "properties": "needs a closeness between positions, which a model without positional encoding lacks",
    "decomposition": "splits the first layer's logits of w + p, a learned absolute table added to the tokens",
    "segments": "measures BERT-family token type embeddings next to an absolute table",
}


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
    def small(cls) -> InspectOptions:
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


class _Run:
    """One report in the making: the source, the options, and what the sections share (text windows)."""

    def __init__(self, report: HtmlReport, source: Source, text: str | None, options: InspectOptions) -> None:
        self.report, self.source, self.text, self.options = report, source, text, options
        self.kind = position_kind(source)
        self._windows = None
        self._pairs = None

    def windows(self):
        if self._windows is None:
            model, options = self.source.text_model, self.options
            self._windows = model_sections.text_windows(model, self.text, options.window_length, options.windows)
        return self._windows

    def pairs(self):
        if self._pairs is None:
            self._pairs = rotary_sections.rotary_pairs(self.source, self._analysed_length())
        return self._pairs

    def _analysed_length(self) -> int | None:
        return getattr(self.source.text_model, "max_length", None)

    def skip(self, name: str, reason: str) -> dict:
        self.report.section(TITLES[name])
        self.report.paragraph(f"Skipped: {reason}")
        return {"skipped": reason}


def _similarity(run: _Run) -> dict:
    return table_sections.section_similarity(run.report, run.source.position_table)


def _properties(run: _Run) -> dict:
    source = run.source
    if source.position_table is not None:
        return table_sections.section_properties(run.report, source.position_table, source.first_layer,
                                                 device=source.device)  # fmt: skip
    if source.closeness is None:
        return run.skip("properties", f"{source.positions}: it gives no closeness between positions on its own")
    extra = {source.closeness_name: source.closeness}
    return table_sections.section_properties(run.report, None, None, extra)


def _probes(run: _Run) -> dict:
    return table_sections.section_probes(run.report, run.source.position_table, run.options.relative_pairs)


def _spectrum(run: _Run) -> dict:
    return table_sections.section_spectrum(run.report, run.source.position_table, run.options.num_frequencies)


def _layers(run: _Run) -> dict:
    if run.source.text_model is None:
        return run.skip("layers", "no text model (the checkpoint's tokenizer and weights)")
    o = run.options
    return model_sections.section_layers(run.report, run.source.text_model, run.windows(), o.hidden_units,
                                         o.probe_epochs, nope=run.kind == "nope")  # fmt: skip


def _decomposition(run: _Run) -> dict:
    source = run.source
    if source.first_layer is None or source.token_table is None:
        return run.skip("decomposition", "needs a BERT- or GPT-2-family checkpoint with a learned absolute table")
    if source.text_model is None:
        return run.skip("decomposition", "needs the checkpoint's tokenizer to build windows of real text")
    sample = run.windows()[: run.options.decomposition_windows]
    return model_sections.section_decomposition(run.report, sample, source)


def _segments(run: _Run) -> dict:
    source = run.source
    if source.segment_table is None or source.token_table is None:
        return run.skip("segments", "the model has no segment (token type) embeddings")
    args = (run.report, source.segment_table, source.position_table, source.token_table)
    return model_sections.section_segments(*args)


def _rotary(name: str, section):
    def runner(run: _Run) -> dict:
        pairs = run.pairs()
        if pairs is None:
            return run.skip(name, f"{run.source.positions}: no per-pair frequencies the inspector can read")
        if name == "rope_usage":
            if not run.source.attention:
                return run.skip(name, "no q/k projection weights (a scheme alone, or unrecognised weight names)")
            return section(run.report, pairs, run.source.attention)
        return section(run.report, pairs)

    return runner


def _bias(name: str, section):
    def runner(run: _Run) -> dict:
        scheme = run.source.scheme
        if not isinstance(scheme, BiasScheme) or scheme.needs_qk:
            return run.skip(name, f"{run.source.positions}: no bias from positions alone to draw")
        horizon = bias_sections.bias_horizon(run.source.trained_length, run._analysed_length())
        return section(run.report, scheme, horizon, run.source.trained_length)

    return runner


_RUNNERS = {
    "similarity": _similarity,
    "properties": _properties,
    "probes": _probes,
    "spectrum": _spectrum,
    "layers": _layers,
    "decomposition": _decomposition,
    "segments": _segments,
    "rope_frequencies": _rotary("rope_frequencies", rotary_sections.section_rope_frequencies),
    "rope_decay": _rotary("rope_decay", rotary_sections.section_rope_decay),
    "rope_usage": _rotary("rope_usage", rotary_sections.section_rope_usage),
    "bias_distance": _bias("bias_distance", bias_sections.section_bias_distance),
    "receptive_field": _bias("receptive_field", bias_sections.section_receptive_field),
}


def _sections(run: _Run, timings: dict, anchors: dict, progress: bool | str | None) -> dict:
    found = {}
    plan = PLANS[run.kind]
    with Progress(
        len(plan), mode=progress_mode(progress), desc="inspect sections", unit="section", logger=progress_logger
    ) as reporter:
        for name in plan:
            start = time.perf_counter()
            logger.info("section: %s", name)
            reporter.working_on(TITLES[name])
            before = len(run.report.section_anchors)
            try:
                found[name] = _RUNNERS[name](run)
            finally:
                timings[name] = round(time.perf_counter() - start, 3)
            if len(run.report.section_anchors) > before:
                anchors[name] = run.report.section_anchors[before][1]
            reporter.advance(TITLES[name], timings[name])
    missing = [name for name in CLASSIC if name not in found]
    if missing:
        run.report.section(f"Not applicable to {run.kind} positions")
        lines = [f"{TITLES[name]}: {_NOT_APPLICABLE[name]}." for name in missing]
        run.report.bullets(lines)
        run.report.finding(f"{len(missing)} of the table-model sections do not apply to {run.kind} positions; "
                           f"the {len(found)} sections above replace them.")  # fmt: skip
        for name in missing:
            found[name] = {"skipped": f"{_NOT_APPLICABLE[name]}; this model has {run.kind} positions",
                           "not_applicable": True}  # fmt: skip
    return found


def _summary(report: HtmlReport, at: int, sections: dict, anchors: dict) -> None:
    """The report opens with every section's verdict (its finding, or why it was skipped), each a link to it."""
    found = [(name, value) for name, value in sections.items() if "finding" in value]
    skipped = [(name, value) for name, value in sections.items()
               if "skipped" in value and not value.get("not_applicable")]  # fmt: skip
    items = [(f"{TITLES[name]}: {value['finding']}", anchors.get(name, "")) for name, value in found]
    items += [(f"{TITLES[name]}: skipped ({value['skipped']})", anchors.get(name, "")) for name, value in skipped]
    report.links(items or [("No section reached a finding; the sections below say why.", "")], at=at)


def run_inspect(
    source: Source,
    out: str | os.PathLike,
    text_path: str | os.PathLike | None = None,
    options: InspectOptions | None = None,
    progress: bool | str | None = None,
) -> dict:
    """Run the sections that fit ``source`` and write ``report.html``, PNGs and ``metrics.json`` into ``out``.

    ``progress``: a bar on a terminal and else one INFO line per finished section on
    :data:`PROGRESS_LOGGER` (``None``, the default), ``False`` for none, or a mode of
    :func:`~posembed._utils.progress.progress_mode`.
    """
    options = options or InspectOptions()
    out = Path(out)
    needs_text = source.text_model is not None or text_path is not None
    text = load_probe_text(text_path) if needs_text else None  # fail early on a bad --text
    report = HtmlReport(f"posembed inspect: {source.name}")
    report.paragraph(f"Positions: {source.positions}.")
    for note in source.notes:
        report.paragraph(f"Note: {note}")
    report.heading("Summary", anchor="summary")
    summary = report.mark()
    run = _Run(report, source, text, options)
    timings: dict = {}
    anchors: dict = {}
    metrics: dict = {
        "model": source.name,
        "family": source.family,
        "kind": run.kind,
        "positions": source.positions,
        "notes": list(source.notes),
    }
    sections = _sections(run, timings, anchors, progress)
    metrics.update(sections)
    _summary(report, summary, sections, anchors)
    metrics["text"] = str(text_path) if text_path is not None else f"{DEFAULT_TEXT.name} (shipped with posembed)"
    metrics["options"] = asdict(options)
    metrics["timings_seconds"] = timings
    report.write(out / "report.html")
    atomic_write_json(out / "metrics.json", metrics)
    logger.info("wrote %s", out)
    return metrics
