"""End to end: MiniLM with small settings produces every section, the files, and a report chromium renders."""

from __future__ import annotations

import html
import json
import math
import re

import pytest

from posembed.analysis.decomposition import add_or_concat
from posembed.analysis.inspect_report import InspectOptions, run_inspect
from posembed.analysis.scheme_details import load_for_inspect
from posembed.analysis.sources import load_hf, load_scheme
from posembed.schemes.bias.alibi import ALiBi
from posembed.schemes.rotary.rope import RotaryEmbedding
from tests.analysis.tiny_checkpoints import save_lab_decoder, save_tiny_llama
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


@pytest.mark.xdist_group("test_inspect_report:minilm_run")
@pytest.mark.slow
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
        assert f'<h2 id="section-{heading.split(".")[0]}">{heading}' in page
    assert "Spearman" in page and "Translation invariance error" in page and "Symmetry error" in page
    _every_section_opens_with_a_finding(page)
    assert metrics["kind"] == "absolute"
    for section in SECTIONS:
        assert metrics[section]["finding"].endswith("."), section


@pytest.mark.xdist_group("test_inspect_report:minilm_run")
@pytest.mark.slow
def test_minilm_numbers_are_consistent(minilm_run):
    _, metrics = minilm_run
    assert metrics["similarity"]["positions"] == 512 and metrics["similarity"]["width"] == 384
    assert metrics["properties"]["cosine"]["phi_0"] == pytest.approx(1.0)
    assert metrics["properties"]["first_layer_logits"]["symmetry_error"] > 0.1  # logits are not symmetric
    assert sum(metrics["decomposition"]["shares"].values()) == pytest.approx(1.0)
    assert metrics["decomposition"]["add_vs_concat"] == _verdict_by_hand(metrics["decomposition"]["shares"])
    assert len(metrics["layers"]["per_layer"]) == 7
    # learned positions are readable at the embedding output, far better than chance
    first = metrics["layers"]["per_layer"][0]
    assert first["error"] < 0.5 * first["chance"]
    assert metrics["probes"]["relative"]["score"] < 0.2
    assert metrics["spectrum"]["r2"] > metrics["spectrum"]["r2_shuffled_rows"]
    assert len(metrics["segments"]["segment_norms"]) == 2


@pytest.mark.xdist_group("test_inspect_report:minilm_run")
@pytest.mark.slow
def test_decomposition_answers_add_or_concatenate(minilm_run):
    out, metrics = minilm_run
    shares = metrics["decomposition"]["shares"]
    mixed = shares["word-position"] + shares["position-word"]
    assert metrics["decomposition"]["mixed_share"] == pytest.approx(mixed)
    page = (out / "report.html").read_text()
    assert "Why add instead of concatenate?" in page
    assert f"the mixed terms hold {mixed:.1%} of the logit magnitude against {1 - mixed:.1%}" in page
    expected = {
        "close to concatenation": "adding acts close to concatenation",
        "partly mixed": "sizeable minority",
        "mixed": "as large as the pure terms",
    }[_verdict_by_hand(shares)]
    assert expected in page


def _verdict_by_hand(shares):
    """TUPE verdict from the documented thresholds: mixed share < 0.2, < 0.4, else."""
    mixed = shares["word-position"] + shares["position-word"]
    return "close to concatenation" if mixed < 0.2 else "partly mixed" if mixed < 0.4 else "mixed"


def test_add_or_concat_thresholds():
    shares = [
        {"word-word": 1 - m, "word-position": m / 2, "position-word": m / 2, "position-position": 0.0}
        for m in (0.1, 0.2, 0.39, 0.4)
    ]
    assert [add_or_concat(s)[0] for s in shares] == ["close to concatenation", "partly mixed", "partly mixed", "mixed"]


@pytest.mark.slow
def test_sinusoidal_scheme_reference_through_the_report(tmp_path):
    metrics = run_inspect(load_scheme("sinusoidal", dim=768, max_len=512), tmp_path, options=InspectOptions.small())
    assert metrics["properties"]["dot"]["phi_0"] == pytest.approx(384.0, abs=1e-5)
    assert metrics["properties"]["dot"]["phi_1"] == pytest.approx(373.77, abs=5e-3)
    assert metrics["properties"]["dot"]["first_nonmonotone_offset"] == 43
    assert metrics["probes"]["absolute"]["score"] == 0.0
    for section in ("layers", "decomposition", "segments"):
        assert "skipped" in metrics[section]


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192, "rope_theta": 10000.0}


def _skipped(metrics: dict) -> list[str]:
    """Sections that fit the model's kind but were skipped (not the ones that do not apply)."""
    return [k for k, v in metrics.items() if isinstance(v, dict) and "skipped" in v and not v.get("not_applicable")]


def _every_section_opens_with_a_finding(page: str) -> None:
    sections = re.split(r'<h2 id="section-\d+">', page)[1:]
    assert sections
    for section in sections:
        body = section.split("</h2>", 1)[1].lstrip()
        assert body.startswith('<p class="finding') or body.startswith("<p>Skipped: "), section[:200]


@pytest.mark.slow
def test_rotary_checkpoint_gets_rotary_sections(tmp_path, minilm_path):
    folder = save_tiny_llama(tmp_path / "llama", tokenizer_from=minilm_path)
    metrics = run_inspect(load_for_inspect(folder), tmp_path / "out", options=InspectOptions.small())
    assert metrics["kind"] == "rotary" and "rotary" in metrics["positions"]
    assert metrics["similarity"]["not_applicable"] and "skipped" in metrics["probes"]
    assert metrics["properties"]["RotaryEmbedding_logit_of_ones"]["symmetry_error"] < 1e-6
    assert metrics["rope_frequencies"]["treatments"] == {"keep": 4}
    assert len(metrics["layers"]["per_layer"]) == 3
    assert _skipped(metrics) == []
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Not applicable to rotary positions" in page and "scaling ignored" not in page
    _every_section_opens_with_a_finding(page)


