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

from posembed.interop.extend.retrieval import QUICK, BenchmarkConfig, Encoder, build_documents, evaluate_extension, rank_scores
from posembed.interop.extend.retrieval_data import NAMES, PLACES, TASKS, make_facts, plant_documents, read_text, split_text
from posembed.interop.extend.retrieval_report import (
    chance,
    format_table,
    markdown_table,
    mcnemar,
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
    return save_random_bert(tmp_path_factory.mktemp("small") / "bert", minilm_path, hidden_size=32,
                            max_position_embeddings=512)


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
    for (task, length), docs in documents.items():
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
            assert tokenizer(tokenizer.decode(doc.body[:-1]), add_special_tokens=False)["input_ids"] == list(doc.body[:-1])
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


def _cell(task, system, length, hits, n=50):
    low, high = wilson(hits, n)
    return {"task": task, "system": system, "length": length, "hits": hits, "queries": n, "candidates": n,
            "accuracy": hits / n, "mrr": hits / n, "low": low, "high": high, "longembed": ""}


def test_verdicts_need_non_overlapping_intervals():
    cells = [_cell("passkey", s, L, k) for L in (512, 1024, 2048)
             for s, k in (("truncate-512", 20), ("copy", 38 if L == 1024 else 30), ("grouped", 5))]
    summary = summarise(cells, 512)
    assert summary["long_lengths"] == [1024, 2048]
    by_length = {v["length"]: v for v in summary["verdicts"]}
    # 38/50 [0.63, 0.86] vs 20/50 [0.28, 0.54]: apart; 30/50 [0.46, 0.72] vs 20/50: overlapping
    assert by_length[1024]["verdict"] == "beats" and by_length[1024]["beating"] == ["copy"]
    assert by_length[2048]["verdict"] == "cannot tell" and by_length[2048]["best"] == "copy"
    assert summary["winners"] == {"passkey": []}
    assert summary["statements"][0].startswith("No method beats truncation at every length of 1024 and 2048")
    assert "passkey @ 1024: best copy 0.76 [0.63, 0.86] vs truncate-512 0.40 [0.28, 0.54]: beats." in summary["statements"]
    worse = summarise([_cell("needle", "truncate-512", 1024, 40), _cell("needle", "grouped", 1024, 10)], 512)
    assert worse["verdicts"][0]["verdict"] == "worse"
    wins = summarise([_cell("needle", "truncate-512", 1024, 10), _cell("needle", "copy", 1024, 40)], 512)
    assert wins["winners"] == {"needle": ["copy"]} and wins["statements"][0].startswith("needle: copy beats")
    assert [r["system"] for r in wins["ranking"]] == ["copy", "truncate-512"]


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
        "truncate-256", "truncate-512", "chunk-512", "pcw-512", "copy", "interpolate", "grouped", "hierarchical", "tuned"]
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


def test_tiny_run_table_structure(small_model, text_file, tmp_path):
    result = evaluate_extension(small_model, TINY, text=text_file)
    systems = ["truncate-64", "truncate-512", "chunk-256", "pcw-256", "copy", "interpolate", "grouped",
               "hierarchical", "tuned"]
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
    assert at["passkey", "truncate-64", 600]["positions_used"] == 64 and at["passkey", "copy", 600]["positions_used"] == 600
    assert at["needle", "copy", 128]["positions_used"] == 128
    assert at["needle", "copy", 600]["longembed"] == "RP" and at["needle", "tuned", 600]["longembed"] == "tuning (on RP)"
    # copy, hierarchical and tuned keep the first 512 rows: at 128 tokens they are the original model
    for task in TASKS:
        for system in ("copy", "hierarchical", "tuned", "chunk-256", "pcw-256"):
            assert at[task, system, 128]["outcomes"] == at[task, "truncate-512", 128]["outcomes"]
    summary = result["summary"]
    assert summary["long_lengths"] == [600] and {v["task"] for v in summary["verdicts"]} == set(TASKS)
    assert {r["system"] for r in summary["ranking"]} == set(systems)
    json_path, html_path = write_report(result, tmp_path / "report")
    assert json.loads(json_path.read_text())["summary"]["verdicts"] == json.loads(json.dumps(summary["verdicts"]))
    page = html_path.read_text()
    assert "<title>posembed extend-eval" in page and (tmp_path / "report" / "extend_eval.png").is_file()
    # the summary of verdicts opens the page, before the figure and every table
    assert page.index("<h2>Summary</h2>") < page.index("<figure") < page.index("<table>")
    assert page.index(summary["statements"][0][:40]) < page.index("<figure")
    # text columns (system, task, verdict) are left-aligned, numbers right-aligned
    assert '<td class="text">truncate-64</td>' in page
    assert any(f'<td class="text">{verdict}</td>' in page for verdict in ("beats", "worse", "cannot tell"))
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
    from posembed.interop.extend.retrieval import _windows

    body = list(range(10))
    # LongEmbed's PCW: windows of L tokens, the last one moved back so it is full (overlapping)
    assert _windows(body, 4, full_last=True) == [[0, 1, 2, 3], [4, 5, 6, 7], [6, 7, 8, 9]]
    assert _windows(body, 4, full_last=False) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert _windows(body, 10, full_last=True) == [body] and _windows(body, 5, full_last=True) == [body[:5], body[5:]]


def test_mcnemar_is_the_exact_binomial_test_on_discordant_pairs():
    # 8 discordant pairs split 7:1 -> two-sided p = 2 * (1 + 8) / 256 = 0.0703125
    first = [1] * 7 + [0] + [1, 0, 1]
    second = [0] * 7 + [1] + [1, 0, 1]
    assert mcnemar(first, second) == (7, 1, 0.0703125)
    assert mcnemar([1, 0], [1, 0]) == (0, 0, 1.0) and mcnemar([1, 0], [0, 1])[2] == 1.0
    with pytest.raises(ValueError, match="equal lengths"):
        mcnemar([1], [1, 0])
    cells = [dict(_cell("needle", "truncate-512", 1024, 2, n=4), outcomes=[[0, 1], [0, 1], [0, 0], [0, 0]]),
             dict(_cell("needle", "copy", 1024, 3, n=4), outcomes=[[0, 1], [0, 0], [0, 1], [0, 1]])]
    verdict = summarise(cells, 512)["verdicts"][0]
    assert (verdict["only_best"], verdict["only_truncation"], verdict["mcnemar_p"]) == (2, 1, 1.0)


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


def test_mcnemar_refuses_unpaired_outcomes_and_caps_p_at_1():
    for first, second in (([1, 0, 1], [1, 0]), ([1, 0], [1, 0, 1])):
        with pytest.raises(ValueError, match=f"equal lengths, got {len(first)} and {len(second)}"):
            mcnemar(first, second)
    # an even split: the two tails overlap, 2 * P(X <= 1 | n = 2) = 1.5, reported as 1
    assert mcnemar([1, 0, 1], [0, 1, 1]) == (1, 1, 1.0)
    assert mcnemar([0, 0], [0, 0]) == (0, 0, 1.0)  # no discordant pair


def test_chance_is_the_mean_reciprocal_rank_of_a_uniform_rank():
    assert chance(1) == (1.0, 1.0)
    accuracy, mrr = chance(4)
    assert accuracy == 0.25 and mrr == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4, rel=1e-15)
    assert chance(24)[1] == pytest.approx(sum(1 / r for r in range(1, 25)) / 24, rel=1e-15)
