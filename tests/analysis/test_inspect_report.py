"""End to end: MiniLM with small settings produces every section, the files, and a report chromium renders."""

from __future__ import annotations

import json
import re

import pytest

from posembed.analysis.decomposition import add_or_concat
from posembed.analysis.inspect_report import InspectOptions, run_inspect
from posembed.analysis.sources import load_hf, load_scheme
from tests.analysis.tiny_checkpoints import save_tiny_llama
from tests.browser import render_images

SECTIONS = ("similarity", "properties", "probes", "spectrum", "layers", "decomposition", "segments")
FIGURES = (
    "similarity",
    "norms",
    "pca",
    "closeness",
    "spectrum",
    "sinusoid_fit",
    "layer_probe",
    "decomposition",
    "segments",
)


@pytest.fixture(scope="module")
def minilm_run(minilm_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("inspect") / "minilm"
    metrics = run_inspect(load_hf(minilm_path), out, options=InspectOptions.small())
    return out, metrics


def test_every_section_and_file(minilm_run):
    out, metrics = minilm_run
    for section in SECTIONS:
        assert "skipped" not in metrics[section], section
    assert json.loads((out / "metrics.json").read_text()) == json.loads(json.dumps(metrics))
    page = (out / "report.html").read_text()
    assert len(re.findall(r'<img src="data:image/png;base64,', page)) == len(FIGURES)
    for name in FIGURES:
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    for heading in (
        "1. Position-to-position",
        "2. Properties",
        "3. Probes",
        "4. Is it sinusoidal?",
        "5. Position through depth",
        "6. Four-term decomposition",
        "7. Segment",
    ):
        assert f"<h2>{heading}" in page
    assert "Spearman" in page and "Translation invariance error" in page and "Symmetry error" in page


def test_minilm_numbers_are_consistent(minilm_run):
    _, metrics = minilm_run
    assert metrics["similarity"]["positions"] == 512 and metrics["similarity"]["width"] == 384
    assert metrics["properties"]["cosine"]["phi_0"] == pytest.approx(1.0)
    assert metrics["properties"]["first_layer_logits"]["symmetry_error"] > 0.1  # logits are not symmetric
    assert sum(metrics["decomposition"]["shares"].values()) == pytest.approx(1.0)
    assert metrics["decomposition"]["add_vs_concat"] == add_or_concat(metrics["decomposition"]["shares"])[0]
    assert len(metrics["layers"]["per_layer"]) == 7
    # learned positions are readable at the embedding output, far better than chance
    first = metrics["layers"]["per_layer"][0]
    assert first["error"] < 0.5 * first["chance"]
    assert metrics["probes"]["relative"]["score"] < 0.2
    assert metrics["spectrum"]["r2"] > metrics["spectrum"]["r2_shuffled_rows"]
    assert len(metrics["segments"]["segment_norms"]) == 2


def test_decomposition_answers_add_or_concatenate(minilm_run):
    out, metrics = minilm_run
    shares = metrics["decomposition"]["shares"]
    mixed = shares["word-position"] + shares["position-word"]
    assert metrics["decomposition"]["mixed_share"] == pytest.approx(mixed)
    page = (out / "report.html").read_text()
    assert "Why add instead of concatenate?" in page
    assert f"the mixed terms hold {mixed:.1%} of the logit magnitude against {1 - mixed:.1%}" in page
    expected = {"close to concatenation": "adding acts close to concatenation", "partly mixed": "sizeable minority"}
    assert expected.get(metrics["decomposition"]["add_vs_concat"], "as large as the pure terms") in page


def test_sinusoidal_scheme_reference_through_the_report(tmp_path):
    metrics = run_inspect(load_scheme("sinusoidal", dim=768, max_len=512), tmp_path, options=InspectOptions.small())
    assert metrics["properties"]["dot"]["phi_0"] == pytest.approx(384.0, abs=1e-5)
    assert metrics["properties"]["dot"]["phi_1"] == pytest.approx(373.77, abs=5e-3)
    assert metrics["properties"]["dot"]["first_nonmonotone_offset"] == 43
    assert metrics["probes"]["absolute"]["score"] == 0.0
    for section in ("layers", "decomposition", "segments"):
        assert "skipped" in metrics[section]


def test_rotary_checkpoint_runs_what_applies(tmp_path, minilm_path):
    folder = save_tiny_llama(tmp_path / "llama", tokenizer_from=minilm_path)
    metrics = run_inspect(load_hf(folder), tmp_path / "out", options=InspectOptions.small())
    assert "rotary" in metrics["positions"]
    assert "rotary" in metrics["similarity"]["skipped"] and "skipped" in metrics["probes"]
    assert (
        metrics["properties"]["RoPE_logit_of_ones_head_dim_8_theta_10000.0;_scaling_ignored"]["symmetry_error"] < 1e-6
    )
    assert len(metrics["layers"]["per_layer"]) == 3
    assert "Skipped: the model has no absolute position table" in (tmp_path / "out" / "report.html").read_text()


@pytest.mark.browser
def test_report_opens_in_chromium_with_every_image(minilm_run):
    out, _ = minilm_run
    result = render_images(out / "report.html")
    assert result.count == len(FIGURES)
    assert result.all_loaded, result.loaded
