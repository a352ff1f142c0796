"""The chunked embedding path on an oversubscribed host: fewer, larger chunks, the same bits.

``posembed.fused.embedding`` splits the rows into cache-sized chunks; with several threads on
a host whose load exceeds its cores it takes :data:`BUSY_CHUNK_ELEMENTS` instead (each chunk's
ops end in OpenMP barriers that stall when a thread is descheduled). The host's state is mocked
here both ways; the outputs must be bit-identical to ``BertEmbeddings`` and to each other.
"""

from __future__ import annotations

import pytest
import torch

import posembed.fused.embedding as fused
from posembed.bench.harness import missed_explanations, oversubscribed

transformers = pytest.importorskip("transformers")


@pytest.fixture
def host(monkeypatch):
    """Set the host's state: ``host(busy, threads)``."""

    def set_state(busy: bool, threads: int = 2):
        monkeypatch.setattr(fused, "host_oversubscribed", lambda: busy)
        monkeypatch.setattr(fused.torch, "get_num_threads", lambda: threads)

    return set_state


@pytest.mark.parametrize("busy, threads, expected", [
    (False, 2, fused.CHUNK_ELEMENTS), (True, 1, fused.CHUNK_ELEMENTS), (True, 2, fused.BUSY_CHUNK_ELEMENTS),
])  # fmt: skip
def test_large_chunks_only_with_several_threads_on_a_busy_host(host, busy, threads, expected):
    host(busy, threads)
    assert fused.chunk_elements() == expected
    assert len(fused._chunks(16384, 768, adapt=True)) == -(-16384 // (expected // 768))
    assert fused.chunk_elements(adapt=False) == fused.CHUNK_ELEMENTS  # dropout and the backward never adapt


def test_the_load_reading_compares_the_load_with_the_usable_cores(monkeypatch):
    monkeypatch.setattr(fused, "_load_reading", [float("-inf"), False])
    monkeypatch.setattr(fused.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(fused.os, "getloadavg", lambda: (2.5, 1.0, 1.0))
    assert fused.host_oversubscribed() is True
    monkeypatch.setattr(fused.os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    assert fused.host_oversubscribed() is True  # the reading is kept for a second
    monkeypatch.setattr(fused, "_load_reading", [float("-inf"), True])
    assert fused.host_oversubscribed() is False


def _bert():
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    torch.manual_seed(0)
    config = BertConfig(vocab_size=500, hidden_size=64, max_position_embeddings=64, type_vocab_size=2, pad_token_id=0)
    return BertEmbeddings(config).eval()


def test_busy_and_quiet_chunking_give_bertembeddings_bits(host, monkeypatch):
    bert = _bert()
    ids = torch.randint(1, 500, (6, 40))
    types = (torch.arange(40) >= 20).long().expand(6, 40)
    with torch.no_grad():
        expected = bert(ids, token_type_ids=types)
        outputs = []
        for busy in (False, True):
            host(busy)
            monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 7 * 64)  # 7 rows a chunk when quiet
            monkeypatch.setattr(fused, "BUSY_CHUNK_ELEMENTS", 100 * 64)  # 100 rows when busy
            outputs.append(fused.fused_embedding(
                ids, bert.word_embeddings.weight, bert.position_embeddings.weight, token_type_ids=types,
                type_weight=bert.token_type_embeddings.weight, norm_weight=bert.LayerNorm.weight,
                norm_bias=bert.LayerNorm.bias, eps=bert.LayerNorm.eps))
    assert torch.equal(outputs[0], expected) and torch.equal(outputs[1], expected)


def test_dropout_masks_and_gradients_do_not_depend_on_the_load(host, monkeypatch):
    """What the chunking would change (the dropout stream, the backward's sums) stays on the quiet chunks."""
    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 7 * 16)
    monkeypatch.setattr(fused, "BUSY_CHUNK_ELEMENTS", 100 * 16)
    g = torch.Generator().manual_seed(0)
    word, pos = torch.randn(50, 16, generator=g), torch.randn(40, 16, generator=g)
    ids = torch.randint(0, 50, (6, 40), generator=g)
    grad = torch.randn(6, 40, 16, generator=g)
    results = []
    for busy in (False, True):
        host(busy)
        w, p = word.clone().requires_grad_(), pos.clone().requires_grad_()
        torch.manual_seed(3)
        out = fused.fused_embedding(ids, w, p, dropout=0.3, training=True)
        out.backward(grad)
        eval_w = w.detach().clone().requires_grad_()
        fused.fused_embedding(ids, eval_w, p.detach()).backward(grad)
        results.append((out.detach(), w.grad, p.grad, eval_w.grad))
    for quiet, busy in zip(*results):
        assert torch.equal(quiet, busy)


def test_a_missed_target_names_the_load_and_the_known_contention_loss():
    targets = [{"target": "embedding block forward (eval)", "measured": "0.62x (0.79 ms)", "met": False,
                "contention": "the chunked path's barriers stall"},
               {"target": "RoPE forward+backward", "measured": "0.93x", "met": False},
               {"target": "met one", "measured": "4x", "met": True}]
    busy = missed_explanations(targets, {"load_average": [3.39, 1.8, 0.8], "cores": 2}, [7.06, 3.0, 1.2])
    assert len(busy) == 2
    assert busy[0].startswith("target not met: embedding block forward (eval) (0.62x (0.79 ms)) at load average "
                              "3.39 (start) / 7.06 (end) on 2 cores: busy; known to lose under contention: the chunk")
    assert busy[1].endswith("not known to lose under contention; rerun on a quiet machine before reading it as a "
                            "regression")
    quiet = missed_explanations(targets[1:], {"load_average": [0.5, 0.5, 0.5], "cores": 2}, [0.7, 0.5, 0.5])
    assert quiet == ["target not met: RoPE forward+backward (0.93x) at load average 0.5 (start) / 0.7 (end) on 2 "
                     "cores: quiet; not known to lose under contention"]


@pytest.mark.parametrize("load, cores, busy", [([2.01, 0, 0], 2, True), ([2.0, 0, 0], 2, False), ([9.0, 0, 0], None, False)])
def test_oversubscribed_is_a_load_above_the_cores(load, cores, busy):
    assert oversubscribed(load, cores) is busy
