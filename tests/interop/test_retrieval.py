"""The extension benchmark: passkey and needle candidates that differ only in the planted fact,
Wilson intervals, the verdicts, and a tiny end-to-end run.

The end-to-end run uses a small random BERT that shares all-MiniLM-L6-v2's tokenizer (fast);
the real numbers come from ``posembed extend-eval`` on MiniLM itself.
"""

import json
import math
import random
import re

import pytest
import torch

from posembed.interop.extend.retrieval import (
    QUICK,
    BenchmarkConfig,
    Encoder,
    build_documents,
    evaluate_extension,
    rank_scores,
)
from posembed.interop.extend.retrieval_data import (
    NAMES,
    PLACES,
    TASKS,
    make_facts,
    plant_documents,
    read_text,
    split_text,
)
from posembed.interop.extend.retrieval_report import (
    chance,
    format_table,
    markdown_table,
    summarise,
    wilson,
    write_report,
)
from tests.helpers import save_random_bert

transformers = pytest.importorskip("transformers")


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
    return save_random_bert(
        tmp_path_factory.mktemp("small") / "bert", minilm_path, hidden_size=32, max_position_embeddings=512
    )


TINY = BenchmarkConfig(lengths=(128, 600), queries=6, targets=(640,), finetune_steps=2, truncate=(64, 512), chunk=256)


@pytest.mark.parametrize("task", TASKS)
def test_facts_are_distinct_and_absent_from_the_text(tinyshakespeare, task):
    text = tinyshakespeare.read_text(encoding="utf-8")
    facts = make_facts(task, len(NAMES))
    assert len({f.query for f in facts}) == len({f.sentence for f in facts}) == len(NAMES) == 52
    words = set(re.findall(r"[a-z]+", text.lower()))
    assert not {n.lower() for n in NAMES + PLACES} & words
    with pytest.raises(ValueError, match="facts for 1..52 queries"):
        make_facts(task, 53)


def test_passkeys_are_five_digits_distinct_and_seeded():
    facts = make_facts("passkey", 50, seed=3)
    keys = [re.search(r"is (\d+)\. Remember it\. \1 is the pass key for", f.sentence).group(1) for f in facts]
    assert len(set(keys)) == 50 and all(len(k) == 5 for k in keys)
    assert facts[0].query == "What is the pass key for Brannoc?" and "Brannoc's pass key is" in facts[0].sentence
    assert make_facts("passkey", 50, seed=3) == facts and make_facts("passkey", 50, seed=4) != facts
    with pytest.raises(ValueError, match="unknown task 'haystack'"):
        make_facts("haystack", 3)


def test_candidates_share_one_filler_and_differ_only_in_the_fact(tokenizer, text):
    config = BenchmarkConfig(lengths=(256, 1024), queries=11)
    documents = build_documents(tokenizer, config, text)
    assert set(documents) == {(t, L) for t in TASKS for L in (256, 1024)}
    for (_task, length), docs in documents.items():
        assert len(docs) == 11
        assert sorted(d.depth for d in docs) == pytest.approx([k / 10 for k in range(11)])
        filler = None
        for doc in docs:
            ids = tokenizer(doc.fact.sentence, add_special_tokens=False)["input_ids"]
            assert len(doc.body) == length - 2 and doc.fact_length == len(ids)
            assert list(doc.body[doc.fact_start : doc.fact_start + len(ids)]) == ids
            # the fact sits at the word start nearest its depth (within a few tokens)
            assert abs(doc.fact_start - doc.depth * (length - 2 - len(ids))) <= 4
            without = doc.body[: doc.fact_start] + doc.body[doc.fact_start + len(ids) :]
            # every candidate is the same filler span with its fact taken out (cut to its length)
            filler = filler or without
            common = min(len(filler), len(without))
            assert without[:common] == filler[:common]
            # cut at word boundaries: re-tokenizing the decoded text gives the same tokens
            assert tokenizer(tokenizer.decode(doc.body[:-1]), add_special_tokens=False)["input_ids"] == list(
                doc.body[:-1]
            )
    # the filler comes from the text's last tenth, which the tuning never reads
    filler_text = tokenizer.decode(documents["needle", 256][0].body[:20])
    train, held_out = split_text(text)
    assert len(train) == pytest.approx(0.9 * len(text), abs=200) and train + held_out == text
    assert filler_text.split()[2] in held_out.lower()


