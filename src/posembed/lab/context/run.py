"""Run a context-extension study end to end, resumably, and re-evaluate a lab checkpoint.

:func:`run_context` trains (or reloads) the models at ``L``, evaluates every (model, method,
length), fine-tunes, and stores each evaluation in ``<out>/context.sqlite``
(:class:`~posembed.lab.context.store.ContextStore`); trained models are lab checkpoints under
``<out>/models/<train id>/<model>/`` (keyed by the training fields only, so a study that
changes only its evaluation reuses them) (:func:`~posembed.lab.checkpoint.save_checkpoint`). A
second run of the same config skips what is stored, so an interrupted study resumes; a stored
model whose build differs from what this code builds (a reference's settings changed) is
retrained, with a warning.

:func:`reevaluate_checkpoint` is ``posembed lab extend CHECKPOINT --method yarn --factor 4
[--finetune STEPS]``: a stored RoPE checkpoint re-evaluated with another scheme.

Both take ``device`` (:func:`posembed.devices.resolve_device`: ``auto`` = CUDA when present,
else the CPU): models train and evaluate there (bf16 autocast on CUDA,
:func:`posembed.lab.train.autocast`), while batches are drawn and every score is computed on
the CPU from fp32 logits brought back (:class:`posembed.lab.train.OnDevice`).

The references, trained at L like the RoPE model and evaluated as they are
(:data:`REFERENCE_SETTINGS`, each built by :func:`posembed.schemes.factory.build_from_sizes`):

========= =================================================================================
alibi     ALiBi, causal slopes (Press et al. 2022)
nope      no positions (Kazemnejad et al. 2023)
fire      FIRE with the paper's reference-code init ``c = 0.1`` and the threshold ``L0 = L / 4``
          (the paper's 512 at its training length 2048): the normaliser ``psi(max(L0, i))``
          follows the query position ``i`` over most of the training window and at every
          longer length, which is the progressive interpolation FIRE evaluates with
kerple    KERPLE, logarithmic kernel (the paper's best variant)
sandwich  Sandwich with ``d'`` = the model width
cope      CoPE with ``npos_max = L`` (every count reached in training has its embedding;
          longer counts clamp to ``L - 1``)
========= =================================================================================
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from typing import Callable

import torch
from torch import nn

from posembed._checks import check_number
from posembed._progress import Progress, progress_mode
from posembed.devices import resolve_device
from posembed.lab.checkpoint import is_checkpoint, load_checkpoint, save_checkpoint
from posembed.lab.context import method_scheme, rope_base, rotary_head_dim, swap_scheme
from posembed.lab.context.evaluate import ContextData, on_device, passkey_grid, train_steps
from posembed.lab.context.presets import REFERENCES, ContextConfig
from posembed.lab.context.store import NO_DEPTH, ContextStore
from posembed.lab.perplexity import lm_perplexity
from posembed.lab.tasks.passkey import depth_grid, min_length
from posembed.schemes.base import PositionScheme
from posembed.schemes.factory import ModelSizes, build_from_sizes
from posembed.schemes.rotary import MIN_FACTOR

__all__ = [
    "run_context", "build_context_model", "evaluate_rows", "reevaluate_checkpoint", "STORE_NAME", "finetuned_name",
    "REFERENCE_SETTINGS", "STUDY_SCHEMES",
]

logger = logging.getLogger(__name__)

STORE_NAME = "context.sqlite"
TASK = "charlm+passkey"


def finetuned_name(method: str, scale: int) -> str:
    """Store name of the RoPE model fine-tuned with ``method`` at ``scale`` x L: ``rope+yarn@4x``."""
    return f"rope+{method}@{scale}x"


#: reference name -> (factory scheme name or ``None`` for NoPE, the overrides for a study's config)
REFERENCE_SETTINGS: dict[str, tuple[str | None, Callable[[ContextConfig], dict]]] = {
    "alibi": ("alibi", lambda cfg: {}),
    "nope": (None, lambda cfg: {}),
    "fire": ("fire", lambda cfg: {"threshold": cfg.context / 4, "init_c": 0.1}),
    "kerple": ("kerple", lambda cfg: {"kernel": "log"}),
    "sandwich": ("sandwich", lambda cfg: {}),
    "cope": ("cope", lambda cfg: {"npos_max": cfg.context}),
}
#: every model a study trains from scratch: RoPE and the references
STUDY_SCHEMES = ("rope", *REFERENCES)


def _study_scheme(cfg: ContextConfig, scheme: str) -> PositionScheme | None:
    head_dim = cfg.dim // cfg.heads
    if scheme == "rope":
        return method_scheme("extrapolate", head_dim=head_dim, factor=1.0, original_len=cfg.context)
    if scheme not in REFERENCE_SETTINGS:
        raise ValueError(f"unknown study scheme {scheme!r}; known: {', '.join(STUDY_SCHEMES)}")
    name, overrides = REFERENCE_SETTINGS[scheme]
    if name is None:
        return None
    sizes = ModelSizes(dim=cfg.dim, num_heads=cfg.heads, head_dim=head_dim, max_len=cfg.context, causal=True)
    return build_from_sizes(name, sizes, overrides(cfg))


def build_context_model(cfg: ContextConfig, scheme: str, vocab_size: int) -> nn.Module:
    """A fresh decoder (on the CPU) of the study's size with ``scheme``: ``rope`` or a reference
    (:data:`REFERENCE_SETTINGS`); the same seed gives the same weights."""
    from posembed.model import Decoder

    if scheme not in STUDY_SCHEMES:
        raise ValueError(f"unknown study scheme {scheme!r}; known: {', '.join(STUDY_SCHEMES)}")
    torch.manual_seed(cfg.seed)
    return Decoder(vocab_size, dim=cfg.dim, depth=cfg.depth, num_heads=cfg.heads, scheme=_study_scheme(cfg, scheme))


def evaluate_rows(model: nn.Module, data: ContextData, length: int, *, windows: int, depths: int, samples: int,
                  seed: int, digits: int, passkey: bool = True) -> list[tuple[str, float, float | None]]:
    """``(metric, depth, value)`` of one model at one length: perplexity, passkey per depth and mean."""
    rows = [("perplexity", NO_DEPTH, lm_perplexity(model, data.val, length, windows=windows))]
    if passkey and length >= min_length(digits):
        grid = passkey_grid(model, data.stoi, length, depth_grid(depths), samples=samples, seed=seed, digits=digits)
        rows += [("passkey", depth, value) for depth, value in grid.items()]
        rows.append(("passkey_mean", NO_DEPTH, sum(grid.values()) / len(grid)))
    return rows


def _trained(cfg, name, store, folder, data, make, training: ContextConfig, device) -> nn.Module:
    """The model ``name`` (on ``device``) from its checkpoint if stored and built as ``make()`` builds
    it, else ``make()`` trained as ``training`` (``cfg`` or its fine-tune) says, and saved."""
    fresh = make()
    if name in store.models(cfg.train_id) and is_checkpoint(folder):
        model = load_checkpoint(folder, device=device)[0]
        if model.config_dict() == fresh.config_dict():
            logger.info("context %s seed %d: %s loaded from %s", cfg.name, cfg.seed, name, folder)
            return model
        gone = store.forget(cfg.train_id, name)
        logger.warning("context %s: the stored %s in %s was built differently from what this code builds; "
                       "retraining it (its %d stored evaluation rows dropped)", cfg.name, name, folder, gone)
    model = fresh.to(device)
    start = time.perf_counter()
    final_loss = train_steps(model, data, training)
    seconds = time.perf_counter() - start
    meta = {"task": TASK, "config": {"task": "passkey", "context": training.context}, "vocab": list(data.chars),
            "context_config": cfg.to_dict(), "final_loss": final_loss}
    save_checkpoint(model, folder, meta)
    facts = {"seconds": seconds, "final_loss": final_loss, "steps": training.steps, "context": training.context,
             "params": sum(p.numel() for p in model.parameters()), "checkpoint": str(folder), "device": str(device)}
    store.put_model(cfg.train_id, name, facts)
    logger.info("context %s seed %d: trained %s on %s in %.1f s (final loss %.3f)", cfg.name, cfg.seed, name, device,
                seconds, final_loss)
    return model


def _evaluate(cfg, store, data, name, method, model_at) -> None:
    for length in cfg.lengths:
        if store.has(cfg.config_id, name, method, length):
            continue
        windows = cfg.lm_windows * max(cfg.lengths) // length  # the same held-out characters at every length
        rows = evaluate_rows(on_device(model_at(length)), data, length, windows=windows, depths=cfg.depths,
                             samples=cfg.passkey_samples, seed=cfg.seed, digits=cfg.digits)
        store.put(cfg.config_id, name, method, length, rows)
        logger.info("context %s seed %d: %s / %s at %d: %s", cfg.name, cfg.seed, name, method, length,
                    ", ".join(f"{m}={v:.3g}" for m, d, v in rows if d == NO_DEPTH and v is not None))


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
            path = _run_seed(run, Path(out), device, steps)
    return path


def _run_seed(cfg: ContextConfig, out: Path, device: torch.device, steps: Progress) -> Path:
    """One seed's run of the study: train, evaluate, fine-tune, each step skipped when stored."""
    store = ContextStore(out / STORE_NAME)
    store.put_config(cfg.config_id, cfg.name, cfg.to_dict())
    data = ContextData.load(cfg.text)
    models = out / "models" / cfg.train_id
    seed = f"seed {cfg.seed}"
    trained = {}
    for scheme in ("rope", *cfg.references):
        steps.working_on(f"{seed}: train {scheme}")
        trained[scheme] = _trained(cfg, scheme, store, models / scheme, data,
                                   lambda s=scheme: build_context_model(cfg, s, data.vocab_size), cfg, device)
        steps.advance(f"{seed}: trained {scheme}")
    rope, head_dim, theta = trained["rope"], cfg.dim // cfg.heads, rope_base(trained["rope"])
    for method in cfg.methods:
        steps.working_on(f"{seed}: rope / {method}")
        _evaluate(cfg, store, data, "rope", method, lambda n, m=method: swap_scheme(rope, method_scheme(
            m, head_dim=head_dim, factor=n / cfg.context, original_len=cfg.context, base=theta)))
        steps.advance(f"{seed}: evaluated rope / {method}")
    for scheme in cfg.references:
        steps.working_on(f"{seed}: {scheme}")
        _evaluate(cfg, store, data, scheme, "none", lambda n, s=scheme: trained[s])
        steps.advance(f"{seed}: evaluated {scheme}")
    scale = cfg.finetune_scale
    for method in cfg.finetune_methods if cfg.finetune_steps else ():
        name = finetuned_name(method, scale)
        scheme = method_scheme(method, head_dim=head_dim, factor=float(scale), original_len=cfg.context, base=theta)
        steps.working_on(f"{seed}: fine-tune {name}")
        tune = cfg.finetune(steps=cfg.finetune_steps, context=cfg.context * scale, lr=cfg.finetune_lr, seed=cfg.seed + 1)
        tuned = _trained(cfg, name, store, models / name.replace("@", "_"), data, lambda s=scheme: swap_scheme(rope, s),
                         tune, device)
        steps.advance(f"{seed}: fine-tuned {name}")
        _evaluate(cfg, store, data, name, method, lambda n, t=tuned: t)
        steps.advance(f"{seed}: evaluated {name}")
    return store.path


