"""check_positions on the real MiniLM and on tiny random RoBERTa / GPT-2 / Llama checkpoints."""

from __future__ import annotations

import json

import pytest
import torch

from posembed.interop.extend.position_check import check_positions, format_position_report, report_json

transformers = pytest.importorskip("transformers")

SMALL = dict(
    hidden_size=32,
    num_attention_heads=4,
    num_hidden_layers=2,
    intermediate_size=64,
    vocab_size=100,
    max_position_embeddings=64,
)


def _save(folder, model_class, config):
    torch.manual_seed(0)
    model_class(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def random_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("random_models")
    return {
        "roberta": _save(
            root / "roberta", transformers.RobertaModel, transformers.RobertaConfig(**SMALL, pad_token_id=1)
        ),
        "gpt2": _save(
            root / "gpt2",
            transformers.GPT2LMHeadModel,
            transformers.GPT2Config(n_embd=32, n_head=4, n_layer=2, vocab_size=100, n_positions=64),
        ),  # fmt: skip
        "llama": _save(
            root / "llama", transformers.LlamaForCausalLM, transformers.LlamaConfig(**SMALL, num_key_value_heads=2)
        ),
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


# ---------------------------------------------------------------------- the parts, on hand-built cases


def test_causal_is_read_from_the_architectures_first_then_from_the_model_type():
    from posembed.interop.extend.position_check import _is_causal

    assert _is_causal(transformers.BertConfig(architectures=["BertLMHeadModel"]))  # a BERT decoder
    assert not _is_causal(transformers.BertConfig(architectures=["BertModel"]))  # bert has a masked-LM head too
    assert not _is_causal(transformers.BertConfig())  # no architectures: bert is in both mappings
    assert _is_causal(transformers.LlamaConfig())  # no architectures: llama has only a causal head
    assert _is_causal(transformers.GPT2Config(architectures=None))


def _config(vocab, pad=None, bos=None, eos=None):
    from types import SimpleNamespace

    return SimpleNamespace(vocab_size=vocab, pad_token_id=pad, bos_token_id=bos, eos_token_id=eos)


@pytest.mark.parametrize(
    "vocab, pad, bos, eos, low",
    [
        (10, 0, 1, 2, 3),  # above every special id
        (10, None, None, 9, 0),  # GPT-2's eos at the top of the vocabulary does not raise the floor
        (11, 5, None, None, 0),  # 5 is not below 11 // 2 = 5
        (10, None, 4, None, 5),  # 4 is below 10 // 2
    ],
)
def test_generated_ids_avoid_the_special_ids_in_the_lower_half(tmp_path, vocab, pad, bos, eos, low):
    from posembed.interop.extend.position_check import GENERATED_LENGTHS, _token_ids

    seqs, longer, source = _token_ids(tmp_path, _config(vocab, pad, bos, eos), None)
    assert source == "generated ids (no tokenizer in the folder)"
    assert [len(s) for s in seqs] == list(GENERATED_LENGTHS) == [5, 9, 13] and len(longer) == 3 * 13
    every = [i for s in seqs for i in s] + longer
    assert min(every) == low and max(every) == vocab - 1  # 66 draws: every id of the range comes up at the ends
    # seeded: the ids are the first draws of a generator seeded with 0, in order
    generator = torch.Generator().manual_seed(0)
    assert seqs + [longer] == [torch.randint(low, vocab, (n,), generator=generator).tolist() for n in (5, 9, 13, 39)]


def test_texts_come_with_a_companion_of_the_texts_twice(minilm_path):
    from posembed.interop.extend.position_check import _token_ids

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_path))
    seqs, longer, source = _token_ids(minilm_path, None, ["one two", "three"])
    assert source == "tokenizer"
    assert seqs == [tokenizer("one two")["input_ids"], tokenizer("three")["input_ids"]]
    assert longer == tokenizer("one two three one two three")["input_ids"]


class _PaddingSensitive:
    """A stub model: hidden state of token t in row b = (position id, 100 x pads in row b).

    The position id is ``arange(T)`` unless given, so left padding shifts it; the second feature
    makes every row's output depend on how much padding the batch gave it."""

    def __init__(self):
        self.calls = []

    def __call__(self, input_ids, output_hidden_states, attention_mask=None, position_ids=None):
        self.calls.append((input_ids.clone(), attention_mask, position_ids))
        batch, width = input_ids.shape
        positions = torch.arange(width).expand(batch, width) if position_ids is None else position_ids
        pads = torch.zeros(batch) if attention_mask is None else (1 - attention_mask).sum(-1).float()
        hidden = torch.stack([positions.float(), 100 * pads[:, None].expand(batch, width)], -1)
        return type("Out", (), {"hidden_states": (hidden,)})()


