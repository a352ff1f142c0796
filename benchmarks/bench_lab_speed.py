"""The lab against a nanoGPT-style reference: one training step, and a whole run.

nanoGPT's CPU recipe (4 layers, 4 heads, width 128, block 64, batch 12, tinyshakespeare):

- ``step``: one training step (batch, forward, loss, backward, clip, AdamW) of the lab's
  ``Decoder`` (learned absolute positions, built and optimised as the lab does: with its defaults,
  and with the calibration preset's ``bias=False`` and fused AdamW) and of
  :class:`posembed.bench.nanogpt_ref.NanoGPT` with nanoGPT's CPU optimizer, interleaved step by
  step in one process; medians of wall time and of this thread's CPU time
  (the second is what to trust on a loaded machine at 1 thread), at each ``--threads``.
- ``levers``: the lab defaults' step several ways against the reference, interleaved step by
  step at 1 thread (median thread CPU ms): eager; under ``torch.compile`` (Inductor, the model's
  forward and backward; the first step's seconds, compile included, reported apart); inside
  :func:`posembed.kernels.cpu_matmul.bf16_matmuls` (fp32 matrix products in oneDNN's bf16 math
  mode, AMX where the CPU has it; attention kept fp32); and under bf16 autocast on the CPU; and
  the calibration preset's step eager and inside ``bf16_matmuls``. Each but eager changes the
  arithmetic.
- ``run``: the whole calibration run, :func:`posembed.lab.calibration.run_calibration`'s trial
  (:func:`~posembed.lab.training.train.train_trial`, scoring the whole validation split at the end)
  against :func:`posembed.bench.nanogpt_ref.train_reference` (nanoGPT's loop: 20 + 20 eval
  batches every 250 iterations), interleaved run by run (A B A B ...), wall seconds.
- ``profile``: where each ``step`` model's step spends its time at 1 thread: torch.profiler's
  self CPU time per step (ms), summed into matrix products (``mm``/``addmm``/``bmm``), attention
  (SDPA forward and backward), GELU, LayerNorm, the optimizer (inside ``Optimizer.step``), copies
  and the rest, beside the step's median thread CPU time. The matrix products do the same
  arithmetic in every model (the lab's defaults add the biases: ``addmm`` copies each bias into
  its output first), so their share bounds what eager changes elsewhere can gain.
- ``compile``: whether ``torch.compile`` (Inductor) makes the lab's CPU step faster: the ``full``
  preset's trial (the study's cost: ``bias=False``, the for-loop AdamW) eager, with the fused
  AdamW kernel, compiled (forward and backward, ``fullgraph=True``, each ``--compile-modes``),
  compiled with the fused AdamW, and compiled with a compiled optimizer step, interleaved step by
  step with the reference at each ``--threads``: medians of wall and thread CPU ms, and each
  model's first step in seconds (the compile; Inductor's FX graph cache as found, so run it in
  a fresh ``TORCHINDUCTOR_CACHE_DIR`` for the cold cost and again for the warm one).
- ``determinism``: the ``full`` preset's trial trained ``--steps`` steps by the lab's loop
  (:func:`~posembed.lab.training.train.train_model`) under ``torch.compile`` in two fresh processes (the
  first may compile cold, the second loads from the cache): whether their losses are bit for bit
  the same, and how far they are from the eager losses.
- ``run --trial full --compile``: the whole ``full`` trial, compile included, beside the eager
  trial and the reference loop (the CPU is compiled here by patching
  :func:`~posembed.lab.training.train.compile_training`, which never compiles the CPU itself).

Usage::

    python benchmarks/bench_lab_speed.py [--threads 1 2] [--rounds 60] [--steps 2000] [--runs 1]
                                         [--only step|run|profile|levers|compile|determinism]
                                         [--trial calibration|full] [--compile] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

from posembed.bench.nanogpt_ref import NanoGPT, configure_optimizer, train_reference
from posembed.lab.calibration import NANOGPT_CPU
from posembed.lab.data import DEFAULT_TEXT, resolve_text_path

CFG = NANOGPT_CPU


def _step_fn(model, optimizer, data: torch.Tensor, *, foreach_clip: bool):
    params = [p for p in model.parameters() if p.requires_grad]
    generator = torch.Generator().manual_seed(0)
    block, batch = CFG.context, CFG.batch

    def step():
        starts = torch.randint(len(data) - block, (batch,), generator=generator)
        windows = torch.stack([data[s : s + block + 1] for s in starts.tolist()])  # (B, T + 1)
        loss = F.cross_entropy(model(windows[:, :-1]).flatten(0, 1), windows[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=foreach_clip or None)
        optimizer.step()

    return step


def _char_data() -> tuple[torch.Tensor, int]:
    """The default text's first 90 % as character ids, and the vocabulary size."""
    text = resolve_text_path(DEFAULT_TEXT).read_text(encoding="utf-8")
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    return torch.tensor([lookup[c] for c in text[: int(0.9 * len(text))]], dtype=torch.long), len(chars)