def test_documents_are_reproducible_and_seeded(tokenizer, text):
    config = BenchmarkConfig(lengths=(200,), queries=4, tasks=("needle",))
    first = build_documents(tokenizer, config, text)["needle", 200]
    assert first == build_documents(tokenizer, config, text)["needle", 200]
    other = build_documents(tokenizer, BenchmarkConfig(lengths=(200,), queries=4, tasks=("needle",), seed=1), text)
    assert [d.body for d in other["needle", 200]] != [d.body for d in first]


def test_plant_refuses_bad_requests():
    facts = make_facts("needle", 1)
    with pytest.raises(ValueError, match="cannot hold a 5-token fact"):
        plant_documents(list(range(100)), [True] * 100, [[1] * 5], facts, [0.5], 5, random.Random(0))
    with pytest.raises(ValueError, match=r"depth must lie in \[0, 1\]"):
        plant_documents(list(range(100)), [True] * 100, [[1] * 5], facts, [1.5], 20, random.Random(0))
    with pytest.raises(ValueError, match="too few for 100-token documents"):
        plant_documents(list(range(50)), [True] * 50, [[1] * 5], facts, [0.5], 100, random.Random(0))


def test_a_text_that_is_not_utf8_is_named(tmp_path):
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("fa\u00e7ade".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt is not UTF-8 text \('utf-8' codec can't decode byte 0xe7"):
        read_text(latin)


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


def test_wilson_matches_the_formula_and_covers():
    # Wilson (1927) / Agresti & Coull (1998): 25 of 50 -> [0.3664, 0.6336]; 50 of 50 -> [0.9287, 1]
    assert [round(x, 4) for x in wilson(25, 50)] == [0.3664, 0.6336]
    assert [round(x, 4) for x in wilson(50, 50)] == [0.9287, 1.0]
    assert [round(x, 4) for x in wilson(5, 50)] == [0.0435, 0.2136]
    # coverage of a 95% interval, checked by simulation at p = 0.3, n = 50
    generator = torch.Generator().manual_seed(0)
    draws = (torch.rand(4000, 50, generator=generator) < 0.3).sum(1).tolist()
    covered = sum(low <= 0.3 <= high for low, high in (wilson(k, 50) for k in draws)) / 4000
    assert 0.93 < covered < 0.97
    with pytest.raises(ValueError, match="0 <= hits <= n"):
        wilson(51, 50)
    # the ends are exact and the interval always holds the observed rate (the plot's error bars)
    assert wilson(0, 50)[0] == 0.0 and wilson(50, 50)[1] == 1.0
    assert all(wilson(k, n)[0] <= k / n <= wilson(k, n)[1] for n in range(1, 60) for k in range(n + 1))


def _cell(task, system, length, hits, n=50, seeds=(0,)):
    """A cell of ``hits`` out of ``n`` queries per data seed (the first ``hits`` of each seed's queries)."""
    outcomes = [[i / max(1, n - 1), int(i < hits), seed] for seed in seeds for i in range(n)]
    total, k = n * len(seeds), hits * len(seeds)
    low, high = wilson(k, total)
    return {
        "task": task,
        "system": system,
        "length": length,
        "hits": k,
        "queries": total,
        "candidates": n,
        "accuracy": k / total,
        "mrr": k / total,
        "low": low,
        "high": high,
        "longembed": "",
        "outcomes": outcomes,
    }


def test_the_primary_family_is_each_system_against_the_longest_truncation_beyond_the_table():
    cells = [
        _cell(t, s, L, k)
        for t in ("passkey", "needle")
        for L in (256, 1024, 2048)
        for s, k in (("truncate-256", 5), ("truncate-512", 20), ("copy", 40), ("grouped", 5), ("hierarchical", 20))
    ]
    summary = summarise(cells, 512)
    assert summary["long_lengths"] == [1024, 2048]
    names = [(d["system"], d["region"], d["lengths"]) for d in summary["decisions"]]
    # beyond the table every non-truncation system; within it only the methods that edit the trained rows
    assert names == [
        ("copy", "beyond the table", [1024, 2048]),
        ("grouped", "beyond the table", [1024, 2048]),
        ("hierarchical", "beyond the table", [1024, 2048]),
        ("grouped", "within the table", [256]),
    ]
    by = {(d["system"], d["region"]): d for d in summary["decisions"]}
    assert (
        by["copy", "beyond the table"]["pairs"] == 200 and by["copy", "beyond the table"]["baseline"] == "truncate-512"
    )
    assert by["copy", "beyond the table"]["word"] == "copy better"
    assert by["grouped", "beyond the table"]["word"] == "truncate-512 better"
    assert by["grouped", "within the table"]["word"] == "truncate-512 better"
    # identical outcomes on 200 pairs, none discordant: the exact equivalence test (posembed.stats.verdict) shows the
    # hit rates within the 0.1 margin (a normal approximation had no standard error and could not say)
    assert by["hierarchical", "beyond the table"]["word"] == "alike"
    # Holm over the family's 8 tests: the p's match posembed.stats.verdict.decide on the same comparisons
    from posembed.interop.extend.retrieval_verdicts import primary_comparisons
    from posembed.stats.verdict import decide

    expected = decide([c for c, _ in primary_comparisons(cells, 512)])
    assert [d["p_adjusted"] for d in summary["decisions"]] == [e.p_adjusted for e in expected]
    assert summary["statements"][0].startswith("Beyond the table (1024, 2048 tokens, 200 paired queries per system")
    assert "copy: better than truncate-512" in summary["statements"][0]
    assert "grouped: worse than truncate-512" in summary["statements"][0]
    assert [r["system"] for r in summary["ranking"]][:2] == ["copy", "truncate-512"]
    assert all(d["word"] is None for d in summary["exploratory"]) and len(summary["exploratory"]) == 2 * 3 * 3


def test_a_winner_must_lead_in_every_data_seed_and_task():
    from posembed.interop.extend.retrieval_verdicts import primary_decisions

    def cell(system, per_seed):
        outcomes = [[i / 49, int(i < k), seed] for seed, k in enumerate(per_seed) for i in range(50)]
        return {"task": "needle", "system": system, "length": 1024, "outcomes": outcomes}

    # seed 0: 45 against 5; seed 1: 20 against 22. Pooled: 65 against 27, McNemar p ~ 1e-5
    split = [cell("truncate-512", [5, 22]), cell("copy", [45, 20])]
    (decision,) = primary_decisions(split, 512)
    assert decision["p_adjusted"] < 0.05 and decision["per_seed"] == {"0": 0.8, "1": -0.04}
    assert decision["word"] == "cannot tell" and decision["note"] == "the data seeds disagree"
    agree = [cell("truncate-512", [5, 20]), cell("copy", [45, 20])]  # seed 1 ties: no seed disagrees
    assert primary_decisions(agree, 512)[0]["word"] == "copy better"
    # the same with tasks: passkey 45 against 5, needle 20 against 22 (one seed): the tasks disagree
    tasks = [
        dict(c, task=task, outcomes=[o[:2] + [0] for o in c["outcomes"]][i * 50 : (i + 1) * 50])
        for c in split
        for i, task in enumerate(("passkey", "needle"))
    ]
    (decision,) = primary_decisions(tasks, 512)
    assert decision["per_task"] == {"passkey": 0.8, "needle": -0.04} and decision["per_seed"] == {"0": 0.38}
    assert decision["word"] == "cannot tell" and decision["note"] == "the tasks disagree"


def test_pairs_never_cross_a_data_seed_or_a_query():
    from posembed.interop.extend.retrieval_verdicts import paired_hits

    a = _cell("passkey", "truncate-512", 1024, 3, n=4, seeds=(0, 1))
    b = _cell("passkey", "copy", 1024, 1, n=4, seeds=(0, 1))
    assert paired_hits([a, b], "copy", "truncate-512", [1024]) == (
        [1, 1, 1, 0] * 2,
        [1, 0, 0, 0] * 2,
        [0] * 4 + [1] * 4,
        ["passkey"] * 8,
    )
    shuffled = dict(b, outcomes=b["outcomes"][4:] + b["outcomes"][:4])  # seed 1's queries first
    with pytest.raises(
        ValueError, match="passkey @ 1024: the outcomes of copy and truncate-512 are not the same queries"
    ):
        paired_hits([a, shuffled], "copy", "truncate-512", [1024])


def test_alike_needs_the_equivalence_test():
    from posembed.interop.extend.retrieval_verdicts import MARGIN, primary_decisions

    def cell(system, hits):
        return {"task": "passkey", "system": system, "length": 1024, "outcomes": [[0.0, h, 0] for h in hits]}

    # 400 pairs, 10 discordant each way: difference 0, Wald se ~ 0.011, well within 0.10
    close = [
        cell("truncate-512", [1] * 10 + [0] * 10 + [1] * 100 + [0] * 280),
        cell("pcw-512", [0] * 10 + [1] * 10 + [1] * 100 + [0] * 280),
    ]
    assert MARGIN == 0.10 and primary_decisions(close, 512)[0]["word"] == "alike"
    # 20 pairs, the same split: too few to show either
    few = [cell("truncate-512", [1, 0] + [0] * 18), cell("pcw-512", [0, 1] + [0] * 18)]
    assert primary_decisions(few, 512)[0]["word"] == "cannot tell"


def test_config_checks():
    with pytest.raises(ValueError, match="tasks must be among passkey, needle"):
        BenchmarkConfig(tasks=("passkey", "haystack"))
    with pytest.raises(ValueError, match="lengths must be ints of at least 8"):
        BenchmarkConfig(lengths=(4,))
    with pytest.raises(ValueError, match="facts for 1..52"):
        BenchmarkConfig(queries=60)
    with pytest.raises(ValueError, match="unknown extension methods"):
        BenchmarkConfig(methods=("copy", "ntk"))
    with pytest.raises(ValueError, match="finetune_steps must be an int >= 0"):
        BenchmarkConfig(finetune_steps=-1)
    assert [BenchmarkConfig().target_for(L) for L in (256, 1024, 1500, 4096, 9000)] == [1024, 1024, 2048, 4096, 4096]
    full = BenchmarkConfig()
    assert full.queries >= 50 and full.lengths == (256, 512, 1024, 2048, 4096) and full.tasks == ("passkey", "needle")
    assert [s.name for s in full.systems()] == [
        "truncate-256",
        "truncate-512",
        "chunk-512",
        "pcw-512",
        "copy",
        "interpolate",
        "grouped",
        "hierarchical",
        "tuned",
    ]
    assert QUICK.queries < full.queries and QUICK.finetune_steps < full.finetune_steps


def test_encoder_encodes_each_sequence_once_and_shares_short_ones():
    calls = []

    class Model(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            calls.append(input_ids.shape)
            return type("Out", (), {"last_hidden_state": input_ids.unsqueeze(-1).float().repeat(1, 1, 3)})()

    shared = {}
    first = Encoder(Model(), 0, 64, shared, exact_up_to=4)
    out = first([(1, 2), (1, 2), (3, 4, 5, 6, 7)])
    assert out[0].tolist() == out[1].tolist() == [1.5] * 3 and out[2].tolist() == [5.0] * 3
    assert sum(shape[0] for shape in calls) == 2  # the repeated input once
    second = Encoder(Model(), 0, 64, shared, exact_up_to=4)
    calls.clear()
    second([(1, 2), (3, 4, 5, 6, 7)])
    assert [tuple(c) for c in calls] == [(1, 5)]  # the short one came from the shared cache
    private = Encoder(Model(), 0, 64, None, exact_up_to=4)
    calls.clear()
    private([(1, 2)])
    assert len(calls) == 1  # a model that changes short inputs never reads the shared cache


@pytest.mark.slow
def test_tiny_run_table_structure(small_model, text_file, tmp_path):
    result = evaluate_extension(small_model, TINY, text=text_file)
    systems = [
        "truncate-64",
        "truncate-512",
        "chunk-256",
        "pcw-256",
        "copy",
        "interpolate",
        "grouped",
        "hierarchical",
        "tuned",
    ]
    cells = result["cells"]
    assert list(dict.fromkeys(c["system"] for c in cells)) == systems
    assert len(cells) == len(systems) * 2 * 2
    for cell in cells:
        assert 0.0 <= cell["low"] <= cell["accuracy"] <= cell["high"] <= 1.0 and 0.0 < cell["mrr"] <= 1.0
        # two data seeds, each 6 queries ranking its own pool of 6 candidates
        assert cell["queries"] == 12 and cell["candidates"] == 6 and cell["data_seeds"] == [0, 1]
        assert [seed for *_, seed in cell["outcomes"]] == [0] * 6 + [1] * 6
        assert cell["hits"] == sum(h for _, h, _ in cell["outcomes"])
        assert (cell["low"], cell["high"]) == wilson(cell["hits"], 12)
    at = {(c["task"], c["system"], c["length"]): c for c in cells}
    assert (
        at["passkey", "truncate-64", 600]["positions_used"] == 64
        and at["passkey", "copy", 600]["positions_used"] == 600
    )
    assert at["needle", "copy", 128]["positions_used"] == 128
    assert (
        at["needle", "copy", 600]["longembed"] == "RP" and at["needle", "tuned", 600]["longembed"] == "tuning (on RP)"
    )
    # copy, hierarchical and tuned keep the first 512 rows: at 128 tokens they are the original model
    for task in TASKS:
        for system in ("copy", "hierarchical", "tuned", "chunk-256", "pcw-256"):
            assert at[task, system, 128]["outcomes"] == at[task, "truncate-512", 128]["outcomes"]
    summary = result["summary"]
    assert summary["long_lengths"] == [600]
    assert [(d["system"], d["region"]) for d in summary["decisions"]] == [
        *[(s, "beyond the table") for s in systems[2:]],
        ("interpolate", "within the table"),
        ("grouped", "within the table"),
    ]
    assert {d["pairs"] for d in summary["decisions"]} == {2 * 2 * 6}  # 2 tasks, 2 data seeds, 6 queries
    assert {r["system"] for r in summary["ranking"]} == set(systems)
    json_path, html_path = write_report(result, tmp_path / "report")
    assert json.loads(json_path.read_text())["summary"]["decisions"] == json.loads(json.dumps(summary["decisions"]))
    page = html_path.read_text()
    assert "<title>posembed extend-eval" in page and (tmp_path / "report" / "extend_eval.png").is_file()
    # the summary of verdicts opens the page, before the figure and every table
    assert page.index("<h2>Summary</h2>") < page.index("<figure") < page.index("<table>")
    assert page.index(summary["statements"][0][:40]) < page.index("<figure")
    # text columns (system, task, verdict) are left-aligned, numbers right-aligned
    assert '<td class="text">truncate-64</td>' in page
    assert f'<td class="text">{summary["decisions"][0]["word"]}</td>' in page
    assert "<td>600</td>" in page
    ranking = page.split("Ranking beyond the table")[1].split("</table>")[0]
    assert ">95% interval<" in ranking and ">low<" not in ranking and ">high<" not in ranking
    table = format_table(result)
    assert "truncate-64" in table.splitlines()[1] and "[" in table.splitlines()[1]
    assert markdown_table(result, "passkey").splitlines()[0] == "| system | LongEmbed | 128 | 600 |"


def test_sizes_beyond_the_table_are_refused(small_model, text_file):
    with pytest.raises(ValueError, match=r"truncation/chunk sizes \[1024\] exceed the checkpoint's 512"):
        evaluate_extension(small_model, BenchmarkConfig(truncate=(1024,)), text=text_file)
    with pytest.raises(ValueError, match=r"extension targets \[512\] must be larger"):
        evaluate_extension(small_model, BenchmarkConfig(targets=(512, 1024)), text=text_file)


def test_pcw_windows_are_full_and_chunks_are_not():
    from posembed.interop.extend.retrieval_embed import _windows

    body = list(range(10))
    # LongEmbed's PCW: windows of L tokens, the last one moved back so it is full (overlapping)
    assert _windows(body, 4, full_last=True) == [[0, 1, 2, 3], [4, 5, 6, 7], [6, 7, 8, 9]]
    assert _windows(body, 4, full_last=False) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert _windows(body, 10, full_last=True) == [body] and _windows(body, 5, full_last=True) == [body[:5], body[5:]]


def test_vectors_are_normalised_one_by_one():
    from posembed.interop.extend.retrieval import _normalise

    vectors = torch.tensor([[3.0, 4.0], [6.0, 8.0], [0.0, -2.0]])
    expected = torch.tensor([[0.6, 0.8], [0.6, 0.8], [0.0, -1.0]])  # each row over its own length (5, 10, 2)
    torch.testing.assert_close(_normalise(vectors), expected, atol=1e-7, rtol=0)


def test_wilson_one_hit_has_a_positive_lower_end():
    # 1 of 10: the textbook Wilson interval [0.0179, 0.4042] (only 0 hits pins the lower end at 0)
    assert [round(x, 4) for x in wilson(1, 10)] == [0.0179, 0.4042]
    z = 1.959963984540054
    centre, half = (0.1 + z * z / 20) / (1 + z * z / 10), z * math.sqrt(0.09 / 10 + z * z / 400) / (1 + z * z / 10)
    assert wilson(1, 10) == pytest.approx((centre - half, centre + half), rel=1e-12)


def test_chance_is_the_mean_reciprocal_rank_of_a_uniform_rank():
    assert chance(1) == (1.0, 1.0)
    accuracy, mrr = chance(4)
    assert accuracy == 0.25 and mrr == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4, rel=1e-15)
    assert chance(24)[1] == pytest.approx(sum(1 / r for r in range(1, 25)) / 24, rel=1e-15)


def test_chunks_are_weighted_by_the_tokens_they_cover():
    from posembed.interop.extend.retrieval import System
    from posembed.interop.extend.retrieval_data import Document
    from posembed.interop.extend.retrieval_embed import document_vectors

    class Tokenizer:
        cls_token_id, sep_token_id = 101, 102

    # chunk-6 reads 4 body tokens per piece: [0..3], [4..7], [8, 9]
    unit = {(101, 0, 1, 2, 3, 102): [3.0, 0.0], (101, 4, 5, 6, 7, 102): [0.0, 5.0], (101, 8, 9, 102): [0.0, -2.0]}
    doc = Document(fact=None, depth=0.0, body=tuple(range(10)), fact_start=0, fact_length=1)
    vectors = document_vectors(
        System("chunk-6", "chunk", size=6),
        lambda pieces: torch.tensor([unit[p] for p in pieces]),
        Tokenizer(),
        [doc],
        6,
    )
    # unit vectors [1, 0], [0, 1], [0, -1] weighted 4, 4, 2: [4, 2] / |[4, 2]| (equal weights would give [1, 0])
    assert torch.allclose(vectors, torch.tensor([[2.0, 1.0]]) / math.sqrt(5.0))
    # pcw-6: windows [0..3], [4..7], [6..9] (the last moved back, full), their plain mean
    windows = {**unit, (101, 6, 7, 8, 9, 102): [0.0, -9.0]}
    pcw = document_vectors(
        System("pcw-6", "pcw", size=6), lambda pieces: torch.tensor([windows[p] for p in pieces]), Tokenizer(), [doc], 6
    )
    assert torch.allclose(pcw, torch.tensor([[3.0, -4.0]]) / 5.0)