def test_batch_results_name_each_setting_and_measure_each_row():
    from posembed.interop.extend.position_check import _batch_results, _hidden, _recipe

    seqs = [[7] * 9, [7] * 7, [7] * 5]  # the shortest last: a setting that skips rows shows
    model = _PaddingSensitive()
    refs = [_hidden(model, torch.tensor([s]))[0] for s in seqs]
    recipe_text, recipe = _recipe(type("C", (), {"model_type": "bert"})())
    results = _batch_results(model, seqs, refs, 0, recipe_text, recipe, [7] * 12)
    assert results == [
        ("right-padded", "model default", 100.0 * (9 - 5), True),  # rows padded by 0, 2, 4
        ("left-padded", "model default", 100.0 * (9 - 5), False),  # positions shifted by 4, pads 4: 400
        ("left-padded", recipe_text, 100.0 * (9 - 5), True),
        ("batched with a longer sequence (right-padded)", "model default", 100.0 * (12 - 5), True),  # rows 0-2, not 3
    ]
    # the pads are id 0 and the recipe's positions count the real tokens from 0
    ids, mask, positions = model.calls[5]
    assert ids[2].tolist() == [0, 0, 0, 0, 7, 7, 7, 7, 7] and positions[2].tolist() == [0, 0, 0, 0, 0, 1, 2, 3, 4]


def test_recipes_follow_the_mask():
    from posembed.interop.extend.position_check import _recipe

    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    _, plain = _recipe(type("C", (), {"model_type": "bert"})())
    assert plain(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
    text, roberta = _recipe(type("C", (), {"model_type": "roberta", "pad_token_id": 1})())
    assert roberta(mask).tolist() == [[1, 1, 2, 3, 4], [2, 3, 4, 5, 6]] and text.endswith(
        "+ 1 (padding_idx + 1 onwards)"
    )


@pytest.mark.parametrize("family, widths", [("bert", (4, 12)), ("roberta", (3, 10))])
def test_sequences_are_cut_to_the_position_table(tmp_path, monkeypatch, family, widths):
    """A 12-row table: BERT takes 12 tokens, RoBERTa 10 (its rows 0 and 1 are below the first position);
    the three generated sequences share it (12 // 3 or 10 // 3 tokens each), the companion takes all."""
    from posembed.interop.extend import position_check

    small = dict(
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=32,
        vocab_size=50,
        max_position_embeddings=12,
    )
    if family == "bert":
        folder = _save(tmp_path / "bert", transformers.BertModel, transformers.BertConfig(**small))
    else:
        folder = _save(
            tmp_path / "roberta", transformers.RobertaModel, transformers.RobertaConfig(**small, pad_token_id=1)
        )
    shapes = []
    real = position_check._hidden
    monkeypatch.setattr(
        position_check, "_hidden", lambda model, ids, **kw: shapes.append(tuple(ids.shape)) or real(model, ids, **kw)
    )
    report = check_positions(folder)
    each, longest = widths
    assert shapes[:3] == [(1, each)] * 3  # the unpadded references
    assert shapes[-1] == (4, longest)  # batched with the companion
    assert report.ok and len(report.results) == 4


def test_the_default_tolerance_and_a_difference_equal_to_it(random_models):
    report = check_positions(random_models["llama"])
    assert report.tolerance == 1e-4 and "result: OK (tolerance 0.0001, fp32)" in format_position_report(report)
    measured = next(r for r in report.results if r.max_diff > 0)
    again = check_positions(random_models["llama"], tolerance=measured.max_diff)  # the same computation
    assert {(r.setting, r.positions): r.passed for r in again.results}[(measured.setting, measured.positions)]
    assert all(r.passed == (r.max_diff <= measured.max_diff) for r in again.results)


def test_generated_ids_are_padded_with_0_without_a_pad_id_and_with_it_otherwise(random_models, monkeypatch):
    from posembed.interop.extend import position_check

    seen = []
    real = position_check._hidden
    monkeypatch.setattr(
        position_check, "_hidden", lambda model, ids, **kw: seen.append((ids, kw)) or real(model, ids, **kw)
    )
    for name, pad in (("llama", 0), ("roberta", 1)):  # llama has no pad_token_id
        seen.clear()
        check_positions(random_models[name])
        ids, kw = next((ids, kw) for ids, kw in seen if "attention_mask" in kw and ids.shape[0] > 1)
        padded = ids[kw["attention_mask"] == 0]
        assert len(padded) > 0 and set(padded.tolist()) == {pad}
