"""Time the current tree against a git revision, side by side: catch a fall before it lands.

The revision is checked out with ``git worktree add`` into a temporary folder (removed at the
end). Every measurement is a fresh child process started with ``PYTHONPATH`` at one tree's
``src`` (the child checks which ``posembed`` it imported), and the two trees alternate
``A B A B ...`` for ``--rounds`` rounds, so a change in the machine's load hits both alike. Each
child also times a reference that does not come from posembed (transformers) in the same
process, so the ratio posembed / reference is read in one process under one load.

Works (``--work``, comma-separated; default all three):

- ``rope``: :class:`~posembed.schemes.rotary.rope.RotaryEmbedding` on q and k ``(4, 16, 2048, 64)``
  fp32 with position ids ``(4, 2048)``: forward+backward of ``a.sum() + b.sum()`` and forward
  only, against transformers' ``apply_rotary_pos_emb`` (its cos/sin built each call, as its
  rotary module does).
- ``embedding``: the embedding block at BERT-base width (``TransformerEmbeddings``, learned
  positions, segments), ``(16, 512)`` ids: forward in eval mode without grad, and
  forward+backward in train mode (dropout 0.1), against transformers' ``BertEmbeddings``
  holding the same tables.
- ``lab``: one training step (forward, cross-entropy, backward, AdamW) of the lab's ``Decoder``
  with RoPE at nanoGPT's small CPU size (4 layers, 4 heads, width 128, block 64, batch 12),
  against transformers' GPT-2 of the same size (learned positions).

The report gives, per case, the median over rounds of each child's median for each tree
(min–max in brackets), the ratio current / revision (below 1: the current tree is faster), and
for each tree the median of the per-process ratios reference / posembed.

::

    python benchmarks/compare_revision.py eac5ac3                    # all works, 4 rounds
    python benchmarks/compare_revision.py HEAD~5 --work rope --rounds 6 --repeats 20
    python benchmarks/compare_revision.py eac5ac3 --json out.json

Set ``HF_HUB_OFFLINE=1`` (the script sets it for the children). A shared machine widens the
spread: quote medians and the min–max, and say how busy the machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

WORKS = ("rope", "embedding", "lab")
ROOT = Path(__file__).resolve().parent.parent

# -------------------------------------------------------------------------------- child side


def _time_cases(cases: dict[str, Callable[[], object]], repeats: int, warmup: int) -> dict[str, float]:
    """Median milliseconds of each case; the cases take turns inside every repeat."""
    for _ in range(warmup):
        for fn in cases.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def _rope_cases() -> tuple[dict[str, Callable[[], object]], dict[str, tuple[str, str]]]:
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from posembed.schemes.rotary.rope import RotaryEmbedding

    batch, heads, length, dim = 4, 16, 2048, 64
    q = torch.randn(batch, heads, length, dim, requires_grad=True)
    k = torch.randn(batch, heads, length, dim, requires_grad=True)
    positions = torch.arange(length).expand(batch, length)
    rope = RotaryEmbedding(dim)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

    def ours_backward():
        a, b = rope(q, k, positions)
        (a.sum() + b.sum()).backward()
        q.grad = k.grad = None

    def ours_forward():
        with torch.no_grad():
            rope(q, k, positions)

    def theirs_backward():
        freqs = positions[..., None].float() * inv_freq  # (B, T, D/2), as transformers' rotary module
        emb = torch.cat((freqs, freqs), -1)
        a, b = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
        (a.sum() + b.sum()).backward()
        q.grad = k.grad = None

    cases = {
        "posembed forward+backward": ours_backward,
        "posembed forward": ours_forward,
        "transformers forward+backward": theirs_backward,
    }
    return cases, {"forward+backward": ("posembed forward+backward", "transformers forward+backward")}


def _embedding_cases() -> tuple[dict[str, Callable[[], object]], dict[str, tuple[str, str]]]:
    import torch
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    from posembed.nn.embedding.block import TransformerEmbeddings
    from posembed.schemes.absolute.learned import LearnedAbsolute

    config = BertConfig(hidden_dropout_prob=0.1)  # BERT-base: 30522 x 768, 512 positions, 2 segments
    bert = BertEmbeddings(config)
    block = TransformerEmbeddings(
        config.vocab_size,
        config.hidden_size,
        position=LearnedAbsolute(config.max_position_embeddings, config.hidden_size),
        type_vocab_size=config.type_vocab_size,
        pad_token_id=config.pad_token_id,
        dropout=config.hidden_dropout_prob,
    )
    with torch.no_grad():
        block.token_embeddings.weight.copy_(bert.word_embeddings.weight)
        block.position.embedding.weight.copy_(bert.position_embeddings.weight)
        block.token_type_embeddings.weight.copy_(bert.token_type_embeddings.weight)
    ids = torch.randint(1, config.vocab_size, (16, 512))
    types = torch.zeros_like(ids)
    types[:, 256:] = 1

    def forward(module, call):
        def run():
            module.eval()
            with torch.no_grad():
                call()

        return run

    def backward(module, call):
        def run():
            module.train()
            call().sum().backward()
            for p in module.parameters():
                p.grad = None

        return run

    ours = lambda: block(ids, token_type_ids=types)  # noqa: E731
    theirs = lambda: bert(input_ids=ids, token_type_ids=types)  # noqa: E731
    cases = {
        "posembed forward (eval)": forward(block, ours),
        "transformers forward (eval)": forward(bert, theirs),
        "posembed forward+backward (train)": backward(block, ours),
        "transformers forward+backward (train)": backward(bert, theirs),
    }
    ratios = {
        "forward (eval)": ("posembed forward (eval)", "transformers forward (eval)"),
        "forward+backward (train)": ("posembed forward+backward (train)", "transformers forward+backward (train)"),
    }
    return cases, ratios


def _lab_cases() -> tuple[dict[str, Callable[[], object]], dict[str, tuple[str, str]]]:
    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel

    from posembed.nn.model.transformer import Decoder
    from posembed.schemes.rotary.rope import RotaryEmbedding

    vocab, depth, heads, dim, block, batch = 65, 4, 4, 128, 64, 12  # nanoGPT's CPU recipe, characters
    scheme = RotaryEmbedding(dim // heads, max_len=block)
    ours = Decoder(vocab, dim=dim, depth=depth, num_heads=heads, scheme=scheme, dropout=0.0)
    gpt2 = GPT2LMHeadModel(GPT2Config(
        vocab_size=vocab, n_positions=block, n_embd=dim, n_layer=depth, n_head=heads,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    ))  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    data = torch.randint(0, vocab, (100_000,), generator=generator)

    def step(model, logits_of):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model.train()

        def run():
            start = torch.randint(0, len(data) - block - 1, (batch,), generator=generator)
            x = torch.stack([data[s : s + block] for s in start])
            y = torch.stack([data[s + 1 : s + block + 1] for s in start])
            loss = F.cross_entropy(logits_of(x).reshape(-1, vocab), y.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        return run

    cases = {
        "posembed Decoder (RoPE) step": step(ours, ours),
        "transformers GPT-2 step": step(gpt2, lambda x: gpt2(input_ids=x).logits),
    }
    return cases, {"training step": ("posembed Decoder (RoPE) step", "transformers GPT-2 step")}


CHILD_WORKS = {"rope": _rope_cases, "embedding": _embedding_cases, "lab": _lab_cases}


def child(work: str, repeats: int, warmup: int, threads: int) -> dict:
    """Run one work in this process (``posembed`` from ``PYTHONPATH``) and return its figures."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    import posembed

    cases, ratios = CHILD_WORKS[work]()
    ms = _time_cases(cases, repeats, warmup)
    return {
        "posembed": str(Path(posembed.__file__).resolve().parent),
        "ms": ms,
        "ratios": {name: ms[ref] / ms[ours] for name, (ours, ref) in ratios.items()},
    }


