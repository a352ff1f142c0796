"""rotary_pairs reads the trained and the *scaled* context of a rope check report: the length the scaling stretches the
trained one to, which the scheme path computes too (factor x trained), not the configured length the report states
as effective only where the numbers agree."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from posembed.analysis.rotary_math import rotary_pairs
from posembed.analysis.source_types import Source
from posembed.interop.rope.config import rotary_from_hf_config
from posembed.interop.rope_check.check import check_rope_config

CORPUS = Path(__file__).parents[1] / "interop" / "published_configs"


def _source(name: str, **extra) -> Source:
    return Source(
        name=name, family="hf", positions="rotary", rope_report=check_rope_config(CORPUS / name, compare=False), **extra
    )


def test_llama_3_1_pairs_carry_the_scaled_context_the_report_states():
    # llama3 x8 from 8192 in a file configured for 131072: the report's effective context is None (the numbers
    # disagree), its scaled context 65536; rotary_pairs read the effective one and lost the scaled context
    source = _source("llama-3.1-8b-instruct.json")
    (layer,) = source.rope_report.layers
    assert (layer.trained_context, layer.scaled_context, layer.effective_context) == (8192, 65536, None)
    pairs = rotary_pairs(source)
    assert (pairs.trained, pairs.effective) == (8192, 65536) and pairs.scaled


def test_the_report_and_the_scheme_give_the_same_scaled_context():
    name = "llama-3.1-8b-instruct.json"
    from_report = rotary_pairs(_source(name))
    scheme = rotary_from_hf_config(CORPUS / name)
    from_scheme = rotary_pairs(Source(name=name, family="hf", positions="rotary", scheme=scheme))
    assert (from_report.trained, from_report.effective) == (from_scheme.trained, from_scheme.effective) == (8192, 65536)


@pytest.mark.parametrize("name", ["phi-3.5-vision-instruct-text.json", "qwen3-8b.json"])
def test_a_scaling_that_reaches_the_configured_length_or_none_keeps_it(name):
    source = _source(name)
    layer = source.rope_report.layers[0]
    assert rotary_pairs(source).effective == layer.scaled_context  # 131072 for Phi-3.5's longrope; none unscaled
    assert (layer.scaled_context is None) == (layer.settings.rope_type == "default")