def test_yarn_llama_draws_yarn(tmp_path):
    folder = save_tiny_llama(tmp_path / "yarn", rope_parameters=YARN, kv_heads=2)
    source = load_for_inspect(folder)
    assert type(source.scheme).__name__ == "YaRNRotary"
    metrics = run_inspect(source, tmp_path / "out", options=InspectOptions.small())
    assert "YaRNRotary" in metrics["positions"] and "yarn scaling, factor 4" in metrics["positions"]
    frequencies = metrics["rope_frequencies"]
    assert (frequencies["trained_context"], frequencies["effective_context"]) == (8192, 32768)
    assert frequencies["attention_factor"] == pytest.approx(0.1 * math.log(4) + 1)
    assert frequencies["treatments"]["keep"] >= 1 and frequencies["treatments"]["ramp"] >= 1
    assert "YaRNRotary scales the frequencies" in frequencies["finding"]
    # head_dim 8: the slowest pair (plain wavelength 2 pi 10000^(6/8)) is stretched, by at most the factor 4
    plain = 2 * math.pi * 10000 ** (6 / 8)
    assert plain * 1.01 < frequencies["wavelengths"][-1] <= 4 * plain * (1 + 1e-6)
    assert frequencies["wavelengths"][0] == pytest.approx(2 * math.pi, rel=1e-6)  # the fastest pair is kept
    decay = metrics["rope_decay"]["curves"]
    assert set(decay) >= {"YaRNRotary: RoFormer bound", "plain RoPE: RoFormer bound"}
    usage = metrics["rope_usage"]
    assert len(usage["per_layer"]) == 2 and sum(usage["mean_share_per_pair"]) == pytest.approx(1.0)
    assert _skipped(metrics) == ["layers"]  # no tokenizer in the folder
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Positions: rotary positions (YaRNRotary" in page and "scaling ignored" not in page
    _every_section_opens_with_a_finding(page)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rope", "alibi", "nope"])
def test_lab_checkpoints_get_sections_of_their_kind(tmp_path, name):
    scheme = {"rope": lambda: RotaryEmbedding(8), "alibi": lambda: ALiBi(num_heads=4), "nope": lambda: None}[name]()
    folder = save_lab_decoder(tmp_path / name, scheme, context=32)
    metrics = run_inspect(load_for_inspect(folder), tmp_path / "out", options=InspectOptions.small())
    kind = {"rope": "rotary", "alibi": "bias", "nope": "nope"}[name]
    assert metrics["kind"] == kind
    assert _skipped(metrics) == []
    assert len(metrics["layers"]["per_layer"]) == 3 and "finding" in metrics["layers"]
    if name == "rope":
        assert metrics["rope_frequencies"]["trained_context"] == 32
        assert len(metrics["rope_usage"]["per_layer"]) == 2
    if name == "alibi":
        assert metrics["receptive_field"]["tenfold"][0] == 10  # slope 1/4: ln 10 / 0.25 = 9.2 -> 10
        assert metrics["bias_distance"]["monotone_heads"] == [0, 1, 2, 3]
    if name == "nope":
        assert "Without any positional encoding" in metrics["layers"]["finding"]
    _every_section_opens_with_a_finding((tmp_path / "out" / "report.html").read_text())


@pytest.mark.slow
def test_scheme_alone_bias_sections(tmp_path):
    metrics = run_inspect(load_scheme("alibi", dim=64, max_len=64), tmp_path, options=InspectOptions.small())
    assert metrics["kind"] == "bias" and len(metrics["receptive_field"]["tenfold"]) == 12
    assert "heads" in metrics["receptive_field"]["finding"]
    assert _skipped(metrics) == ["layers"]


@pytest.mark.xdist_group("test_inspect_report:minilm_run")
@pytest.mark.slow
@pytest.mark.browser
def test_report_opens_in_chromium_with_every_image(minilm_run):
    out, _ = minilm_run
    result = render_images(out / "report.html")
    assert result.count == len(FIGURES)
    assert result.all_loaded, result.loaded


def test_the_report_leads_with_a_summary_linking_to_each_section(tmp_path):
    from posembed.analysis.inspect_report import InspectOptions, run_inspect
    from posembed.analysis.sources import load_scheme

    metrics = run_inspect(
        load_scheme("alibi", dim=32, max_len=64), tmp_path, options=InspectOptions.small(), progress=False
    )
    page = (tmp_path / "report.html").read_text()
    summary = page.split('<h2 id="summary">Summary</h2>', 1)[1].split("<h2", 1)[0]
    links = re.findall(r'<li><a href="#(section-\d+)">([^<]*)</a></li>', summary)
    found = [value["finding"] for value in metrics.values() if isinstance(value, dict) and "finding" in value]
    skipped = [name for name, value in metrics.items() if isinstance(value, dict) and "skipped" in value
               and not value.get("not_applicable")]  # fmt: skip
    assert found and len(links) == len(found) + len(skipped)
    for (anchor, text), finding in zip(links, found):
        assert text.endswith(html.escape(finding)) and f'<h2 id="{anchor}">' in page
    assert all(": skipped (" in text for _, text in links[len(found) :])
    assert page.index('id="summary"') < page.index('id="section-1"')
