"""TUPE four-term decomposition: the four terms add up to the real first-layer logits of real models."""

from __future__ import annotations

import math

import pytest
import torch

from posembed.analysis.decomposition import TERMS, add_or_concat, four_terms, layernorm_split, term_shares
from posembed.analysis.model_sections import decompose_windows
from posembed.analysis.sources import load_hf
from tests.analysis.tiny_checkpoints import save_tiny_gpt2
from tests.helpers import assert_close


def _scores(q: torch.Tensor, k: torch.Tensor, heads: int) -> torch.Tensor:
    batch, length, width = q.shape
    q = q.view(batch, length, heads, width // heads).transpose(1, 2)  # (B, H, T, D)
    k = k.view(batch, length, heads, width // heads).transpose(1, 2)  # (B, H, T, D)
    return q @ k.transpose(-1, -2) / math.sqrt(width // heads)


def test_terms_sum_to_minilm_first_layer_logits(minilm_path):
    from transformers import BertModel

    source = load_hf(minilm_path)
    model = BertModel.from_pretrained(str(minilm_path)).double().eval()
    windows = torch.randint(1000, 20000, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        h0 = model(input_ids=windows, output_hidden_states=True).hidden_states[0]  # (B, T, C) = LN(w + p + s)
        attention = model.encoder.layer[0].attention.self
        expected = _scores(attention.query(h0), attention.key(h0), 12)
    terms = decompose_windows(
        windows, source.token_table, source.position_table, source.segment_table, source.first_layer
    )
    assert_close(sum(terms.values()), expected)
    assert set(terms) == set(TERMS)


def test_terms_sum_to_gpt2_first_layer_logits(tmp_path):
    from transformers import GPT2Model

    folder = save_tiny_gpt2(tmp_path / "gpt2")
    source = load_hf(folder)
    model = GPT2Model.from_pretrained(str(folder)).double().eval()
    windows = torch.randint(0, 100, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        block = model.h[0]
        x = block.ln_1(model.wte(windows) + model.wpe(torch.arange(20)))
        q, k, _ = block.attn.c_attn(x).split(32, dim=-1)
        expected = _scores(q, k, 4)
    terms = decompose_windows(windows, source.token_table, source.position_table, None, source.first_layer)
    assert_close(sum(terms.values()), expected)


def test_layernorm_split_is_exact():
    content, position = torch.randn(3, 7, 16, dtype=torch.float64), torch.randn(3, 7, 16, dtype=torch.float64)
    weight, bias = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    word, where = layernorm_split(content, position, weight, bias, 1e-5)
    expected = torch.nn.functional.layer_norm(content + position, (16,), weight, bias, eps=1e-5)
    assert_close(word + where, expected)


def test_position_only_input_has_only_the_position_term():
    position = torch.randn(5, 8, dtype=torch.float64)
    wq, wk = torch.randn(8, 8, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64)
    terms = four_terms(torch.zeros_like(position), position, wq, None, wk, None, num_heads=2)
    shares = term_shares(terms)
    assert shares == {"word-word": 0.0, "word-position": 0.0, "position-word": 0.0, "position-position": 1.0}


def test_bad_input():
    with pytest.raises(ValueError, match=r"content \(2, 4\) and position \(2, 5\) shapes differ"):
        layernorm_split(torch.zeros(2, 4), torch.zeros(2, 5), torch.ones(4), torch.zeros(4), 1e-5)
    with pytest.raises(ValueError, match="width 6 is not divisible by num_heads=4"):
        four_terms(torch.zeros(2, 6), torch.zeros(2, 6), torch.zeros(6, 6), None, torch.zeros(6, 6), None, num_heads=4)


@pytest.mark.parametrize(
    ("mixed", "verdict", "meaning"),
    [
        (0.10, "close to concatenation", "adding acts close to concatenation"),
        (0.30, "partly mixed", "more than a cheap concatenation"),
        (0.50, "mixed", "relies on the mixing that adding allows"),
    ],
)
def test_add_or_concat_follows_the_shares(mixed, verdict, meaning):
    shares = {"word-word": 0.7 * (1 - mixed), "word-position": 0.6 * mixed, "position-word": 0.4 * mixed}
    shares["position-position"] = 0.3 * (1 - mixed)
    found, sentence = add_or_concat(shares)
    assert found == verdict
    assert sentence.startswith("Why add instead of concatenate?") and meaning in sentence
    ratio = mixed / (1 - mixed)
    assert f"the mixed terms hold {mixed:.1%} of the logit magnitude against {1 - mixed:.1%}" in sentence
    assert f"({ratio:.2f}x)" in sentence
