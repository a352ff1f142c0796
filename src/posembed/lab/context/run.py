"""Run a context-extension study end to end, resumably: :func:`run_context`.

Each seed's run trains (or reloads) the models at ``L`` (:mod:`~posembed.lab.context.train`),
evaluates every (model, method, length) (:mod:`~posembed.lab.context.evaluate`), fine-tunes, and
stores each evaluation in ``<out>/context.sqlite``
(:class:`~posembed.lab.context.store.ContextStore`); trained models are lab checkpoints under
``<out>/models/<train id>/<model>/`` (keyed by the training fields only, so a study that
changes only its evaluation reuses them). A second run of the same config skips what is stored,
so an interrupted study resumes; a stored model whose build differs from what this code builds
(a reference's settings changed) is retrained, with a warning. The report
(:func:`posembed.lab.report.context.write_context_report`) reads the store afterwards.

Models train and evaluate on ``device`` (:func:`posembed.devices.resolve_device`: ``auto`` =
CUDA when present, else the CPU; bf16 autocast on CUDA, :func:`posembed.lab.train.autocast`),
while batches are drawn and every score is computed on the CPU from fp32 logits brought back
(:class:`posembed.lab.train.OnDevice`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import torch

from posembed._progress import Progress, progress_mode
from posembed.devices import resolve_device
from posembed.lab.context.corpus import ContextData
from posembed.lab.context.evaluate import evaluate_into
from posembed.lab.context.methods import method_scheme
from posembed.lab.context.presets import ContextConfig
from posembed.lab.context.store import ContextStore
from posembed.lab.context.swap import rope_base, swap_scheme
from posembed.lab.context.train import build_context_model, trained_model

__all__ = ["run_context", "study_steps", "STORE_NAME", "finetuned_name"]

STORE_NAME = "context.sqlite"


def finetuned_name(method: str, scale: int) -> str:
    """Store name of the RoPE model fine-tuned with ``method`` at ``scale`` x L: ``rope+yarn@4x``."""
    return f"rope+{method}@{scale}x"


def study_steps(cfg: ContextConfig) -> int:
    """The progress steps of one seed's run: each model trained, each (model, method) evaluated,
    each fine-tune and its evaluation."""
    models = 1 + len(cfg.references)
    tunes = len(cfg.finetune_methods) if cfg.finetune_steps else 0
    return models + len(cfg.methods) + len(cfg.references) + 2 * tunes


def run_context(
    cfg: ContextConfig, out: str | os.PathLike, *, device: str | torch.device | None = "auto",
    progress: bool | str | None = False,
) -> Path:
    """Run (or resume) the study ``cfg`` into ``out`` on ``device`` (``auto``: CUDA when present,
    else the CPU), once per seed of ``cfg.seeds`` (:meth:`ContextConfig.per_seed`); returns the
    store's path. ``progress``: ``False`` (default) none; ``None`` a bar on a terminal and a line
    per finished step otherwise (INFO records of :data:`~posembed._progress.LAB_LOGGER`);
    ``"bar"`` / ``"lines"`` that style."""
    device = resolve_device(device)
    runs = cfg.per_seed()
    with Progress(study_steps(cfg) * len(runs), mode=progress_mode(progress), desc="context study",
                  unit="step") as steps:
        for run in runs:
            for finished, label in _seed_steps(run, Path(out), device):
                if finished:
                    steps.advance(label)
                else:
                    steps.working_on(label)
    return Path(out) / STORE_NAME


def _seed_steps(cfg: ContextConfig, out: Path, device: torch.device) -> Iterator[tuple[bool, str]]:
    """One seed's run of the study: train, evaluate, fine-tune, each step skipped when stored.

    Yields ``(False, what starts)`` before each step and ``(True, what finished)`` after it (what
    the progress bar shows); the steps know nothing of the bar.
    """
    store = ContextStore(out / STORE_NAME)
    store.put_config(cfg.config_id, cfg.name, cfg.to_dict())
    data = ContextData.load(cfg.text)
    models = out / "models" / cfg.train_id
    seed = f"seed {cfg.seed}"
    trained = {}
    for scheme in ("rope", *cfg.references):
        yield False, f"{seed}: train {scheme}"
        trained[scheme] = trained_model(cfg, scheme, store, models / scheme, data,
                                        lambda s=scheme: build_context_model(cfg, s, data.vocab_size), cfg, device)
        yield True, f"{seed}: trained {scheme}"
    rope, head_dim, theta = trained["rope"], cfg.dim // cfg.heads, rope_base(trained["rope"])
    # (label, model name, method, the model at a length): RoPE with each method, then the references as they are
    evaluations = [(f"rope / {method}", "rope", method, lambda n, m=method: swap_scheme(rope, method_scheme(
        m, head_dim=head_dim, factor=n / cfg.context, original_len=cfg.context, base=theta))) for method in cfg.methods]
    evaluations += [(scheme, scheme, "none", lambda n, s=scheme: trained[s]) for scheme in cfg.references]
    for label, name, method, model_at in evaluations:
        yield False, f"{seed}: {label}"
        evaluate_into(cfg, store, data, name, method, model_at)
        yield True, f"{seed}: evaluated {label}"
    scale = cfg.finetune_scale
    for method in cfg.finetune_methods if cfg.finetune_steps else ():
        name = finetuned_name(method, scale)
        scheme = method_scheme(method, head_dim=head_dim, factor=float(scale), original_len=cfg.context, base=theta)
        yield False, f"{seed}: fine-tune {name}"
        tune = cfg.finetune(steps=cfg.finetune_steps, context=cfg.context * scale, lr=cfg.finetune_lr, seed=cfg.seed + 1)
        tuned = trained_model(cfg, name, store, models / name.replace("@", "_"), data,
                              lambda s=scheme: swap_scheme(rope, s), tune, device)
        yield True, f"{seed}: fine-tuned {name}"
        evaluate_into(cfg, store, data, name, method, lambda n, t=tuned: t)
        yield True, f"{seed}: evaluated {name}"
