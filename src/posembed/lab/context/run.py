"""Run a context-extension study end to end, resumably: :func:`run_context`.

Each seed's run goes one way, in two steps: train (or reload) RoPE and the references at ``L``
(built by :mod:`~posembed.lab.context.models`), then RoPE's fine-tunes
(:mod:`~posembed.lab.context.train`, which keeps each model as a lab checkpoint under
``<out>/models/<train id>/<model>/``; the run stores its facts and, for a model retrained, drops the
rows measured on the old one), then store the config and evaluate every (model, method, length)
(:mod:`~posembed.lab.context.evaluate`, which only measures), each evaluation stored in
``<out>/context.sqlite`` as it is measured (:class:`~posembed.lab.context.store.ContextStore`, one
transaction per length). Models are keyed by the training fields only, so a study that changes only
its evaluation reuses them. A second run of the same config skips what is stored, so an interrupted
study resumes; a stored model whose build differs from what this code builds (a reference's settings
changed) is retrained, with a warning, and its rows evaluated again.
The report (:mod:`posembed.lab.report.context`) reads the store afterwards (:func:`run_study` hands
it on, open).

Models train and evaluate on ``device`` (:func:`posembed._utils.devices.resolve_device`: ``auto`` =
CUDA when present, else the CPU; bf16 autocast on CUDA, :func:`posembed._utils.devices.autocast`),
while batches are drawn and every score is computed on the CPU from fp32 logits brought back
(:func:`posembed._utils.devices.on_device`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from posembed._utils.devices import resolve_device
from posembed._utils.progress import Progress, progress_mode
from posembed.lab.context.corpus import ContextData
from posembed.lab.context.evaluate import evaluate_at
from posembed.lab.context.methods import extended
from posembed.lab.context.models import build_context_model
from posembed.lab.context.presets import ContextConfig
from posembed.lab.context.store import ContextStore
from posembed.lab.context.train import finetune_config, trained_model

__all__ = ["run_context", "run_study", "study_steps", "STORE_NAME", "finetuned_name"]

STORE_NAME = "context.sqlite"

logger = logging.getLogger(__name__)


def finetuned_name(method: str, scale: int) -> str:
    """Store name of the RoPE model fine-tuned with ``method`` at ``scale`` x L: ``rope+yarn@4x``."""
    return f"rope+{method}@{scale}x"


def study_steps(cfg: ContextConfig) -> int:
    """The progress steps of one seed's run: each model trained and fine-tuned, each (model, method)
    evaluated."""
    models = 1 + len(cfg.references)
    tunes = len(cfg.finetune_methods) if cfg.finetune_steps else 0
    return models + len(cfg.methods) + len(cfg.references) + 2 * tunes


def run_context(
    cfg: ContextConfig,
    out: str | os.PathLike,
    *,
    device: str | torch.device | None = "auto",
    progress: bool | str | None = False,
) -> Path:
    """Run (or resume) the study ``cfg`` into ``out`` on ``device`` (``auto``: CUDA when present,
    else the CPU), once per seed of ``cfg.seeds`` (:meth:`ContextConfig.per_seed`); returns the
    store's path. ``progress``: ``False`` (default) none; ``None`` a bar on a terminal and a line
    per finished step otherwise (INFO records of :data:`~posembed._utils.progress.LAB_LOGGER`);
    ``"bar"`` / ``"lines"`` that style."""
    return run_study(cfg.per_seed(), Path(out), resolve_device(device), progress).path


def run_study(
    runs: list[ContextConfig], out: Path, device: torch.device, progress: bool | str | None = False
) -> ContextStore:
    """:func:`run_context` of a study's runs (one config per seed) on a resolved ``device``; returns the
    store they ran into (``<out>/context.sqlite``), opened once for all of them."""
    total, store = study_steps(runs[0]) * len(runs), ContextStore(out / STORE_NAME)
    events = (event for run in runs for event in _seed_steps(run, store, out, device))
    with Progress(total, mode=progress_mode(progress), desc="context study", unit="step") as steps:
        for finished, label in events:
            if finished:
                steps.advance(label)
            else:
                steps.working_on(label)
    return store


def _seed_steps(cfg: ContextConfig, store: ContextStore, out: Path, device: torch.device) -> Iterator[tuple[bool, str]]:
    """One seed's run of the study, each step skipped when stored: train RoPE and the references at
    L, fine-tune RoPE, then evaluate RoPE with each method swapped in, the references as they are
    and the fine-tunes.

    Yields ``(False, what starts)`` before each step and ``(True, what finished)`` after it (what
    the progress bar shows); the steps know nothing of the bar.
    """
    seed, scale = f"seed {cfg.seed}", cfg.finetune_scale
    tunes = {finetuned_name(method, scale): method for method in cfg.finetune_methods if cfg.finetune_steps}
    data = ContextData.load(cfg.text)
    folder, trained = out / "models" / cfg.train_id, {}

    def rope_with(method: str, factor: float) -> nn.Module:
        """The trained RoPE model with ``method``'s scheme for ``factor`` swapped in (same weights)."""
        return extended(trained["rope"], method, factor, cfg.context)

    # (name, how a fresh one is built, its folder): the models at L, then the fine-tunes of RoPE
    plan = [
        (name, lambda s=name: build_context_model(cfg, s, data.vocab_size), folder / name)
        for name in ("rope", *cfg.references)
    ]
    plan += [
        (name, lambda m=method: rope_with(m, float(scale)), folder / name.replace("@", "_"))
        for name, method in tunes.items()
    ]
    tune = (
        finetune_config(
            cfg, steps=cfg.finetune_steps, context=cfg.context * scale, lr=cfg.finetune_lr, seed=cfg.seed + 1
        )
        if tunes
        else None
    )
    for name, make, where in plan:
        yield False, f"{seed}: {'fine-tune' if name in tunes else 'train'} {name}"
        trained[name], facts, stale = trained_model(
            cfg, name, name in store.models(cfg.train_id), where, data, make, tune if name in tunes else cfg, device
        )
        if stale:  # built differently: its rows, in each study training under this id, measured the replaced weights
            gone = store.forget(cfg.train_id, name, store.training_under(cfg.train_id))
            logger.warning(
                "context %s: the stored %s in %s was built differently from what this code builds; "
                "retraining it (its %d stored evaluation rows dropped)",
                cfg.name,
                name,
                where,
                gone,
            )
        if facts is not None:
            store.put_model(cfg.train_id, name, facts)
        yield True, f"{seed}: {'fine-tuned' if name in tunes else 'trained'} {name}"
    # stored with its first rows (before them it had none that a retrained model could drop)
    store.put_config(cfg.config_id, cfg.name, cfg.to_dict())
    stored = store.evaluated(cfg.config_id)  # after training: a model retrained here has dropped its rows
    # (label, model name, method, the model at a length)
    evaluations = [
        (f"rope / {method}", "rope", method, lambda n, m=method: rope_with(m, n / cfg.context))
        for method in cfg.methods
    ]
    evaluations += [(name, name, "none", lambda n, s=name: trained[s]) for name in cfg.references]
    evaluations += [(name, name, method, lambda n, s=name: trained[s]) for name, method in tunes.items()]
    for label, name, method, model_at in evaluations:
        yield False, f"{seed}: {label}"
        for length in cfg.lengths:
            if (name, method, length) not in stored:  # what each length measures, stored in one transaction
                store.put(
                    cfg.config_id, name, method, length, evaluate_at(cfg, data, name, method, model_at(length), length)
                )
        yield True, f"{seed}: evaluated {label}"