# ------------------------------------------------------------------------------- parent side


def _run_child(src: Path, work: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    command = [
        sys.executable, str(Path(__file__).resolve()), "--child", work,
        "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--threads", str(args.threads),
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode:
        raise RuntimeError(f"{work} under {src} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = (src / "posembed").resolve()
    if Path(result["posembed"]) != expected:
        raise RuntimeError(f"the child imported posembed from {result['posembed']}, not {expected}")
    return result


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def report(revision: str, results: dict[str, dict[str, list[dict]]], trees: tuple[str, str]) -> str:
    """Markdown tables: per work, every case's medians for both trees and the ratios."""
    old, new = trees
    lines = []
    for work, by_tree in results.items():
        rounds = len(by_tree[new])
        lines += [f"### {work} ({rounds} rounds, ms: median of the per-process medians, min–max)", ""]
        lines += [f"| case | {old} | current | current / {old} |", "|---|---|---|---|"]
        for case in by_tree[new][0]["ms"]:
            a = [r["ms"][case] for r in by_tree[old]]
            b = [r["ms"][case] for r in by_tree[new]]
            ratio = statistics.median(y / x for x, y in zip(a, b))
            lines.append(f"| {case} | {_spread(a)} | {_spread(b)} | {ratio:.2f}x |")
        lines += ["", f"| reference / posembed, same process | {old} | current |", "|---|---|---|"]
        for name in by_tree[new][0]["ratios"]:
            a = [r["ratios"][name] for r in by_tree[old]]
            b = [r["ratios"][name] for r in by_tree[new]]
            lines.append(f"| {name} | {statistics.median(a):.2f}x | {statistics.median(b):.2f}x |")
        lines.append("")
    return "\n".join(lines)


def _worktree(revision: str, folder: Path) -> str:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", f"{revision}^{{commit}}"], capture_output=True, text=True
    )
    if commit.returncode:
        raise SystemExit(f"not a git revision here: {revision!r} ({commit.stderr.strip()})")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), revision], check=True,
                   capture_output=True)  # fmt: skip
    return commit.stdout.strip()


