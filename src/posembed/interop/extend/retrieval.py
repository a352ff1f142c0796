"""What a longer position table buys: LongEmbed-style passkey and needle retrieval.

:func:`evaluate_extension` embeds the candidates of :mod:`posembed.interop.extend.retrieval_data` (one
shared filler per task and length, one planted fact each) and their queries with a
sentence-embedding model (mean pooling over tokens, then L2 normalisation, as sentence-transformers
does for all-MiniLM-L6-v2) under several *systems*, after LongEmbed (Zhu et al. 2024, section 4.2):

``truncate-T``
    the original model, each document cut to its first ``T`` tokens;
``chunk-C``
    the original model on consecutive ``C``-token chunks (the last one shorter), the mean of the
    L2-normalised chunk embeddings, each weighted by the document tokens it covers (a 14-token
    last chunk counts 14/510 of a full one);
``pcw-C``
    parallel context windows as LongEmbed runs them: ``C``-token windows, the last one moved
    back to end at the document's end so it is full, the mean of the windows' (unnormalised)
    embeddings;
``copy`` (LongEmbed's recurrent positions, RP) / ``interpolate`` (PI) / ``grouped`` (GP) / ``hierarchical``
    the model extended by :func:`posembed.interop.extend.extend_checkpoint` to ``N``, the smallest
    of ``targets`` that holds the document (longer ones are cut to the largest);
``tuned``
    ``copy`` with its new rows tuned (``posembed extend --finetune``), the original rows frozen.

Every query ranks all candidates of its task and length by cosine similarity; a hit is its own
document strictly first (ties count as misses). Each cell reports top-1 accuracy with a 95 %
Wilson score interval over its queries, and MRR. Inputs that are the same token sequence under
models that encode it identically (the original model, and ``copy`` / ``hierarchical`` / ``tuned``
within the original table, whose first rows are the trained ones bit for bit) are encoded once.
The protocol is fixed by :class:`BenchmarkConfig` and its seed; nothing is tuned on the results.
"""

from __future__ import annotations

import logging
import random
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from posembed.interop.extend.checkpoint import extend_checkpoint
from posembed.interop.extend.layout import read_layout
from posembed.interop.extend.methods import KEEPS_TRAINED_ROWS
from posembed.interop.extend.retrieval_data import (
    TASKS,
    Document,
    corpus_tokens,
    default_text,
    make_facts,
    plant_documents,
    read_text,
    split_text,
    spread_depths,
)
from posembed.interop.extend.retrieval_embed import Encoder, document_vectors, normalise, rank_scores, wrap
from posembed.interop.extend.retrieval_report import summarise, wilson

_normalise, _wrap = normalise, wrap  # the names the tests and earlier callers use

__all__ = [
    "BenchmarkConfig",
    "QUICK",
    "System",
    "build_documents",
    "evaluate_extension",
    "rank_scores",
    "Encoder",
    "PROGRESS_LOGGER",
]

logger = logging.getLogger(__name__)
#: where the one-line-per-cell progress goes when stderr is not a terminal
PROGRESS_LOGGER = "posembed.interop.extend.retrieval.progress"
#: LongEmbed's names for the systems (section 4.2)
LONGEMBED_NAMES = {
    "copy": "RP",
    "recurrent": "RP",
    "interpolate": "PI",
    "grouped": "GP",
    "pcw": "PCW",
    "tuned": "tuning (on RP)",
}


