"""The extension benchmark: planted facts at exact depths, and a tiny end-to-end run.

The end-to-end run uses a small random BERT that shares all-MiniLM-L6-v2's tokenizer (fast);
the real numbers come from ``posembed extend-eval`` on MiniLM itself.
"""

import json
import random
import re
import shutil

import pytest
import torch

from posembed.interop.retrieval import BenchmarkConfig, build_documents, evaluate_extension, rank_scores
from posembed.interop.retrieval_data import NAMES, PLACES, make_facts, plant_documents
from posembed.interop.retrieval_report import chance, format_table, write_report

transformers = pytest.importorskip("transformers")

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    return transformers.AutoTokenizer.from_pretrained(str(minilm_path))


@pytest.fixture(scope="module")
def text(tinyshakespeare):
    """The first 200,000 characters (about 50,000 tokens: plenty, and quick to tokenize)."""
    return tinyshakespeare.read_text(encoding="utf-8")[:200_000]


@pytest.fixture(scope="module")
def text_file(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "shakespeare.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_model(minilm_path, tmp_path_factory):
    """A 1-layer, 32-wide random BERT with 512 positions and MiniLM's tokenizer and vocabulary."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=512,
    )
    folder = tmp_path_factory.mktemp("small") / "bert"
    transformers.BertModel(config).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copyfile(minilm_path / name, folder / name)
    return folder


TINY = BenchmarkConfig(lengths=(128, 600), depths=(0.0, 0.5, 1.0), queries_per_depth=2, targets=(640,))


def test_facts_are_distinct_and_absent_from_the_text(tinyshakespeare):
    text = tinyshakespeare.read_text(encoding="utf-8")
    facts = make_facts(len(NAMES))
    assert len({f.query for f in facts}) == len(NAMES)
    words = set(re.findall(r"[a-z]+", text.lower()))
    assert not {n.lower() for n in NAMES + PLACES} & words
    with pytest.raises(ValueError, match="facts for 1..36 queries"):
        make_facts(37)


def test_fact_planted_at_the_exact_depth(tokenizer, text):
    config = BenchmarkConfig(lengths=(256, 1024), depths=(0.0, 0.25, 0.5, 1.0), queries_per_depth=3)
    documents = build_documents(tokenizer, config, text)
    for length, docs in documents.items():
        assert len(docs) == 12
        for doc in docs:
            ids = tokenizer(doc.fact.sentence, add_special_tokens=False)["input_ids"]
            body = length - 2
            assert len(doc.body) == body and doc.fact_length == len(ids)
            assert doc.fact_start == round(doc.depth * (body - len(ids)))
            assert list(doc.body[doc.fact_start : doc.fact_start + len(ids)]) == ids
            # the filler is cut at word boundaries: re-tokenizing the decoded text gives the same tokens
            assert tokenizer(tokenizer.decode(doc.body), add_special_tokens=False)["input_ids"] == list(doc.body)
        assert [d.depth for d in docs] == [0.0] * 3 + [0.25] * 3 + [0.5] * 3 + [1.0] * 3
        assert docs[0].fact_start == 0 and docs[-1].fact_start + docs[-1].fact_length == length - 2


def test_documents_are_reproducible_and_seeded(tokenizer, text):
    config = BenchmarkConfig(lengths=(200,), depths=(0.5,), queries_per_depth=4)
    first = build_documents(tokenizer, config, text)[200]
    assert first == build_documents(tokenizer, config, text)[200]
    other = build_documents(tokenizer, BenchmarkConfig(lengths=(200,), depths=(0.5,), queries_per_depth=4, seed=1), text)
    assert [d.body for d in other[200]] != [d.body for d in first]


def test_plant_refuses_bad_requests():
    facts = make_facts(1)
    with pytest.raises(ValueError, match="cannot hold the 5-token fact"):
        plant_documents(list(range(100)), [True] * 100, [[1] * 5], facts, [0.5], 4, random.Random(0))
    with pytest.raises(ValueError, match=r"depth must lie in \[0, 1\]"):
        plant_documents(list(range(100)), [True] * 100, [[1] * 5], facts, [1.5], 20, random.Random(0))
    with pytest.raises(ValueError, match="too few for 95-token documents"):
        plant_documents(list(range(50)), [True] * 50, [[1] * 5], facts, [0.5], 100, random.Random(0))


def test_rank_scores_counts_ties_as_misses():
    queries = torch.nn.functional.normalize(torch.randn(5, 8), dim=-1)
    hits, reciprocal = rank_scores(queries, queries)
    assert hits == [True] * 5 and reciprocal == [1.0] * 5
    hits, reciprocal = rank_scores(queries, torch.ones(5, 8))
    assert hits == [False] * 5 and reciprocal == [1 / 5] * 5


def test_chance_matches_a_random_ranking():
    torch.manual_seed(1)
    scores = [rank_scores(torch.randn(12, 4), torch.randn(12, 4))[1] for _ in range(400)]
    mean_rr = sum(sum(s) for s in scores) / (400 * 12)
    assert chance(12)[0] == 1 / 12 and abs(mean_rr - chance(12)[1]) < 0.02


def test_config_checks():
    with pytest.raises(ValueError, match="depths must lie in"):
        BenchmarkConfig(depths=(0.5, 2.0))
    with pytest.raises(ValueError, match="lengths must be ints of at least 8"):
        BenchmarkConfig(lengths=(4,))
    with pytest.raises(ValueError, match="facts for 1..36"):
        BenchmarkConfig(queries_per_depth=20)
    assert [BenchmarkConfig().target_for(L) for L in (256, 1024, 1500, 4096, 9000)] == [1024, 1024, 2048, 4096, 4096]


def test_tiny_run_table_structure(small_model, text_file, tmp_path):
    config = BenchmarkConfig(**{**TINY.__dict__, "truncate": (64, 512), "chunk": 256})
    result = evaluate_extension(small_model, config, text=text_file)
    systems = ["truncate-64", "truncate-512", "chunk-256", "copy", "interpolate", "hierarchical"]
    assert list(dict.fromkeys(r["system"] for r in result["rows"])) == systems
    assert len(result["rows"]) == len(systems) * 2 * 3
    for row in result["rows"]:
        assert 0.0 <= row["accuracy"] <= 1.0 and 0.0 < row["mrr"] <= 1.0
        assert row["queries"] == 2 and row["candidates"] == 6
    used = {(r["system"], r["length"]): r["positions_used"] for r in result["rows"]}
    assert used["truncate-64", 600] == 64 and used["copy", 600] == 600 and used["copy", 128] == 128
    assert [r["length"] for r in result["by_length"] if r["system"] == "copy"] == [128, 600]
    assert {r["depth"] for r in result["by_depth"]} == {0.0, 0.5, 1.0}
    summary = result["summary"]
    assert summary["long_lengths"] == [600] and summary["winner"] in systems
    assert {r["system"] for r in summary["ranking"]} == set(systems)
    assert summary["statement"].startswith("On documents of 600 tokens")
    assert summary["candidates"] == 6 and summary["chance_accuracy"] == pytest.approx(1 / 6)
    assert "Chance with 6 candidates is 17%" in summary["statement"]
    for entry in summary["ranking"]:
        assert 0 <= entry["accuracy"] <= 1 and 0 <= entry["short_accuracy"] <= 1
    # copy keeps the first 512 rows, so at 128 tokens it equals plain truncation at 512
    rows = {(r["system"], r["length"], r["depth"]): r for r in result["rows"]}
    for depth in config.depths:
        assert rows["copy", 128, depth]["mrr"] == rows["truncate-512", 128, depth]["mrr"]
    json_path, html_path = write_report(result, tmp_path / "report")
    assert json.loads(json_path.read_text())["summary"]["winner"] == summary["winner"]
    assert "accuracy vs" not in html_path.read_text() or (tmp_path / "report" / "extend_eval.png").is_file()
    assert "truncate-64" in format_table(result).splitlines()[1]


def test_sizes_beyond_the_table_are_refused(small_model, text_file):
    with pytest.raises(ValueError, match=r"truncation/chunk sizes \[1024\] exceed the checkpoint's 512"):
        evaluate_extension(small_model, BenchmarkConfig(truncate=(1024,)), text=text_file)
    with pytest.raises(ValueError, match=r"extension targets \[512\] must be larger"):
        evaluate_extension(small_model, BenchmarkConfig(targets=(512, 1024)), text=text_file)
