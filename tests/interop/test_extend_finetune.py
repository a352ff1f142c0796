"""posembed.interop.extend.finetune: the checks, the tuning pairs, the embedding and the record,
on hand-built token lists, a stub model and a 1-layer random BERT (seconds on a CPU)."""

from __future__ import annotations

import logging
import math
import random
from types import SimpleNamespace

import pytest
import torch

from posembed.interop.extend import finetune
from posembed.interop.extend.finetune import TEMPERATURE, _check, _embed, _pairs, _with_table, tune_new_rows
from posembed.interop.extend.methods import copy_rows
from posembed.interop.extend.retrieval_data import corpus_tokens, default_text, split_text
from tests.helpers import save_random_bert

transformers = pytest.importorskip("transformers")


# ---------------------------------------------------------------------- the checks, at each bound


def test_check_refuses_each_bad_argument_at_its_bound():
    table = torch.zeros(10, 4)
    _check(table, 1, 1, 2, 3, 1)  # every argument at its smallest accepted value
    _check(table, 9, 1, 2, 3, 2)  # trained_rows and query at their largest
    cases = [
        ((torch.zeros(10), 5, 1, 2, 3, 1), r"must be 2-D \(N, C\), got shape \(10,\)"),
        ((torch.zeros(10, 4, 1), 5, 1, 2, 3, 1), r"must be 2-D \(N, C\), got shape \(10, 4, 1\)"),
        ((table, 5, 0, 2, 3, 1), "positive number of steps, got 0"),
        ((table, 5, True, 2, 3, 1), "positive number of steps, got True"),
        ((table, 5, 1.0, 2, 3, 1), "positive number of steps, got 1.0"),
        ((table, 0, 1, 2, 3, 1), r"trained_rows must lie in 1\.\.9, got 0"),
        ((table, 10, 1, 2, 3, 1), r"trained_rows must lie in 1\.\.9, got 10"),
        ((table, 5, 1, 1, 3, 1), "batch must be at least 2"),
        ((table, 5, 1, 2, 3, 0), r"query \(0\) must be shorter"),
        ((table, 5, 1, 2, 3, 3), r"query \(3\) must be shorter than the passage \(3\)"),
    ]
    for arguments, message in cases:
        with pytest.raises(ValueError, match=message):
            _check(*arguments)


# ---------------------------------------------------------------------- the pairs


def test_pairs_skips_span_exactly_the_rows_where_the_passage_reaches_the_new_ones():
    # a passage of 8 at skip u sits at positions u + 1 .. u + 8 and its [SEP] at u + 9 < rows;
    # it reaches the new rows (>= 20) with at least half of it once u >= 20 - 8 // 2 = 16
    tokens, starts = list(range(500)), [True] * 500
    passages, queries, skips = _pairs(tokens, starts, random.Random(0), 400, 8, 3, trained_rows=20, rows=30)
    assert set(skips) == set(range(16, 30 - 8 - 2 + 1))  # 16 .. 20, every one of them drawn
    assert all(skip + 8 + 1 <= 29 for skip in skips)
    # a passage longer than twice the trained rows may start at 0
    _, _, skips = _pairs(tokens, starts, random.Random(1), 400, 8, 3, trained_rows=3, rows=14)
    assert set(skips) == {0, 1, 2, 3, 4}  # lowest max(0, 3 - 4) = 0, highest 14 - 10 = 4
    # an odd passage of 9 puts at least 4 of its tokens in the new rows: u >= 20 - 9 // 2 = 16
    _, _, skips = _pairs(tokens, starts, random.Random(5), 400, 9, 3, trained_rows=20, rows=31)
    assert set(skips) == set(range(16, 31 - 9 - 2 + 1))


def test_pairs_spans_are_whole_passages_and_queries_are_pieces_of_them():
    tokens, starts = list(range(40)), [True] * 40
    passages, queries, _ = _pairs(tokens, starts, random.Random(2), 600, 8, 3, trained_rows=10, rows=30)
    assert all(len(p) == 8 and p == list(range(p[0], p[0] + 8)) for p in passages)
    # every start whose span fits, one token kept spare at the end: 0 .. 40 - 8 - 1
    assert {p[0] for p in passages} == set(range(40 - 8))
    assert all(len(q) == 3 for q in queries)
    offsets = {q[0] - p[0] for p, q in zip(passages, queries)}
    assert offsets == set(range(8 - 3 + 1))  # the query may be any piece, the last one included
    assert all(q == p[q[0] - p[0] : q[0] - p[0] + 3] for p, q in zip(passages, queries))


