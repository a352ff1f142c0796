"""Tasks: order classification (bag of words at chance), algorithmic length generalisation, char LM."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posembed.lab.config import TASKS, TrialConfig
from posembed.lab.data import CharCorpus, load_text
from posembed.lab.task_registry import ENTRIES, TaskEntry
from posembed.lab.tasks import IGNORE, TABLE_LIMIT, make_task
from posembed.lab.tasks.algorithmic import algorithm, make_example, sequence_length
from posembed.lab.tasks.charlm import CharLMTask
from posembed.lab.tasks.make import task_class
from posembed.lab.tasks.order import order_batch
from posembed.lab.training.train import build_trial_model
from tests.lab.conftest import tiny_trial


def _flip(ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """Swap tokens A and B: same bag of words, opposite label."""
    flipped = ids.clone()
    flipped[ids == vocab] = vocab + 1
    flipped[ids == vocab + 1] = vocab
    return flipped


@given(seed=st.integers(0, 2**31 - 1), length=st.integers(2, 40), vocab=st.integers(1, 20))
@settings(max_examples=40, deadline=None)
def test_order_labels_follow_a_before_b_and_bags_are_label_free(seed, length, vocab):
    batch = order_batch(torch.Generator().manual_seed(seed), 8, length, vocab)
    ids = batch.input_ids
    assert ((ids == vocab).sum(1) == 1).all() and ((ids == vocab + 1).sum(1) == 1).all()
    a_first = (ids == vocab).int().argmax(1) < (ids == vocab + 1).int().argmax(1)
    assert torch.equal(a_first.long(), batch.targets)
    # the flipped twin has the same multiset of tokens but the other label
    assert torch.equal(_flip(ids, vocab).sort(1).values, ids.sort(1).values)


def test_position_free_encoder_is_at_chance_on_order():
    """Without positions, an example and its label-flipped twin get the same prediction."""
    cfg = tiny_trial(task="order", scheme="nope", context=10, vocab=6)
    task = make_task(cfg)
    model = build_trial_model(cfg, task).eval()
    batch = order_batch(torch.Generator().manual_seed(1), 16, 10, 6)
    # the twin is the same bag in another order: a permutation of the tokens
    with torch.no_grad():
        logits, twin = model(batch.input_ids), model(_flip(batch.input_ids, 6))
    torch.testing.assert_close(logits, twin, atol=1e-5, rtol=1e-5)
    # while a model with positions tells them apart
    learned = build_trial_model(tiny_trial(task="order", scheme="learned", context=10, vocab=6), task).eval()
    with torch.no_grad():
        assert (learned(batch.input_ids) - learned(_flip(batch.input_ids, 6))).abs().max() > 1e-4


@given(digits=st.lists(st.integers(0, 9), min_size=2, max_size=16).filter(lambda d: len(d) % 2 == 0))
@settings(max_examples=50, deadline=None)
def test_addition_example_matches_integer_addition(digits):
    n = len(digits) // 2
    prompt, answer = make_example("addition", digits, 10)

    def as_int(ds):  # least significant digit first
        return sum(d * 10**i for i, d in enumerate(ds))

    assert prompt == digits[:n] + [-1] + digits[n:]
    assert len(answer) == n + 1 and as_int(answer) == as_int(digits[:n]) + as_int(digits[n:])


def test_copy_reverse_sort_examples():
    x = [3, 1, 2, 1]
    assert make_example("copy", x, 10) == (x, [3, 1, 2, 1])
    assert make_example("reverse", x, 10) == (x, [1, 2, 1, 3])
    assert make_example("sort", x, 10) == (x, [1, 1, 2, 3])
    with pytest.raises(ValueError, match="unknown algorithmic task 'parity'"):
        make_example("parity", x, 10)


@pytest.mark.parametrize("name", ["copy", "reverse", "sort", "addition"])
def test_algorithmic_batches_score_only_the_answer(name):
    task = algorithm(name)(tiny_trial(task=name, context=5))
    batch = task.batch(torch.Generator().manual_seed(0), [5, 2])
    assert batch.input_ids.shape == (2, sequence_length(name, 5))
    n_answer = (6 if name == "addition" else 5) + 1  # answer tokens + EOS
    scored = batch.targets != IGNORE
    assert scored.sum(1).tolist() == [n_answer, (3 if name == "addition" else 2) + 1]
    row = batch.input_ids[0]
    sep = int((row == task.sep).nonzero()[0])
    # targets are the next tokens from SEP on; the last scored target is EOS
    assert torch.equal(batch.targets[0, sep:-1], row[sep + 1 :])
    assert int(batch.targets[0][scored[0]][-1]) == task.eos
    if name == "reverse":
        assert torch.equal(row[sep + 1 : sep + 6], row[:5].flip(0))


def test_exact_match_is_one_for_a_perfect_model_and_zero_for_a_wrong_one():
    task = algorithm("copy")(tiny_trial(task="copy", context=3, eval_scales=(1.0, 2.0)))

    class Oracle(torch.nn.Module):
        def __init__(self, shift: int):
            super().__init__()
            self.shift = shift

        def forward(self, ids, position_ids=None):
            # the answer is the prompt again: predict token t+1 by copying from n+1 back
            n = (ids.shape[1] - 1) // 2
            nxt = torch.full_like(ids, task.pad)
            nxt[:, n : 2 * n] = ids[:, :n]
            nxt[:, 2 * n] = task.eos
            return torch.nn.functional.one_hot((nxt + self.shift) % task.vocab_size, task.vocab_size).float()

    perfect = task.evaluate(Oracle(0), torch.Generator().manual_seed(0), None)
    wrong = task.evaluate(Oracle(1), torch.Generator().manual_seed(0), None)
    assert [(p.length, p.value) for p in perfect] == [(3, 1.0), (6, 1.0)]
    assert [p.value for p in wrong] == [0.0, 0.0]
    limited = task.evaluate(Oracle(0), torch.Generator().manual_seed(0), limit=sequence_length("copy", 3))
    assert [(p.length, p.value, p.note) for p in limited] == [(3, 1.0, ""), (6, None, TABLE_LIMIT)]


def test_char_corpus_split_and_batches(tinyshakespeare):
    cfg = tiny_trial(task="charlm", context=8, text=str(tinyshakespeare), eval_scales=(1.0, 8.0))
    task = CharLMTask(cfg)
    text = tinyshakespeare.read_text(encoding="utf-8")
    assert task.vocab_size == len(set(text)) == 65
    assert len(task.corpus.train) == int(0.9 * len(text)) and len(task.corpus.val) == len(text) - int(0.9 * len(text))
    batch = task.train_batch(torch.Generator().manual_seed(0), 4)
    assert batch.input_ids.shape == batch.targets.shape == (4, 8)
    assert torch.equal(batch.input_ids[:, 1:], batch.targets[:, :-1])
    assert task.max_length() == 64


def test_charlm_records_table_limit_instead_of_crashing(tinyshakespeare):
    cfg = tiny_trial(
        task="charlm",
        scheme="learned",
        context=8,
        table_size=16,
        text=str(tinyshakespeare),
        eval_scales=(1.0, 2.0, 4.0),
    )
    task = make_task(cfg)
    model = build_trial_model(cfg, task).eval()
    points = task.evaluate(model, torch.Generator().manual_seed(0), model.scheme.max_positions)
    by = {(p.metric, p.length): p for p in points}
    assert by[("val_loss", 8)].value is not None and by[("val_loss", 16)].value is not None
    assert by[("val_loss", 32)].value is None and by[("val_loss", 32)].note == TABLE_LIMIT
    assert by[("perplexity", 8)].value == pytest.approx(torch.tensor(by[("val_loss", 8)].value).exp().item())


def test_charlm_scores_its_validation_windows_with_the_one_loss_to_the_digit(tinyshakespeare):
    # a bigram model that knows the text's next-character table exactly where it counts: the loss of
    # each evaluated length is the mean -log p over exactly eval_batches * batch windows of it, batch at a time
    cfg = tiny_trial(
        task="charlm", context=8, text=str(tinyshakespeare), eval_scales=(1.0, 4.0), batch=3, eval_batches=2
    )
    task = CharLMTask(cfg)
    vocab = task.vocab_size
    log_p = torch.log_softmax(
        torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(0), dtype=torch.float64), -1
    )
    calls = []

    def bigram(ids):  # (B, T) -> (B, T, V)
        calls.append(tuple(ids.shape))
        return log_p[ids]

    points = {(p.metric, p.length): p.value for p in task.evaluate(bigram, torch.Generator(), None)}
    val = task.corpus.val
    for length in (8, 32):
        scored = 6 * length  # 2 batches of 3 windows, consecutive from the split's first character
        expected = -float(log_p[val[:scored], val[1 : scored + 1]].sum()) / scored
        assert points[("val_loss", length)] == pytest.approx(expected, rel=1e-6)
        assert points[("perplexity", length)] == pytest.approx(math.exp(expected), rel=1e-6)
    # matched text: the last 8 characters of 6 windows ending every 32, the same at both lengths (a bigram
    # model reads no farther), where the all-positions losses above score different text
    targets = torch.cat([torch.arange(end - 7, end + 1) for end in range(32, 7 * 32, 32)])
    matched = -float(log_p[val[targets - 1], val[targets]].sum()) / len(targets)
    assert points[("matched_loss", 8)] == pytest.approx(matched, rel=1e-6)
    assert points[("matched_loss", 32)] == pytest.approx(matched, rel=1e-6)
    assert points[("val_loss", 8)] != pytest.approx(points[("val_loss", 32)], rel=1e-3)
    # at the longest length the consecutive windows are the matched ones: one pass scores both
    assert calls == [(3, 8), (3, 8), (3, 8), (3, 8), (3, 32), (3, 32)]


def test_charlm_one_pass_at_the_longest_length_is_bit_for_bit_the_two_losses(tinyshakespeare):
    # the shared pass must not move a stored number: each loss equals its own function's to the bit
    from posembed.lab.tasks.perplexity import matched_loss, val_loss

    cfg = tiny_trial(
        task="charlm",
        scheme="rope",
        context=8,
        text=str(tinyshakespeare),
        eval_scales=(1.0, 2.0, 4.0),
        batch=5,
        eval_batches=3,
    )
    task = make_task(cfg)
    torch.manual_seed(3)
    model = build_trial_model(cfg, task).eval()
    points = {(p.metric, p.length): p.value for p in task.evaluate(model, torch.Generator(), None)}
    val, windows = task.corpus.val, 15
    for length in (8, 16, 32):
        assert points[("val_loss", length)] == val_loss(model, val, length, windows=windows, batch=5)
        assert points[("matched_loss", length)] == matched_loss(
            model, val, length, scored=8, span=32, windows=windows, batch=5
        )


@pytest.mark.parametrize(
    "content, message",
    [(b"", "is empty"), (b"short text", "has 10 characters, shorter than"), (b"\xff\xfe\x00abc" * 100, "is not UTF-8")],
)
def test_bad_text_files(tmp_path, content, message):
    path = tmp_path / "t.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_text(path, min_chars=100)


def test_missing_text_file_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make_task(TrialConfig(task="charlm", text=str(tmp_path / "nope.txt")))
    with pytest.raises(ValueError, match="is a folder, not a text file"):
        make_task(TrialConfig(task="charlm", text=str(tmp_path)))


def test_char_corpus_decode_round_trip():
    corpus = CharCorpus("hello world")
    ids = [corpus.stoi[c] for c in "low"]
    assert corpus.decode(ids) == "low"


# ---------------------------------------------------------------------- the task registry


def test_the_registry_is_the_one_table_of_task_names():
    assert TASKS == {entry.name: entry.model for entry in ENTRIES}
    for entry in ENTRIES:
        cfg = tiny_trial(task=entry.name, context=4)
        if entry.name == "charlm":
            continue  # needs a text file (test_charlm_* build it)
        task = make_task(cfg)
        assert type(task).__name__ == entry.where.partition(":")[2] and task.name == entry.name
        points = task.evaluate(None, torch.Generator().manual_seed(0), limit=0)  # every length past the limit
        assert {p.metric for p in points} == {entry.metric} and all(p.note == TABLE_LIMIT for p in points)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"model": "seq2seq"}, "task 'x': model must be one of ('decoder', 'encoder'), got 'seq2seq'"),
        (
            {"where": "order.OrderTask"},
            "task 'x': where must be 'module:Class' in posembed.lab.tasks, got 'order.OrderTask'",
        ),
        ({"where": "order:"}, "task 'x': where must be 'module:Class' in posembed.lab.tasks, got 'order:'"),
    ],
)
def test_a_bad_registry_entry_is_refused(fields, message):
    with pytest.raises(ValueError) as error:
        TaskEntry(**{"name": "x", "model": "decoder", "where": "order:OrderTask", **fields})
    assert str(error.value) == message


def test_unknown_names_are_clear_errors():
    with pytest.raises(ValueError, match=r"unknown task 'cpy' \(did you mean 'copy'\?\); known: order, copy"):
        task_class("cpy")
    with pytest.raises(ValueError, match="unknown algorithmic task 'order'"):
        sequence_length("order", 4)