def _reference_step(data: torch.Tensor, vocab: int):
    """The nanoGPT-style reference's training step (eager fp32, nanoGPT's CPU recipe), seeded with ``CFG.seed``."""
    torch.manual_seed(CFG.seed)
    reference = NanoGPT(vocab, dim=CFG.dim, depth=CFG.depth, heads=CFG.heads, block=CFG.context)
    optimizer = configure_optimizer(reference, lr=CFG.lr, beta2=CFG.beta2, weight_decay=CFG.weight_decay)
    return _step_fn(reference, optimizer, data, foreach_clip=False)


def _interleaved(steps: dict, rounds: int) -> dict:
    """Each step of ``steps`` (name -> callable) warmed up 5 times, then run ``rounds`` times interleaved,
    one of each in turn: name -> medians of its ``wall_ms`` and ``thread_cpu_ms``."""
    for fn in steps.values():
        for _ in range(5):
            fn()
    wall: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            w, c = time.perf_counter(), time.thread_time()
            fn()
            cpu[name].append((time.thread_time() - c) * 1e3)
            wall[name].append((time.perf_counter() - w) * 1e3)
    return {
        name: {"wall_ms": statistics.median(wall[name]), "thread_cpu_ms": statistics.median(cpu[name])}
        for name in steps
    }


def _with_speedups(out: dict) -> dict:
    """:func:`_interleaved`'s rows, each after the reference's (the first) with its ratios to it."""
    ref = out["nanoGPT-style reference"]
    for name in list(out)[1:]:
        out[name]["speedup (reference / this), wall"] = ref["wall_ms"] / out[name]["wall_ms"]
        out[name]["speedup (reference / this), thread CPU"] = ref["thread_cpu_ms"] / out[name]["thread_cpu_ms"]
    return out


def _steps() -> dict:
    """name -> one training step: the reference, and the lab's decoder as the lab builds and steps
    it, with its defaults (biases, the for-loop AdamW) and with the calibration preset's nanoGPT
    recipe (``bias=False``, fused AdamW)."""
    from posembed.lab.tasks import make_task
    from posembed.lab.training.train import build_trial_model, make_optimizer

    data, vocab = _char_data()
    steps = {"nanoGPT-style reference": _reference_step(data, vocab)}
    for name, cfg in (
        ("posembed Decoder, lab defaults", dataclasses.replace(CFG, bias=True, optimizer="adamw")),
        ("posembed Decoder, calibration preset", CFG),
    ):
        model = build_trial_model(cfg, make_task(cfg))
        steps[name] = _step_fn(model, make_optimizer(model, cfg, torch.device("cpu")), data, foreach_clip=True)
    return steps


def bench_step(threads: int, rounds: int) -> dict:
    """Each of :func:`_steps` interleaved step by step: medians of wall and thread CPU ms."""
    torch.set_num_threads(threads)
    out = _interleaved(_steps(), rounds)
    ref = out["nanoGPT-style reference"]
    for name in list(out)[1:]:
        out[f"speedup (reference / {name})"] = {k: ref[k] / out[name][k] for k in ref}
    return out


