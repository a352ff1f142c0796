"""M-RoPE sections read from the model's own rotary embedding (posembed.interop.rope.sections), against transformers."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from posembed.interop.rope.config import rotary_from_hf_config  # noqa: E402
from posembed.interop.rope.model import rotary_class, transformers_config  # noqa: E402
from posembed.interop.rope.sections import MRopeSections, axes_of_pairs, model_sections  # noqa: E402
from posembed.schemes.rotary.mrope import MRoPE  # noqa: E402

#: (model type, sections / arrangement / order the module deals) for the default section of each class
FAMILIES = [
    ("qwen2_vl_text", MRopeSections((16, 24, 24), "blocks", (0, 1, 2))),
    ("qwen3_vl_text", MRopeSections((24, 20, 20), "interleaved", (0, 1, 2))),
    ("cosmos3_edge_text", MRopeSections((24, 20, 20), "interleaved", (0, 1, 2))),
    ("ernie4_5_vl_moe_text", MRopeSections((22, 22, 20), "zipped", (1, 2, 0))),
    # its class default [24, 20, 20] is wider than its 32 pairs; the round robin clips it to what each axis turns
    ("qwen3_omni_moe_talker_text", MRopeSections((11, 11, 10), "interleaved", (0, 1, 2))),
]


def _config(model_type: str):
    from transformers import CONFIG_MAPPING

    return transformers_config({**CONFIG_MAPPING[model_type]().to_dict(), "model_type": model_type})


@pytest.mark.parametrize("model_type, expected", FAMILIES)
def test_sections_read_from_the_module(model_type, expected):
    assert model_sections(_config(model_type)) == expected


@pytest.mark.parametrize("model_type", [f for f, _ in FAMILIES] + ["qwen3_5_text", "hy_v4_vl_text", "glm_ocr_text"])
def test_built_mrope_matches_the_module_at_3_row_positions(model_type):
    config = _config(model_type)
    scheme = rotary_from_hf_config(config, angles="fp32")
    assert isinstance(scheme, MRoPE)
    module = rotary_class(config)(config)
    gen = torch.Generator().manual_seed(0)
    positions = torch.randint(0, 50, (3, 1, 20), generator=gen)  # transformers' (3, B, T)
    q, k = (torch.randn(1, 2, 20, scheme.head_dim, generator=gen) for _ in range(2))
    their_sin = module(q, positions)[1][0]  # (T, W): each pair twice
    ours = scheme.cos_sin(positions.permute(1, 2, 0))[1][0]  # (T, rotary_dim / 2)
    half = their_sin.shape[-1] // 2
    pairs = their_sin[:, :half] if torch.equal(their_sin[:, :half], their_sin[:, half:]) else their_sin[:, 0::2]
    torch.testing.assert_close(ours, pairs, rtol=0, atol=1e-6)


def test_text_positions_batched_are_every_axis():
    scheme = rotary_from_hf_config(_config("cosmos3_edge_text"), angles="fp32")
    q, k = torch.randn(1, 2, 6, scheme.head_dim), torch.randn(1, 2, 6, scheme.head_dim)
    ids = torch.arange(6)[None] * 3  # (B, T)
    spread = ids[..., None].expand(1, 6, 3)
    for a, b in zip(scheme(q, k, position_ids=ids), scheme(q, k, position_ids=spread)):
        assert torch.equal(a, b)


def test_axes_of_pairs_reads_both_forms_and_refuses_mixed_pairs():
    sin = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.4, 0.0], [0.0, 0.0, 0.3]])
    assert axes_of_pairs(torch.cat([sin, sin], -1)) == [0, 1, 2]
    assert axes_of_pairs(sin.repeat_interleave(2, -1)) == [0, 1, 2]
    both = sin.clone()
    both[1, 0] = 0.2  # pair 0 turned by two tokens: no single axis
    assert axes_of_pairs(torch.cat([both, both], -1)) is None
    assert axes_of_pairs(torch.rand(3, 6) + 0.1) is None  # neither form


def test_not_mrope_and_ill_fitting_class_defaults_have_no_sections():
    assert model_sections(_config("llama")) is None
    assert model_sections(_config("glm4v_text")) is None  # [8, 12, 12] does not fit its 128-wide head
