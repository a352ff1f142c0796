"""Every rotary class of the pinned transformers against posembed (issue 32), as a known-list.

The pairs come from transformers itself (:mod:`tests.interop.rope_catalogue`, cached per version);
each pair and variant is compared by :mod:`tests.interop.rope_catalogue_compare`. The test holds the
current state: a pair that stops being exact fails it, and so does a listed failure that starts
passing (then shrink ``rope_catalogue_expected.json`` with ``python tools/zoo_table.py --expected``).
docs/zoo.md's generated table must be the one a fresh run writes.
"""

from __future__ import annotations

import re

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.interop import rope_catalogue as catalogue  # noqa: E402
from tests.interop import rope_catalogue_compare as compare  # noqa: E402
from tests.interop import rope_catalogue_table as table  # noqa: E402

PIN = "5.24.0"


@pytest.fixture(scope="module")
def rows():
    if transformers.__version__ != PIN:
        pytest.skip(
            f"the catalogue's known-list is for transformers {PIN} (constraints.txt); {transformers.__version__} is "
            "installed"
        )
    return compare.run(catalogue.catalogue())


def test_the_pin_is_the_constraint():
    constraints = (table.PAGE.parents[1] / "constraints.txt").read_text(encoding="utf-8")
    assert re.search(rf"^transformers=={re.escape(PIN)}$", constraints, re.M)
    assert table.read_expected()["transformers"] == PIN


def test_every_rotary_class_of_transformers_is_in_the_catalogue():
    """The cache names every ``*RotaryEmbedding`` class of every modeling module (no hand list)."""
    if transformers.__version__ != PIN:
        pytest.skip("another transformers")
    defined = set()
    for path in (catalogue.transformers_root() / "models").glob("*/modeling_*.py"):
        defined |= {name for name, _ in catalogue._CLASS.findall(path.read_text(encoding="utf-8"))}
    paired = {pair.rotary_class for pair in catalogue.catalogue()}
    assert defined - paired == set()
    assert len(catalogue.catalogue()) >= 300


@pytest.mark.xdist_group("test_rope_catalogue:rows")
@pytest.mark.slow
def test_no_pair_regresses_and_no_listed_failure_passes(rows):
    expected = table.read_expected()["failures"]
    found = table.failures(rows)
    checked = {f"{key} {variant}" for key, variant, _, _ in rows}
    regressed = {k: v for k, v in found.items() if expected.get(k) != v}
    fixed = {k: v for k, v in expected.items() if k not in found}
    assert not regressed, f"new or changed failures (verdict now): {regressed}"
    assert not fixed, (
        f"listed failures that now pass or are not checked (run tools/zoo_table.py --expected): "
        f"{ {k: 'exact' if k in checked else 'not checked' for k in fixed} }"
    )


@pytest.mark.xdist_group("test_rope_catalogue:rows")
@pytest.mark.slow
def test_the_zoo_page_is_the_catalogue(rows):
    body = table.page_block(table.PAGE.read_text(encoding="utf-8"))
    assert body is not None, "docs/zoo.md has no generated:rope-catalogue block (python tools/zoo_table.py)"
    assert body == table.markdown(rows, transformers.__version__), "docs/zoo.md is stale: python tools/zoo_table.py"


def _llama():
    return next(pair for pair in catalogue.catalogue() if pair.key == "llama/LlamaRotaryEmbedding")


def test_the_harness_sees_a_wrong_layout(monkeypatch):
    """Interleaved pairs where Llama rotates halves: cos/sin equal, q·k not: ``layout wrong``."""
    from posembed.interop.rope import config

    real = config.rotary_from_hf_config
    monkeypatch.setattr(config, "rotary_from_hf_config", lambda *a, **k: real(*a, **k, layout="interleaved"))
    assert compare.verdict(_llama(), "default")[0] == compare.LAYOUT


def test_the_harness_sees_wrong_values(monkeypatch):
    from posembed.interop.rope import config
    from posembed.schemes.rotary.rope import RotaryEmbedding

    monkeypatch.setattr(config, "rotary_from_hf_config", lambda *a, **k: RotaryEmbedding(128, base=5e5, angles="fp32"))
    assert compare.verdict(_llama(), "default")[0] == compare.VALUES


