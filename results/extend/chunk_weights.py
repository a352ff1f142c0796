"""chunk-512 with its chunks weighted by their tokens (what extend-eval does) against equal weights
(what it did before): the same pieces, encoded once, on the same documents as the stored run.

    PYTHONPATH=src python results/extend/chunk_weights.py results/extend/extend_eval_cells.jsonl results/extend/chunk_weights.json

Writes, per data seed, task and length longer than a chunk (where a document has a short last
chunk; shorter ones are one chunk, the same under both), both weightings' hits per query and how
many queries change.
"""

import json
import sys
from pathlib import Path

import torch

from posembed._io import atomic_write_json
from posembed.cli import model_folder
from posembed.interop.extend.retrieval import BenchmarkConfig, System, _load, build_documents
from posembed.interop.extend.retrieval_data import default_text, make_facts, read_text
from posembed.interop.extend.retrieval_embed import Encoder, _windows, normalise, rank_scores, wrap


def main(cells_file: str, out: str) -> None:
    from transformers import AutoTokenizer

    stored = json.loads(Path(cells_file).read_text().splitlines()[0])["protocol"]
    config = BenchmarkConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()
                                if k in BenchmarkConfig.__dataclass_fields__})
    folder = model_folder(None, "MODEL")
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    encoder = Encoder(_load(folder), tokenizer.pad_token_id, config.batch_tokens)
    system, text = System(f"chunk-{config.chunk}", "chunk", size=config.chunk), read_text(default_text())
    rows = []
    for seed in config.seeds:
        documents = build_documents(tokenizer, config, text, seed)
        for (task, length), docs in documents.items():
            if length <= config.chunk:
                continue
            queries = [wrap(tokenizer, tokenizer(f.query, add_special_tokens=False)["input_ids"])
                       for f in make_facts(task, config.queries, seed=seed)]
            q = normalise(encoder(queries))
            hits = {}
            for weighting in ("tokens", "equal"):
                vectors = []
                for doc in docs:
                    pieces = [wrap(tokenizer, p) for p in _windows(doc.body, system.size - 2, full_last=False)]
                    unit = normalise(encoder(pieces))
                    weights = torch.tensor([[len(p) - 2.0] for p in pieces]) if weighting == "tokens" else torch.ones(len(pieces), 1)
                    vectors.append((unit * weights).sum(0) / weights.sum())
                hits[weighting] = [int(h) for h in rank_scores(q, normalise(torch.stack(vectors)))[0]]
            rows.append({"seed": seed, "task": task, "length": length, "hits_tokens": hits["tokens"],
                         "hits_equal": hits["equal"], "changed": sum(a != b for a, b in zip(hits["tokens"], hits["equal"]))})
            print(seed, task, length, sum(hits["tokens"]), sum(hits["equal"]), rows[-1]["changed"], flush=True)
    atomic_write_json(Path(out), {"protocol": stored, "rows": rows})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
