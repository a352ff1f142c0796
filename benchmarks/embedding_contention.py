"""The embedding block's forward (eval) at ``bench --quick``'s shape, on idle and on oversubscribed cores.

Times transformers' ``BertEmbeddings`` beside posembed's chunked path (``fused_embedding``) at
several chunk sizes, interleaved round by round so a change in the machine's load hits every
variant alike (one thread count a process: switching the count between calls wakes or rebuilds
the thread pool, which under contention costs more than the call), and prints one JSON line: the
median ms of each, the load average before and after, and how many spinning processes ``--spin``
started beside it (the "busy" case: each burns one core until the run ends).

    python benchmarks/embedding_contention.py --rounds 300 [--threads 2] [--spin 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time

import torch


def _spin() -> None:  # pragma: no cover - a busy loop in a child process
    while True:
        pass


def _variants(shape: dict) -> dict:
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    from posembed.kernels import embedding as fused

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=shape["vocab"],
        hidden_size=shape["width"],
        max_position_embeddings=512,
        type_vocab_size=2,
        pad_token_id=0,
    )
    bert = BertEmbeddings(config).eval()
    ids = torch.randint(1, shape["vocab"], (shape["batch"], shape["length"]))
    types = torch.zeros_like(ids)
    types[:, shape["length"] // 2 :] = 1
    word, pos, typ = bert.word_embeddings.weight, bert.position_embeddings.weight, bert.token_type_embeddings.weight
    norm = bert.LayerNorm

    def chunked(elements: int):
        def call():
            saved = fused.CHUNK_ELEMENTS
            fused.CHUNK_ELEMENTS = elements
            try:
                return fused.fused_embedding(
                    ids,
                    word,
                    pos,
                    token_type_ids=types,
                    type_weight=typ,
                    norm_weight=norm.weight,
                    norm_bias=norm.bias,
                    eps=norm.eps,
                )
            finally:
                fused.CHUNK_ELEMENTS = saved

        return call

    default = fused.CHUNK_ELEMENTS
    return {
        "transformers BertEmbeddings": lambda: bert(ids, token_type_ids=types),
        f"fused, {default} elements a chunk (default)": chunked(default),
        "fused, one chunk": chunked(1 << 30),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--spin", type=int, default=0, help="busy-loop processes to run beside the timing")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--reverse", action="store_true", help="time the variants in the reverse order")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    shape = {"batch": 4, "length": 128, "width": 768, "vocab": 30522}
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.spin)]
    for process in spinners:
        process.start()
    load_before = os.getloadavg()
    variants = _variants(shape)
    if args.reverse:  # the order matters on a busy host: check a variant's figure is not its position's
        variants = dict(reversed(list(variants.items())))
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu = time.process_time()
    with torch.no_grad():
        for _ in range(5):
            for fn in variants.values():
                fn()
        for _ in range(args.rounds):
            for name, fn in variants.items():
                start = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - start) * 1e3)
    for process in spinners:
        process.terminate()
    print(
        json.dumps(
            {
                "spinning processes": args.spin,
                "order": list(variants),
                "threads": torch.get_num_threads(),
                "rounds": args.rounds,
                "load before": [round(x, 2) for x in load_before],
                "load after": [round(x, 2) for x in os.getloadavg()],
                "cpu s": round(time.process_time() - cpu, 1),
                "median ms": {name: round(statistics.median(values), 3) for name, values in times.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