def compare(args: argparse.Namespace) -> str:
    works = [w.strip() for w in args.work.split(",") if w.strip()]
    unknown = sorted(set(works) - set(WORKS))
    if unknown:
        raise SystemExit(f"unknown work(s) {unknown}; choose from {', '.join(WORKS)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed run still removes its worktree
    with tempfile.TemporaryDirectory(prefix="posembed-rev-") as tmp:
        folder = Path(tmp) / "tree"
        commit = _worktree(args.revision, folder)
        try:
            trees = {commit: folder / "src", "current": ROOT / "src"}
            results: dict[str, dict[str, list[dict]]] = {w: {t: [] for t in trees} for w in works}
            for round_ in range(args.rounds):
                for work in works:
                    for name, src in trees.items():  # A B A B ...
                        results[work][name].append(_run_child(src, work, args))
                print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], capture_output=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = report(commit, results, (commit, "current"))
    text += f"\ntorch threads {args.threads}, {args.repeats} timed repeats per process; "
    text += f"load average at the end {load:.1f}\n"
    if args.json:
        Path(args.json).write_text(json.dumps({"revision": commit, "results": results}, indent=1))
    return text


def _positive_int(text: str) -> int:
    """An argparse type: an int >= 1, else an error naming the value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revision", nargs="?", help="the git revision to time the current tree against")
    parser.add_argument("--work", default=",".join(WORKS), help=f"comma-separated, from {', '.join(WORKS)}")
    parser.add_argument("--rounds", type=_positive_int, default=4, help="A B pairs of processes per work (default 4)")
    parser.add_argument("--repeats", type=_positive_int, default=10, help="timed repeats per process (default 10)")
    parser.add_argument("--warmup", type=_positive_int, default=3, help="untimed repeats per process (default 3)")
    parser.add_argument("--threads", type=_positive_int, default=2, help="torch threads in each child (default 2)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed to one child")
    parser.add_argument("--json", help="also write every child's figures here")
    parser.add_argument("--child", choices=WORKS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.repeats, args.warmup, args.threads)))
        return
    if not args.revision:
        parser.error("give the git revision to compare against (e.g. HEAD~1 or eac5ac3)")
    print(compare(args))


if __name__ == "__main__":
    main()