@dataclass(frozen=True)
class BenchmarkConfig:
    """The benchmark protocol. The defaults are the full benchmark (50 queries per task and length)."""

    tasks: tuple[str, ...] = TASKS
    lengths: tuple[int, ...] = (256, 512, 1024, 2048, 4096)  # document lengths in tokens, specials included
    queries: int = 50  # per task and length; also the number of candidates each query ranks
    targets: tuple[int, ...] = (1024, 2048, 4096)  # sizes the extension methods extend to
    methods: tuple[str, ...] = ("copy", "interpolate", "grouped", "hierarchical")
    finetune_steps: int = 60  # the ``tuned`` system's steps, tuned once at the largest target (0: none)
    truncate: tuple[int, ...] = (256, 512)
    chunk: int = 512  # chunk-C and pcw-C window size
    seed: int = 0  # the tuned system's seed and the first data seed
    data_seeds: int = 2  # data seeds ``seed, seed + 1, ...``: each its own filler spans and candidate pools
    batch_tokens: int = 8192

    def __post_init__(self) -> None:
        for name in ("lengths", "targets", "truncate"):
            values = getattr(self, name)
            if not values or any(not isinstance(v, int) or isinstance(v, bool) or v < 8 for v in values):
                raise ValueError(f"{name} must be ints of at least 8 tokens, got {values!r}")
        unknown = [t for t in self.tasks if t not in TASKS]
        if not self.tasks or unknown:
            raise ValueError(f"tasks must be among {', '.join(TASKS)}, got {self.tasks!r}")
        make_facts(self.tasks[0], self.queries)  # checks the count
        from posembed.interop.extend.methods import METHODS

        bad = [m for m in self.methods if m not in METHODS]
        if bad:
            raise ValueError(f"unknown extension methods {bad}; choose among {', '.join(METHODS)}")
        if not isinstance(self.finetune_steps, int) or self.finetune_steps < 0:
            raise ValueError(f"finetune_steps must be an int >= 0, got {self.finetune_steps!r}")
        if self.chunk < 8:
            raise ValueError(f"chunk must be at least 8 tokens, got {self.chunk!r}")
        if not isinstance(self.data_seeds, int) or isinstance(self.data_seeds, bool) or self.data_seeds < 1:
            raise ValueError(f"data_seeds must be an int >= 1, got {self.data_seeds!r}")

    @property
    def seeds(self) -> tuple[int, ...]:
        """The data seeds, each drawing its own filler spans, depths and passkeys."""
        return tuple(range(self.seed, self.seed + self.data_seeds))

    def target_for(self, length: int) -> int:
        """The extension size used for documents of ``length`` tokens."""
        fitting = [t for t in sorted(self.targets) if t >= length]
        return fitting[0] if fitting else max(self.targets)

    def systems(self) -> list[System]:
        systems = [System(f"truncate-{t}", "truncate", size=t) for t in self.truncate]
        systems.append(System(f"chunk-{self.chunk}", "chunk", size=self.chunk))
        systems.append(System(f"pcw-{self.chunk}", "pcw", size=self.chunk))
        systems += [System(m, "extend", method=m) for m in self.methods]
        if self.finetune_steps:
            systems.append(System("tuned", "extend", method="copy", finetune=self.finetune_steps))
        return systems


#: the ``--quick`` form: both tasks, 256 and 1024 tokens, 10 queries, one data seed, a 20-step tuned system
QUICK = BenchmarkConfig(lengths=(256, 1024), queries=10, targets=(1024,), finetune_steps=20, data_seeds=1)


@dataclass(frozen=True)
class System:
    """One way to embed a long document (see the module docstring)."""

    name: str
    kind: str  # "truncate", "chunk", "pcw" or "extend"
    size: int = 0  # truncate / chunk / pcw: tokens per input
    method: str = ""  # extend: the extension method
    finetune: int = 0  # extend: tuning steps for the new rows

    @property
    def exact_within_table(self) -> bool:
        """Whether inputs within the original table are encoded exactly as the original model does."""
        return self.kind != "extend" or (self.method in KEEPS_TRAINED_ROWS)

    @property
    def longembed(self) -> str:
        return LONGEMBED_NAMES.get("tuned" if self.finetune else self.method or self.kind, "")


# ---------------------------------------------------------------------- data


def build_documents(
    tokenizer, config: BenchmarkConfig, text: str, seed: int | None = None
) -> dict[tuple[str, int], list[Document]]:
    """Candidates per (task, length): ``config.queries`` documents sharing one filler span each.

    The filler is the benchmark part of ``text`` (its last tenth, :func:`split_text`); ``seed``
    (default ``config.seed``) is the data seed: it draws the spans, the depths and the passkeys.
    """
    tokens, starts = corpus_tokens(tokenizer, split_text(text)[1])
    seed = config.seed if seed is None else seed
    rng = random.Random(seed)
    documents = {}
    for task in config.tasks:
        facts = make_facts(task, config.queries, seed=seed)
        fact_ids = [tokenizer(f.sentence, add_special_tokens=False)["input_ids"] for f in facts]
        for length in config.lengths:
            depths = spread_depths(len(facts), rng)
            documents[task, length] = plant_documents(tokens, starts, fact_ids, facts, depths, length - 2, rng)
    return documents