def test_pairs_begin_where_a_word_begins():
    tokens = list(range(60))
    starts = [i % 5 == 0 for i in range(60)]  # words of 5 tokens
    passages, _, _ = _pairs(tokens, starts, random.Random(3), 300, 8, 2, trained_rows=10, rows=30)
    assert {p[0] for p in passages} == set(range(0, 60 - 8, 5))  # each word start up to 51 (-> 50)
    # a corpus whose first token does not start a word: a span may start there, never before it
    starts = [False, False, False] + [True] * 57
    passages, _, _ = _pairs(tokens, starts, random.Random(4), 300, 8, 2, trained_rows=10, rows=30)
    assert all(len(p) == 8 for p in passages)
    assert min(p[0] for p in passages) == 0 and 1 not in {p[0] for p in passages} and 2 not in {p[0] for p in passages}


# ---------------------------------------------------------------------- the embedding


class _Tokenizer:
    cls_token_id, sep_token_id = 101, 102


class _Recorder(torch.nn.Module):
    """Hidden state of token t = (input id, position id, 1): mean pooling is then checkable by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict] = []

    def forward(self, input_ids, position_ids=None, token_type_ids=None):
        self.calls.append({"input_ids": input_ids, "position_ids": position_ids, "token_type_ids": token_type_ids})
        positions = torch.arange(input_ids.shape[1]).expand_as(input_ids) if position_ids is None else position_ids
        hidden = torch.stack([input_ids.float(), positions.float(), torch.ones_like(input_ids, dtype=torch.float)], -1)
        return type("Out", (), {"last_hidden_state": hidden})()


def test_embed_places_cls_at_zero_and_the_piece_after_the_skip():
    model = _Recorder()
    vectors = _embed(model, _Tokenizer(), [[5, 6, 7], [8, 9, 10]], [40, 3])
    call = model.calls[-1]
    assert call["input_ids"].tolist() == [[101, 5, 6, 7, 102], [101, 8, 9, 10, 102]]
    assert call["position_ids"].tolist() == [[0, 41, 42, 43, 44], [0, 4, 5, 6, 7]]
    assert call["token_type_ids"].tolist() == [[0] * 5, [0] * 5]
    # row 0: mean of ids (101 + 18 + 102) / 5, of positions 170 / 5, of ones 1; then unit length
    for row, (ids, positions) in enumerate(((101 + 5 + 6 + 7 + 102, 0 + 41 + 42 + 43 + 44), (101 + 27 + 102, 22))):
        mean = torch.tensor([ids / 5, positions / 5, 1.0])
        torch.testing.assert_close(vectors[row], mean / mean.norm(), rtol=1e-6, atol=0)


def test_embed_without_skips_uses_the_models_own_positions():
    model = _Recorder()
    vectors = _embed(model, _Tokenizer(), [[5, 6]], None)
    assert model.calls[-1]["position_ids"] is None and model.calls[-1]["token_type_ids"] is None
    mean = torch.tensor([(101 + 5 + 6 + 102) / 4, (0 + 1 + 2 + 3) / 4, 1.0])
    torch.testing.assert_close(vectors[0], mean / mean.norm(), rtol=1e-6, atol=0)


def test_with_table_needs_a_model_that_takes_position_ids():
    with pytest.raises(ValueError, match="forward takes position_ids; Linear does not"):
        _with_table(torch.nn.Linear(2, 2), torch.nn.Parameter(torch.zeros(4, 2)))


# ---------------------------------------------------------------------- tuning a 1-layer BERT


@pytest.fixture(scope="module")
def tiny_bert(minilm_path, tmp_path_factory):
    return save_random_bert(
        tmp_path_factory.mktemp("finetune") / "bert", minilm_path, hidden_size=16, max_position_embeddings=32
    )


@pytest.fixture(scope="module")
def short_text(tinyshakespeare, tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text(tinyshakespeare.read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    return path


def _table(folder):
    return transformers.BertModel.from_pretrained(str(folder)).embeddings.position_embeddings.weight.detach()


def test_the_record_holds_the_first_loss_and_the_mean_of_the_last_25(tiny_bert, short_text, monkeypatch):
    seen = []
    real = torch.nn.functional.cross_entropy

    def recording(logits, target, *args, **kwargs):
        loss = real(logits, target, *args, **kwargs)
        seen.append((logits.detach().clone(), target.clone(), float(loss.detach())))
        return loss

    monkeypatch.setattr(torch.nn.functional, "cross_entropy", recording)
    table = copy_rows(_table(tiny_bert), 48)
    tuned, record = tune_new_rows(tiny_bert, table, 32, steps=30, text=short_text, seed=5, batch=3, passage=8, query=2)
    losses = [loss for _, _, loss in seen]
    assert len(losses) == 30
    assert record["loss_first"] == round(losses[0], 4)
    assert record["loss_last_25"] == round(sum(losses[5:]) / 25, 4)
    assert record["loss_last_25"] != round(sum(losses[4:]) / 26, 4)  # the 26 last would differ
    assert {
        k: record[k] for k in ("steps", "seed", "batch", "passage_tokens", "query_tokens", "lr", "temperature")
    } == {"steps": 30, "seed": 5, "batch": 3, "passage_tokens": 8, "query_tokens": 2, "lr": 5e-4, "temperature": 0.05}
    for logits, target, _ in seen:
        # cosines of unit vectors over the temperature: within +-20, and the diagonal is the target
        assert logits.shape == (3, 3) and target.tolist() == [0, 1, 2]
        assert logits.abs().max() <= 1 / TEMPERATURE + 1e-4 and logits.abs().max() > 1.0
    assert torch.equal(tuned[:32], table[:32]) and not torch.equal(tuned[32:], table[32:])
    assert all(not torch.equal(tuned[p], table[p]) for p in range(32, 48))  # each new row moved


def test_tuning_keeps_the_dtype_and_the_trained_rows_bit_for_bit(tiny_bert, short_text):
    table = copy_rows(_table(tiny_bert), 40).to(torch.bfloat16)
    tuned, record = tune_new_rows(tiny_bert, table, 32, steps=2, text=short_text, batch=2, passage=8, query=2)
    assert tuned.dtype == torch.bfloat16 and tuned.shape == (40, 16)
    assert torch.equal(tuned[:32], table[:32])
    assert record["steps"] == 2 and math.isfinite(record["loss_first"])


def test_a_passage_that_cannot_reach_the_new_rows_is_refused_before_anything_is_read(
    tiny_bert, short_text, monkeypatch
):
    # a passage of 8 at skip u needs u + 9 < rows and u >= 32 - 4: rows >= 38 (u = 28 is the only skip)
    monkeypatch.setattr(finetune, "_pairs", lambda *a: pytest.fail("drew pairs"))
    for rows in (37, 33):
        with pytest.raises(ValueError, match=f"8-token passage does not fit the {rows - 32} new rows"):
            tune_new_rows(tiny_bert / "absent", torch.zeros(rows, 16), 32, steps=1, passage=8, query=2)
    monkeypatch.undo()
    # the smallest table that fits is tuned (it used to pass the check and then fail to draw a skip)
    table = copy_rows(_table(tiny_bert), 38)
    tuned, _ = tune_new_rows(tiny_bert, table, 32, steps=1, text=short_text, batch=2, passage=8, query=2)
    assert torch.equal(tuned[:32], table[:32]) and not torch.equal(tuned[32:], table[32:])
    # a 40-token passage over 8 trained rows may start at position 1 (lowest skip 0): 42 rows suffice
    small = copy_rows(_table(tiny_bert)[:8], 42)
    with pytest.raises(ValueError, match="40-token passage does not fit the 33 new rows"):
        tune_new_rows(tiny_bert, small[:41], 8, steps=1, text=short_text, batch=2, passage=40, query=2)
    tuned, _ = tune_new_rows(tiny_bert, small, 8, steps=1, text=short_text, batch=2, passage=40, query=2)
    assert torch.equal(tuned[:8], small[:8])


@pytest.mark.slow
def test_defaults_the_shipped_text_its_first_nine_tenths_and_no_progress(tiny_bert, monkeypatch, caplog):
    """Called with only the steps: seed 0, 8 pairs of a 64-token passage and a 12-token query, the
    shipped text's training part (the benchmark's last tenth never trains), no progress lines."""
    drawn = []
    real = finetune._pairs
    monkeypatch.setattr(finetune, "_pairs", lambda tokens, *a: drawn.append(tokens) or real(tokens, *a))
    table = copy_rows(_table(tiny_bert), 100)
    with caplog.at_level(logging.INFO, logger=finetune.__name__):
        tuned, record = tune_new_rows(tiny_bert, table, 32, steps=1)
    assert {k: record[k] for k in ("seed", "batch", "passage_tokens", "query_tokens", "lr", "text")} == {
        "seed": 0,
        "batch": 8,
        "passage_tokens": 64,
        "query_tokens": 12,
        "lr": 5e-4,
        "text": str(default_text()),
    }
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tiny_bert))
    training, benchmark = split_text(default_text().read_text(encoding="utf-8"))
    assert drawn[0] == corpus_tokens(tokenizer, training)[0]
    assert len(drawn[0]) < len(corpus_tokens(tokenizer, training + benchmark)[0])
    assert not [r for r in caplog.records if "tuning new rows" in r.getMessage()]


def test_one_step_is_adam_without_weight_decay_on_the_new_rows_only(tiny_bert, short_text, monkeypatch, caplog):
    made = []
    real = torch.optim.Adam
    monkeypatch.setattr(torch.optim, "Adam", lambda params, **kw: made.append(kw) or real(params, **kw))
    loaded = []
    load = transformers.AutoModel.from_pretrained
    monkeypatch.setattr(
        transformers.AutoModel, "from_pretrained", lambda *a, **kw: loaded.append(load(*a, **kw)) or loaded[-1]
    )
    clock = iter([100.0, 103.14159])  # the start and the end of the tuning
    monkeypatch.setattr(finetune, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    table = copy_rows(_table(tiny_bert), 48)
    with caplog.at_level(logging.INFO, logger=finetune.__name__):
        tuned, record = tune_new_rows(
            tiny_bert, table, 32, steps=1, text=short_text, batch=4, passage=8, query=2, lr=1e-3, progress="lines"
        )
    assert made == [{"lr": 1e-3, "weight_decay": 0.0}]
    # every weight but the table frozen: no gradient computed for any of them
    (model,) = loaded
    others = [p for name, p in model.named_parameters() if name != "embeddings.position_embeddings.weight"]
    assert others and all(not p.requires_grad and p.grad is None for p in others)
    # Adam's first step moves every element with a gradient by lr * g / (|g| + eps): lr, to float32 rounding
    moved = (tuned[32:] - table[32:]).abs()
    assert torch.equal(tuned[:32], table[:32]) and moved.max() <= 1e-3 * (1 + 1e-5)
    assert ((moved - 1e-3).abs() < 1e-6).sum() > 0.5 * moved.numel()
    assert record["seconds"] == 3.1  # to a tenth of a second
    messages = [r.getMessage() for r in caplog.records]
    assert sum("tuning new rows: 1/1 done (loss" in m for m in messages) == 1
    assert (
        f"tuned rows 32..47 in 1 steps: loss {record['loss_first']:.4g} after one step (nothing to compare it with)"
        in messages
    )
    assert all(r.levelname == "INFO" for r in caplog.records)  # one step: no trend, no warning


@pytest.mark.parametrize(
    "first, last, steps, words",
    [
        (0.083, 0.163, 5, "loss rose from 0.083 (first step) to 0.163 (mean of the last 5): 5 steps did not lower it"),
        (
            0.2,
            0.2,
            30,
            "loss did not fall from 0.2 (first step) to 0.2 (mean of the last 25): 30 steps did not lower it",
        ),
        (0.2, 0.1999, 30, "loss fell from 0.2 (first step) to 0.1999 (mean of the last 25)"),
        (0.41, 0.12, 60, "loss fell from 0.41 (first step) to 0.12 (mean of the last 25)"),
        (0.3, 0.3, 1, "loss 0.3 after one step (nothing to compare it with)"),
    ],
)
def test_a_loss_that_does_not_fall_is_said_to(first, last, steps, words):
    from posembed.interop.extend.finetune import describe_loss

    text = describe_loss({"steps": steps, "loss_first": first, "loss_last_25": last})
    assert text.startswith(words)
    assert ("tune more steps, or none" in text) == (last >= first and steps > 1)


@pytest.mark.parametrize("rises", [True, False])
def test_the_tuning_log_warns_exactly_when_the_loss_did_not_fall(tiny_bert, short_text, monkeypatch, caplog, rises):
    from posembed.interop.extend import finetune

    losses = iter([0.1, 0.3, 0.3] if rises else [0.3, 0.1, 0.1])
    real = torch.nn.functional.cross_entropy
    monkeypatch.setattr(
        torch.nn.functional, "cross_entropy", lambda *a, **k: real(*a, **k) * 0 + next(losses)
    )  # the loss the run sees, its gradient zero
    caplog.set_level("INFO", logger=finetune.logger.name)
    _, record = tune_new_rows(
        tiny_bert, copy_rows(_table(tiny_bert), 48), 32, steps=3, text=short_text, batch=3, passage=8, query=2
    )
    (summary,) = [r for r in caplog.records if "tuned rows" in r.getMessage()]
    assert (summary.levelname == "WARNING") == rises
    assert ("loss rose from 0.1" in summary.getMessage()) == rises and record["loss_last_25"] == (
        0.2333 if rises else 0.1667
    )