#: profiler op name -> the part of the step it is counted in (first match; the rest is "other")
PARTS = (
    ("optimizer", ("Optimizer.step",)),
    ("matrix products", ("aten::mm", "aten::addmm", "aten::bmm")),
    ("attention", ("scaled_dot_product",)),
    ("GELU", ("aten::gelu",)),
    ("LayerNorm", ("layer_norm",)),
    ("copies", ("aten::copy_", "aten::_to_copy", "aten::clone")),
)


def bench_profile(steps_per_model: int) -> dict:
    """Each of :func:`_steps` at 1 thread under torch.profiler: self CPU ms per step by part
    (:data:`PARTS`; ops inside ``Optimizer.step`` count as the optimizer), and the median thread
    CPU ms of the same steps. The profiler's times are wall time inside each op (on a loaded
    machine they include time the thread waited), so read the shares (``share_by_part``)."""
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    out: dict[str, dict] = {}
    for name, fn in _steps().items():
        for _ in range(5):
            fn()
        cpu = []
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps_per_model):
                c = time.thread_time()
                fn()
                cpu.append((time.thread_time() - c) * 1e3)
        parts = dict.fromkeys([part for part, _ in PARTS] + ["other"], 0.0)
        events = prof.events()
        in_optimizer = [(e.time_range.start, e.time_range.end) for e in events if e.name.startswith("Optimizer.step")]
        for event in events:
            start = event.time_range.start
            inside = any(a <= start < b for a, b in in_optimizer)
            part = (
                "optimizer"
                if inside
                else next((p for p, keys in PARTS[1:] if any(k in event.name for k in keys)), "other")
            )
            parts[part] += event.self_cpu_time_total / 1e3 / steps_per_model
        total = sum(parts.values())
        out[name] = {
            "thread_cpu_ms": statistics.median(cpu),
            "self_cpu_ms_by_part": parts,
            "share_by_part": {part: ms / total for part, ms in parts.items()},
        }
    return out


def bench_levers(rounds: int) -> dict:
    """:func:`_steps`'s reference and lab defaults, the latter also compiled, in bf16 matmul mode
    and under bf16 autocast; see the module docstring."""
    from posembed.kernels.cpu_matmul import bf16_matmuls
    from posembed.lab.tasks import make_task
    from posembed.lab.training.train import build_trial_model, make_optimizer

    torch.set_num_threads(1)
    data, vocab = _char_data()
    cfg = dataclasses.replace(CFG, bias=True, optimizer="adamw")

    def lab(wrap=None, mode=None, trial=cfg):
        torch.manual_seed(CFG.seed)
        model = build_trial_model(trial, make_task(trial))
        optimizer = make_optimizer(model, trial, torch.device("cpu"))
        inner = _step_fn(wrap(model) if wrap else model, optimizer, data, foreach_clip=True)

        def step():
            context = (
                torch.autocast("cpu", dtype=torch.bfloat16) if mode == "autocast" else bf16_matmuls(mode == "bf16")
            )
            with context:
                inner()

        return step

    steps = {
        "nanoGPT-style reference": _reference_step(data, vocab),
        "lab defaults, eager": lab(),
        "lab defaults, torch.compile": lab(wrap=torch.compile),
        "lab defaults, bf16 matmuls": lab(mode="bf16"),
        "lab defaults, bf16 autocast": lab(mode="autocast"),
        "calibration preset, eager": lab(trial=CFG),
        "calibration preset, bf16 matmuls": lab(mode="bf16", trial=CFG),
    }
    start = time.perf_counter()
    steps["lab defaults, torch.compile"]()
    compile_s = time.perf_counter() - start
    for fn in steps.values():
        for _ in range(5):
            fn()
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            c = time.thread_time()
            fn()
            cpu[name].append((time.thread_time() - c) * 1e3)
    out: dict = {name: {"thread_cpu_ms": statistics.median(v)} for name, v in cpu.items()}
    ref = out["nanoGPT-style reference"]["thread_cpu_ms"]
    for name in list(out)[1:]:
        out[name]["speedup (reference / this)"] = ref / out[name]["thread_cpu_ms"]
    out["lab defaults, torch.compile"]["first step (compile; Inductor cache as found), wall s"] = compile_s
    return out