# ---------------------------------------------------------------------- evaluation


def _load(folder: Path):
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(folder)).eval()


def _cell(
    system: System,
    task: str,
    length: int,
    used: int,
    pools: list[tuple[int, list[Document], list[bool], list[float]]],
    seconds: float,
) -> dict:
    """One (task, system, length) cell over every data seed's pool: ``pools`` holds per seed its
    documents, hits and reciprocal ranks; each outcome is ``[depth, hit, data seed]``."""
    outcomes = [[round(d.depth, 4), int(h), seed] for seed, docs, hits, _ in pools for d, h in zip(docs, hits)]
    reciprocal = [r for *_, ranks in pools for r in ranks]
    n, k = len(outcomes), sum(hit for _, hit, _ in outcomes)
    low, high = wilson(k, n)
    return {
        "task": task,
        "system": system.name,
        "longembed": system.longembed,
        "length": length,
        "positions_used": min(used, length),
        "accuracy": k / n,
        "low": low,
        "high": high,
        "mrr": sum(reciprocal) / n,
        "hits": k,
        "queries": n,
        "candidates": len(pools[0][1]),
        "data_seeds": [seed for seed, *_ in pools],
        "seconds": round(seconds, 2),
        "outcomes": outcomes,
    }


def _jobs(model_path: Path, config: BenchmarkConfig, workdir: Path, text_path: Path):
    """(how to get the model folder, system, lengths) in the order they run; extended folders built lazily.

    A method that keeps the trained rows grows a table whose first rows do not depend on its
    size (``copy``, ``hierarchical``, ``tuned``): one model at the largest target serves every
    length (tuned once). ``interpolate`` and ``grouped`` depend on the size: one model per target.
    """
    systems = config.systems()
    for system in systems:
        if system.kind != "extend":
            yield (lambda: model_path), system, list(config.lengths)
    for system in systems:
        if system.kind != "extend":
            continue
        targets = sorted(set(config.targets))
        if system.exact_within_table:
            groups = [(targets[-1], list(config.lengths))]
        else:
            groups = [(t, [L for L in config.lengths if config.target_for(L) == t]) for t in targets]
        for target, lengths in groups:
            if lengths:
                out = workdir / f"{system.name}-{target}"

                def make(s=system, t=target, o=out):
                    return extend_checkpoint(
                        model_path, o, t, s.method, finetune=s.finetune, text=text_path, seed=config.seed
                    ).out

                yield make, system, lengths


def evaluate_extension(
    model_path: str | Path,
    config: BenchmarkConfig | None = None,
    *,
    text: str | Path | None = None,
    progress: bool | str | None = False,
    on_cell: Callable[[dict], None] | None = None,
    done: Mapping[tuple[str, str, int], dict] | None = None,
) -> dict:
    """Run the benchmark on a BERT-family sentence-embedding checkpoint folder.

    Args:
        model_path: checkpoint folder (e.g. all-MiniLM-L6-v2).
        config: the protocol (default :class:`BenchmarkConfig`, the full benchmark; :data:`QUICK`).
        text: text file for the filler and the tuning pairs (default: the shipped tinyshakespeare).
        progress: ``False`` none; ``None``/``True`` a bar on a terminal, else one INFO line per
            cell on :data:`PROGRESS_LOGGER`; or ``"bar"``, ``"lines"``, ``"off"``.
        on_cell: called with each cell as it is finished (the CLI keeps them in a JSON-lines file,
            so a long run that stops keeps what it measured).
        done: cells measured earlier under this same protocol, by ``(task, system, length)``: they
            are kept as they are, and a system whose cells are all done is not built (how an
            interrupted run resumes).

    Returns:
        a JSON-able dict: ``protocol``, ``cells`` (one per task, system and length, with its
        interval and per-query outcomes over every data seed), ``summary`` (the verdicts), ``seconds``.
    """
    from transformers import AutoTokenizer

    config = config or BenchmarkConfig()
    model_path = Path(model_path)
    positions = read_layout(model_path).positions
    _check_sizes(config, positions)
    text_path = Path(text) if text is not None else default_text()
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    data = _Data(tokenizer, config, read_text(text_path), positions)
    with tempfile.TemporaryDirectory(prefix="posembed-extend-eval-") as scratch:
        jobs = list(_jobs(model_path, config, Path(scratch), text_path))
        cells, seconds = _run_jobs(jobs, data, progress, on_cell, done or {})
    protocol = {
        **asdict(config),
        "model": str(model_path),
        "original_positions": positions,
        "text": str(text_path),
        "pooling": "mean, L2-normalised",
        "seeds": list(config.seeds),
        "interval": (
            "95% Wilson score interval over the queries of a cell (all data seeds; conditional on their filler spans)"
        ),
        "facts": {
            task: [asdict(f) for f in make_facts(task, config.queries, seed=config.seed)] for task in config.tasks
        },
    }
    seconds = {k: round(v, 2) for k, v in seconds.items()}
    logger.info("extend-eval on %s: %d cells in %.0f s", model_path, len(cells), sum(seconds.values()))
    return {"protocol": protocol, "cells": cells, "seconds": seconds, "summary": summarise(cells, positions)}


