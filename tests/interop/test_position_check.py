"""check_positions on the real MiniLM and on tiny random RoBERTa / GPT-2 / Llama checkpoints."""

from __future__ import annotations

import json

import pytest
import torch

from posembed.interop.extend.position_check import check_positions, format_position_report, report_json

transformers = pytest.importorskip("transformers")

SMALL = dict(hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=64, vocab_size=100, max_position_embeddings=64)


def _save(folder, model_class, config):
    torch.manual_seed(0)
    model_class(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def random_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("random_models")
    return {
        "roberta": _save(root / "roberta", transformers.RobertaModel, transformers.RobertaConfig(**SMALL, pad_token_id=1)),
        "gpt2": _save(root / "gpt2", transformers.GPT2LMHeadModel,
                      transformers.GPT2Config(n_embd=32, n_head=4, n_layer=2, vocab_size=100, n_positions=64)),  # fmt: skip
        "llama": _save(root / "llama", transformers.LlamaForCausalLM, transformers.LlamaConfig(**SMALL, num_key_value_heads=2)),
    }


def _by_setting(report) -> dict[tuple[str, str], bool]:
    return {(r.setting, r.positions): r.passed for r in report.results}


def test_minilm_left_padding_needs_position_ids(minilm_path):
    report = check_positions(minilm_path)
    assert report.ids_source == "tokenizer" and not report.causal
    passed = _by_setting(report)
    assert passed[("right-padded", "model default")]
    assert not passed[("left-padded", "model default")]  # learned absolute positions shift
    assert passed[("left-padded", report.recipe)]
    assert report.ok
    assert "fail (the trap" in format_position_report(report)


def test_roberta_numbers_positions_from_padding_idx(random_models):
    report = check_positions(random_models["roberta"])
    assert "generated ids" in report.ids_source
    assert "padding_idx + 1" in report.position_kind and "+ 1" in report.recipe
    assert all(r.passed for r in report.results)  # transformers derives RoBERTa's positions from the pad ids


def test_gpt2_left_padding_and_packing(random_models):
    report = check_positions(random_models["gpt2"])
    passed = _by_setting(report)
    assert report.causal and report.ok
    assert not passed[("left-padded", "model default")]
    assert passed[("left-padded", "position_ids = cumsum(mask) - 1 (pads clamped to 0)")]
    assert not passed[("packed documents, causal mask", "positions per document")]  # attends across documents
    assert not passed[("packed documents, block-diagonal mask", "positions running on")]  # absolute positions shift
    assert passed[("packed documents, block-diagonal mask", "positions per document")]


def test_llama_rotary_positions_are_shift_invariant(random_models):
    report = check_positions(random_models["llama"])
    passed = _by_setting(report)
    assert report.ok and report.position_kind.startswith("rotary")
    assert passed[("left-padded", "model default")]  # a shift of all positions cancels in RoPE
    assert passed[("packed documents, block-diagonal mask", "positions running on")]
    assert not passed[("packed documents, causal mask", "positions running on")]
    data = json.loads(json.dumps(report_json(report)))
    assert data["ok"] is True and len(data["results"]) == 8


def test_bad_inputs(tmp_path, random_models):
    with pytest.raises(FileNotFoundError):
        check_positions(tmp_path / "missing")
    with pytest.raises(ValueError, match="not a checkpoint"):
        check_positions(tmp_path)
    with pytest.raises(ValueError, match="no tokenizer"):
        check_positions(random_models["llama"], texts=["hello"])