def full_trial():
    """The ``full`` preset's trial (the study's cost): nanoGPT's CPU size, ``bias=False``, for-loop AdamW."""
    from posembed.lab.presets import get_preset

    return get_preset("full").bases[0]


def compile_variants(modes: tuple[str, ...] = ("default",)) -> list[tuple[str, dict]]:
    """``(name, how)`` for each lab step :func:`bench_compile` times: ``how`` holds ``optimizer``
    (``adamw`` or ``adamw_fused``), ``mode`` (``None``: eager; else the ``torch.compile`` mode,
    ``"default"`` meaning ``mode=None``) and ``compile_optimizer``."""
    out = [
        ("full trial, eager", {"optimizer": "adamw", "mode": None, "compile_optimizer": False}),
        ("full trial, eager, fused AdamW", {"optimizer": "adamw_fused", "mode": None, "compile_optimizer": False}),
    ]
    for mode in modes:
        out.append((f"full trial, compiled ({mode})", {"optimizer": "adamw", "mode": mode, "compile_optimizer": False}))
    out += [
        (
            "full trial, compiled (default), fused AdamW",
            {"optimizer": "adamw_fused", "mode": "default", "compile_optimizer": False},
        ),
        (
            "full trial, compiled (default), compiled AdamW",
            {"optimizer": "adamw", "mode": "default", "compile_optimizer": True},
        ),
    ]
    return out


def _compiled(model, mode: str):
    return torch.compile(model, fullgraph=True, mode=None if mode == "default" else mode)


def bench_compile(threads: int, rounds: int, modes: tuple[str, ...] = ("default",)) -> dict:
    """The reference and each of :func:`compile_variants` interleaved step by step at ``threads``:
    medians of wall and thread CPU ms, ratios to the reference, each first step's wall seconds."""
    from posembed.lab.tasks import make_task
    from posembed.lab.training.train import build_trial_model, make_optimizer

    torch.set_num_threads(threads)
    data, vocab = _char_data()
    steps = {"nanoGPT-style reference": _reference_step(data, vocab)}
    first: dict[str, float] = {}
    for name, how in compile_variants(modes):
        cfg = dataclasses.replace(full_trial(), optimizer=how["optimizer"])
        torch.manual_seed(cfg.seed)
        model = build_trial_model(cfg, make_task(cfg))
        optimizer = make_optimizer(model, cfg, torch.device("cpu"))
        if how["compile_optimizer"]:
            optimizer.step = torch.compile(optimizer.step)  # the learning rate stays put here: no recompiles
        steps[name] = _step_fn(
            model if how["mode"] is None else _compiled(model, how["mode"]), optimizer, data, foreach_clip=True
        )
        start = time.perf_counter()
        steps[name]()
        first[name] = time.perf_counter() - start
    out = _with_speedups(_interleaved(steps, rounds))
    for name, seconds in first.items():
        out[name]["first step, wall s"] = seconds
    out["inductor cache"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "(default)")
    return out


def matmul_variants() -> list[tuple[str, dict]]:
    """``(name, settings)`` for each lab step :func:`bench_matmuls` times: the ``full`` preset's trial with
    these :class:`~posembed.lab.config.TrialConfig` settings (``optimizer``, ``matmuls``)."""
    return [
        ("full trial, fp32", {"optimizer": "adamw", "matmuls": "fp32"}),
        ("full trial, fp32, fused AdamW", {"optimizer": "adamw_fused", "matmuls": "fp32"}),
        ("full trial, matmuls=bf16", {"optimizer": "adamw", "matmuls": "bf16"}),
        ("full trial, matmuls=bf16, fused AdamW", {"optimizer": "adamw_fused", "matmuls": "bf16"}),
    ]