def test_the_harness_reports_a_refusal_with_its_reason(monkeypatch):
    from posembed.interop.rope import config

    def refuse(*args, **kwargs):
        raise ValueError("no such thing\nsecond line")

    monkeypatch.setattr(config, "rotary_from_hf_config", refuse)
    assert compare.verdict(_llama(), "default") == (compare.REFUSED, "no such thing")


def test_an_exact_pair_is_exact():
    assert compare.verdict(_llama(), "default") == (compare.EXACT, "")
    assert compare.verdict(_llama(), "mrope3") is None  # not an M-RoPE family


def test_an_odd_default_head_is_fitted_to_its_sections_and_read_exactly():
    """Qwen3-Omni's thinker: its config class's defaults give head_dim 2048 // 28 = 73; transformers builds 37
    frequencies, which its sections [24, 20, 20] do not fill (its attention's ``q * cos`` fails on 73 channels). The
    harness fits the head to the sections (128, as its checkpoints state it), which posembed reads exactly; a config
    stating head_dim 128 is read exactly too."""
    pair = next(
        p for p in catalogue.catalogue() if p.key == "qwen3_omni_moe_text/Qwen3OmniMoeThinkerTextRotaryEmbedding"
    )
    root, sub = compare.build_config(pair, "default", 0)
    assert compare.rotary_module(pair, sub)[1].inv_freq.numel() == 37
    assert compare.fitted(pair, sub)[1].inv_freq.numel() == 64 and sub.head_dim == 128
    for variant in ("default", "mrope3"):
        assert compare.verdict(pair, variant) == (compare.EXACT, ""), variant
    config = transformers.CONFIG_MAPPING["qwen3_omni_moe_text"](head_dim=128)
    module, rotary = compare.rotary_module(pair, config)
    for variant in ("default", "mrope3"):
        assert compare.compare_layer(pair, module, config, config, rotary, variant, None) == (compare.EXACT, "")


def test_phimoe_is_checked_where_its_forward_scales():
    """PhiMoE's forward folds short_mscale / long_mscale into cos / sin (the variants state them), so its scaled rows
    test posembed's ``forward_mscale``; without it they would differ (``test_rope_transformers_rules``)."""
    pair = next(p for p in catalogue.catalogue() if p.key == "phimoe/PhimoeRotaryEmbedding")
    for variant in ("yarn", "llama3", "longrope"):
        assert compare.verdict(pair, variant) == (compare.EXACT, ""), variant


def _pair(key: str):
    return next(p for p in catalogue.catalogue() if p.key == key)


def test_mrope_sections_that_do_not_fill_the_default_head_are_fitted():
    """GLM-4.5V's config class defaults to a 42-channel head (4096 / 96, 11 frequencies at its partial factor 0.5)
    that the module's default sections [8, 12, 12] do not fill, so its own forward fails; the harness gives it the
    head the sections fit (2 * 32 / 0.5 = 128, its checkpoints'), where posembed reads it exactly, 3-row positions
    included."""
    pair = _pair("glm4v_moe/Glm4vMoeTextRotaryEmbedding")
    root, sub = compare.build_config(pair, "default", 0)
    raw = compare.rotary_module(pair, sub)[1]
    with pytest.raises(RuntimeError, match="split_with_sizes"):
        raw(torch.zeros(1, 4, 8), torch.arange(4)[None])
    module, rotary = compare.fitted(pair, sub)
    assert sub.head_dim == 128 and rotary.inv_freq.numel() == 32
    for variant in ("default", "mrope3", "top-level"):
        assert compare.verdict(pair, variant) == (compare.EXACT, ""), variant


def test_a_rotary_class_is_paired_with_the_config_its_init_names():
    """Moshi builds its decoder layers for the depth decoder (``MoshiDepthConfig``, ``use_rope=False``) and the
    language model (``MoshiConfig``, the one ``MoshiRotaryEmbedding.__init__`` names); ESMFold2 builds its rotary
    from the ``atom_config`` its atom encoder holds."""
    pairs = {p.key: p for p in catalogue.catalogue()}
    assert pairs["moshi/MoshiRotaryEmbedding"].config_path == ""
    assert "moshi_depth/MoshiRotaryEmbedding" not in pairs  # its model builds no rotary
    assert compare.verdict(pairs["moshi/MoshiRotaryEmbedding"], "default") == (compare.EXACT, "")
    assert pairs["esmfold2/EsmFold2RotaryEmbedding"].config_path == "atom_encoder"


def test_a_key_error_is_named():
    assert compare.reason(KeyError("full_attention")) == "KeyError: 'full_attention'"
