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

transformers = pytest.importorskip("transformers")

from tests.interop import rope_catalogue as catalogue  # noqa: E402
from tests.interop import rope_catalogue_compare as compare  # noqa: E402
from tests.interop import rope_catalogue_table as table  # noqa: E402

PIN = "5.24.0"


@pytest.fixture(scope="module")
def rows():
    if transformers.__version__ != PIN:
        pytest.skip(f"the catalogue's known-list is for transformers {PIN} (constraints.txt); {transformers.__version__} is installed")
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
    from posembed.schemes.rotary import RotaryEmbedding

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


def test_an_odd_default_head_has_no_reference_and_the_checkpoints_head_is_exact():
    """Qwen3-Omni's thinker: its config class's defaults give head_dim 2048 // 28 = 73; transformers builds 37
    frequencies (cos/sin 74 wide) and its attention's ``q * cos`` fails on 73 channels, so the default config has no
    reference (posembed refuses the odd width). Its checkpoints state head_dim 128, which posembed reads exactly."""
    pair = next(p for p in catalogue.catalogue() if p.key == "qwen3_omni_moe_text/Qwen3OmniMoeThinkerTextRotaryEmbedding")
    found, why = compare.verdict(pair, "default")
    assert found == compare.NO_REFERENCE and "73-channel heads with cos/sin 74 wide" in why
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