def bench_matmuls(threads: int, rounds: int) -> dict:
    """The reference (eager fp32, nanoGPT's CPU recipe) and each of :func:`matmul_variants` interleaved step by
    step at ``threads``, each lab step inside ``bf16_matmuls(cfg.matmuls == "bf16")`` as the lab's training loop
    runs it: medians of wall and thread CPU ms and their ratios to the reference."""
    from posembed.kernels.cpu_matmul import bf16_matmuls
    from posembed.lab.tasks import make_task
    from posembed.lab.training.train import build_trial_model, make_optimizer

    torch.set_num_threads(threads)
    data, vocab = _char_data()
    steps = {"nanoGPT-style reference": _reference_step(data, vocab)}
    for name, settings in matmul_variants():
        cfg = dataclasses.replace(full_trial(), **settings)
        torch.manual_seed(cfg.seed)
        model = build_trial_model(cfg, make_task(cfg))
        inner = _step_fn(model, make_optimizer(model, cfg, torch.device("cpu")), data, foreach_clip=True)

        def step(inner=inner, bf16=cfg.matmuls == "bf16"):
            with bf16_matmuls(bf16):
                inner()

        steps[name] = step
    out = _with_speedups(_interleaved(steps, rounds))
    return out


def trial_losses(steps: int, *, compiled: bool, threads: int = 1) -> list[float]:
    """The ``full`` preset's trial shortened to ``steps`` steps, trained by the lab's loop
    (:func:`~posembed.lab.training.train.train_model`, deterministic algorithms on, as a CPU trial), eager or
    under ``torch.compile``: every step's loss."""
    from posembed.lab.tasks import make_task
    from posembed.lab.training.train import build_trial_model, deterministic, train_model

    torch.set_num_threads(threads)
    cfg = dataclasses.replace(full_trial(), steps=steps)
    task = make_task(cfg)
    torch.manual_seed(cfg.seed)
    model = build_trial_model(cfg, task)
    generator = torch.Generator().manual_seed(cfg.seed * 1000)

    def batches(step: int):
        batch = task.train_batch(generator, cfg.batch)
        return batch.input_ids, batch.targets

    with deterministic():
        return train_model(
            torch.compile(model) if compiled else model,
            cfg,
            batches,
            device=torch.device("cpu"),
            min_lr=cfg.min_lr,
            log_every=cfg.log_every,
        )


def bench_determinism(steps: int, threads: int = 1) -> dict:
    """:func:`trial_losses` compiled in two fresh processes (``--only losses``) and eager here: whether
    the two compiled runs agree bit for bit, and their largest distance from the eager losses."""
    import subprocess
    import sys

    runs = []
    for _ in range(2):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--only", "losses", "--steps", str(steps), "--threads", str(threads)],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append({"wall_s": time.perf_counter() - start, "losses": json.loads(done.stdout.strip().splitlines()[-1])})
    eager = trial_losses(steps, compiled=False, threads=threads)
    a, b = runs[0]["losses"], runs[1]["losses"]
    return {
        "steps": steps,
        "threads": threads,
        "process wall s (compile included)": [r["wall_s"] for r in runs],
        "compiled runs bit-identical": a == b,
        "max |compiled - eager| loss": max(abs(x - y) for x, y in zip(a, eager)),
        "last loss (compiled, compiled, eager)": [a[-1], b[-1], eager[-1]],
    }