def _checkpoint_data(meta: dict) -> tuple[ContextData, bool]:
    """The corpus a checkpoint was trained on, in its vocabulary, and whether it knows passkeys."""
    config = meta.get("config") or {}
    if meta.get("task") == TASK:
        data = ContextData.load(meta.get("context_config", {}).get("text", "tinyshakespeare"))
        if list(data.chars) != list(meta.get("vocab", [])):
            raise ValueError("the checkpoint's vocabulary differs from its text's passkey vocabulary")
        return data, True
    if meta.get("task") != "charlm":
        raise ValueError(f"lab extend needs a charlm or {TASK} checkpoint, this one is task {meta.get('task')!r}")
    from posembed.lab.tasks.charlm import load_corpus

    corpus = load_corpus(config.get("text", "tinyshakespeare"), int(config["context"]))
    return ContextData(chars=tuple(corpus.chars), train=corpus.train, val=corpus.val), False


def reevaluate_checkpoint(
    folder: str | os.PathLike, method: str, factor: float, *, finetune_steps: int = 0, windows: int = 16,
    depths: int = 5, samples: int = 8, seed: int = 0, batch: int = 8, lr: float = 1e-3, save_to: str | os.PathLike | None = None,
    device: str | torch.device | None = "auto", progress: bool | str | None = False,
) -> list[dict]:  # fmt: skip
    """Re-evaluate the RoPE lab checkpoint in ``folder`` with ``method`` at ``factor`` x its context L.

    Evaluates at L and ``round(factor * L)``: perplexity on the held-out split of its text, and
    passkey accuracy per depth when the checkpoint was trained on passkeys (a study's models).
    With ``finetune_steps`` the swapped model is first fine-tuned at the new length (and saved to
    ``save_to`` when given). A model with one scheme per layer has its rotary layers swapped (see
    :func:`~posembed.lab.context.swap_scheme`). Runs on ``device`` (``auto``: CUDA when present);
    the numbers are computed on the CPU. Returns one dict per number. ``progress`` as
    :func:`run_context`: one step for the fine-tune, one per evaluated length.
    """
    factor = check_number(factor, "factor", MIN_FACTOR)  # the scaled schemes' own bound
    device = resolve_device(device)
    model, meta = load_checkpoint(folder, device=device)
    config = meta.get("config") or {}
    if not isinstance(config.get("context"), int):
        raise ValueError(f"checkpoint {str(folder)!r} records no training context (meta['config']['context'])")
    data, passkey = _checkpoint_data(meta)
    context, target = config["context"], round(config["context"] * factor)
    scheme = method_scheme(method, head_dim=rotary_head_dim(model), factor=float(factor), original_len=context,
                           base=rope_base(model))
    model = swap_scheme(model, scheme)
    lengths = sorted({context, target})
    with Progress(len(lengths) + bool(finetune_steps), mode=progress_mode(progress), desc="lab extend",
                  unit="step") as steps:
        if finetune_steps:
            steps.working_on(f"fine-tune {finetune_steps} steps at {target}")
            study = ContextConfig(name="lab extend", batch=batch, passkey_fraction=0.25 if passkey else 0.0)
            train_steps(model, data, study.finetune(steps=finetune_steps, context=target, lr=lr, seed=seed))
            if save_to is not None:
                save_checkpoint(model, save_to, {**meta, "config": {**config, "context": target},
                                                 "extended": {"method": method, "factor": factor, "steps": finetune_steps}})
            steps.advance(f"fine-tuned {finetune_steps} steps at {target}")
        found = []
        for length in lengths:
            steps.working_on(f"{method} at {length}")
            rows = evaluate_rows(on_device(model), data, length, windows=windows, depths=depths, samples=samples,
                                 seed=seed, digits=5, passkey=passkey)
            found += [{"method": method, "factor": factor, "finetune_steps": finetune_steps, "length": length,
                       "metric": m, "depth": None if d == NO_DEPTH else d, "value": v} for m, d, v in rows]
            steps.advance(f"evaluated {method} at {length}")
    return found