class _Data:
    """The documents and wrapped queries of every data seed, and the shared short-input cache."""

    def __init__(self, tokenizer, config: BenchmarkConfig, text: str, positions: int):
        self.tokenizer, self.config, self.positions, self.shared = tokenizer, config, positions, {}
        self.documents = {seed: build_documents(tokenizer, config, text, seed) for seed in config.seeds}
        self.queries = {
            (seed, task): [
                wrap(tokenizer, tokenizer(f.query, add_special_tokens=False)["input_ids"])
                for f in make_facts(task, config.queries, seed=seed)
            ]
            for seed in config.seeds
            for task in config.tasks
        }


def _run_jobs(jobs: list, data: _Data, progress, on_cell, done: Mapping) -> tuple[list[dict], dict[str, float]]:
    from posembed._utils.progress import Progress, progress_mode

    tasks = data.config.tasks
    keys = [(task, system.name, length) for _, system, lengths in jobs for task in tasks for length in lengths]
    cells, seconds = [], {}
    with Progress(
        len(keys),
        sum(key in done for key in keys),
        mode=progress_mode(progress),
        desc="extend-eval",
        unit="cell",
        logger=logging.getLogger(PROGRESS_LOGGER),
        settle=3,
    ) as bar:
        for make_folder, system, lengths in jobs:
            encoder = None
            if any((task, system.name, length) not in done for task in tasks for length in lengths):
                bar.working_on(f"{system.name}: building the model")
                built = time.perf_counter()
                encoder = Encoder(
                    _load(make_folder()),
                    data.tokenizer.pad_token_id,
                    data.config.batch_tokens,
                    data.shared if system.exact_within_table else None,
                    data.positions,
                )
                seconds[system.name] = seconds.get(system.name, 0.0) + time.perf_counter() - built
            for task in tasks:
                for length in lengths:
                    cell = done.get((task, system.name, length))
                    if cell is None:
                        bar.working_on(f"{system.name}, {task} @ {length}")
                        cell = _measure(system, encoder, data, task, length)
                        if on_cell is not None:
                            on_cell(cell)
                        bar.advance(f"{system.name}, {task} @ {length}: {cell['accuracy']:.2f}", cell["seconds"])
                    cells.append(cell)
                    seconds[system.name] = seconds.get(system.name, 0.0) + cell["seconds"]
            del encoder
    return cells, seconds


def _measure(system: System, encoder: Encoder, data: _Data, task: str, length: int) -> dict:
    """One cell: every data seed's queries rank that seed's candidates."""
    started = time.perf_counter()
    used = system.size if system.kind == "truncate" else data.config.target_for(length)
    pools = []
    for seed in data.config.seeds:
        docs = data.documents[seed][task, length]
        vectors = document_vectors(system, encoder, data.tokenizer, docs, used)
        hits, reciprocal = rank_scores(normalise(encoder(data.queries[seed, task])), vectors)
        pools.append((seed, docs, hits, reciprocal))
    return _cell(system, task, length, used, pools, time.perf_counter() - started)


def _check_sizes(config: BenchmarkConfig, positions: int) -> None:
    too_long = [t for t in (*config.truncate, config.chunk) if t > positions]
    if too_long:
        raise ValueError(f"truncation/chunk sizes {too_long} exceed the checkpoint's {positions} positions")
    too_short = [t for t in config.targets if t <= positions]
    if too_short:
        raise ValueError(f"extension targets {too_short} must be larger than the checkpoint's {positions} positions")