def bench_run(threads: int, steps: int, runs: int, *, trial: str = "calibration", compiled: bool = False) -> dict:
    """The reference loop against the lab's trial (``trial``: the calibration preset's or the
    ``full`` preset's), interleaved run by run; with ``compiled`` also that trial under
    ``torch.compile`` (compile included in its seconds)."""
    from unittest import mock

    import posembed.lab.training.train as lab_train

    torch.set_num_threads(threads)
    text = resolve_text_path(CFG.text).read_text(encoding="utf-8")
    cfg = dataclasses.replace(CFG if trial == "calibration" else full_trial(), steps=steps)
    names = ["nanoGPT-style loop", "posembed lab trial"] + (["posembed lab trial, compiled"] if compiled else [])
    times: dict[str, list[float]] = {name: [] for name in names}
    losses: dict[str, float] = {}
    for _ in range(runs):
        start = time.perf_counter()
        ref = train_reference(text, steps=steps)
        times["nanoGPT-style loop"].append(time.perf_counter() - start)
        losses["nanoGPT-style loop"] = ref.val_loss
        for name in names[1:]:
            always = mock.patch.object(lab_train, "compile_training", lambda device, cfg: True)
            with always if name.endswith("compiled") else contextlib.nullcontext():
                start = time.perf_counter()
                result, _ = lab_train.train_trial(cfg, device="cpu")
                times[name].append(time.perf_counter() - start)
            losses[name] = result.value("val_loss", cfg.context)
    out = {name: {"wall_s": statistics.median(v), "all_s": v, "val_loss": losses[name]} for name, v in times.items()}
    for name in names[1:]:
        out[f"speedup (reference / {name})"] = out["nanoGPT-style loop"]["wall_s"] / out[name]["wall_s"]
    out["trial"] = trial
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=60, help="interleaved steps per model (step bench)")
    parser.add_argument("--steps", type=int, default=CFG.steps, help="iterations per whole run")
    parser.add_argument("--runs", type=int, default=1, help="interleaved whole runs per side")
    parser.add_argument(
        "--only", choices=("step", "run", "profile", "levers", "compile", "matmuls", "determinism", "losses")
    )
    parser.add_argument("--trial", choices=("calibration", "full"), default="calibration", help="the lab trial of run")
    parser.add_argument("--compile", action="store_true", help="run: also the lab trial under torch.compile")
    parser.add_argument(
        "--compile-modes",
        nargs="+",
        default=["default"],
        help="compile: torch.compile modes (default, max-autotune-no-cudagraphs, ...)",
    )
    parser.add_argument("--profile-steps", type=int, default=20, help="profiled steps per model (profile)")
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args(argv)
    if args.only == "losses":  # one process of determinism: its compiled losses, JSON on the last line
        print(json.dumps(trial_losses(args.steps, compiled=True, threads=args.threads[0])))
        return 0
    report = {"load_average": os.getloadavg(), "cpus": os.cpu_count(), "torch": torch.__version__}
    if args.only == "determinism":
        report["determinism"] = bench_determinism(args.steps, args.threads[0])
        print(json.dumps(report["determinism"], indent=1), flush=True)
    if args.only == "profile":
        report["profile, 1 thread"] = bench_profile(args.profile_steps)
        print(json.dumps(report["profile, 1 thread"], indent=1), flush=True)
    if args.only == "levers":
        report["levers, 1 thread"] = bench_levers(args.rounds)
        print(json.dumps(report["levers, 1 thread"], indent=1), flush=True)
    for threads in args.threads if args.only not in ("profile", "levers", "determinism") else ():
        if args.only == "matmuls":
            report[f"matmuls, {threads} thread(s)"] = bench_matmuls(threads, args.rounds)
            print(json.dumps({f"matmuls, {threads} thread(s)": report[f"matmuls, {threads} thread(s)"]}, indent=1))
        if args.only == "compile":
            report[f"compile, {threads} thread(s)"] = bench_compile(threads, args.rounds, tuple(args.compile_modes))
            print(
                json.dumps({f"compile, {threads} thread(s)": report[f"compile, {threads} thread(s)"]}, indent=1),
                flush=True,
            )
        if args.only in (None, "step"):
            report[f"step, {threads} thread(s)"] = bench_step(threads, args.rounds)
            print(
                json.dumps({f"step, {threads} thread(s)": report[f"step, {threads} thread(s)"]}, indent=1), flush=True
            )
        if args.only in (None, "run"):
            report[f"run, {threads} thread(s)"] = bench_run(
                threads, args.steps, args.runs, trial=args.trial, compiled=args.compile
            )
            print(json.dumps({f"run, {threads} thread(s)": report[f"run, {threads} thread(s)"]}, indent=1), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report | {"load_average_end": os.getloadavg()}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
