"""Run a context-extension study end to end, resumably, and re-evaluate a lab checkpoint.

:func:`run_context` trains (or reloads) the models at ``L``, evaluates every (model, method,
length), fine-tunes, and stores each evaluation in ``<out>/context.sqlite``
(:class:`~posembed.lab.context_store.ContextStore`); trained models are lab checkpoints under
``<out>/models/<train id>/<model>/`` (keyed by the training fields only, so a study that
changes only its evaluation reuses them) (:func:`~posembed.lab.checkpoint.save_checkpoint`). A
second run of the same config skips what is stored, so an interrupted study resumes.

:func:`extend_checkpoint` is ``posembed lab extend CHECKPOINT --method yarn --factor 4
[--finetune STEPS]``: a stored RoPE checkpoint re-evaluated with another scheme.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import torch
from torch import nn

from posembed.lab.checkpoint import is_checkpoint, load_checkpoint, save_checkpoint
from posembed.lab.context import method_scheme, rope_base, rotary_head_dim, swap_scheme
from posembed.lab.context_eval import ContextData, TrainSettings, lm_perplexity, passkey_grid, train_steps
from posembed.lab.context_presets import ContextConfig
from posembed.lab.context_store import NO_DEPTH, ContextStore
from posembed.lab.tasks.passkey import depth_grid, min_length

__all__ = ["run_context", "build_context_model", "evaluate_rows", "extend_checkpoint", "STORE_NAME", "finetuned_name"]

logger = logging.getLogger(__name__)

STORE_NAME = "context.sqlite"
TASK = "charlm+passkey"


def finetuned_name(method: str, scale: int) -> str:
    """Store name of the RoPE model fine-tuned with ``method`` at ``scale`` x L: ``rope+yarn@4x``."""
    return f"rope+{method}@{scale}x"


def build_context_model(cfg: ContextConfig, scheme: str, vocab_size: int) -> nn.Module:
    """A fresh decoder of the study's size with ``scheme`` (``rope``, ``alibi`` or ``nope``)."""
    from posembed.model import Decoder
    from posembed.schemes.alibi import ALiBi

    head_dim = cfg.dim // cfg.heads
    schemes = {
        "rope": lambda: method_scheme("extrapolate", head_dim=head_dim, factor=1.0, original_len=cfg.context),
        "alibi": lambda: ALiBi(cfg.heads),
        "nope": lambda: None,
    }
    if scheme not in schemes:
        raise ValueError(f"unknown study scheme {scheme!r}; known: {', '.join(schemes)}")
    torch.manual_seed(cfg.seed)
    return Decoder(vocab_size, dim=cfg.dim, depth=cfg.depth, num_heads=cfg.heads, scheme=schemes[scheme]())


def evaluate_rows(model: nn.Module, data: ContextData, length: int, *, windows: int, depths: int, samples: int,
                  seed: int, digits: int, passkey: bool = True) -> list[tuple[str, float, float | None]]:
    """``(metric, depth, value)`` of one model at one length: perplexity, passkey per depth and mean."""
    rows = [("perplexity", NO_DEPTH, lm_perplexity(model, data.val, length, windows=windows))]
    if passkey and length >= min_length(digits):
        grid = passkey_grid(model, data.stoi, length, depth_grid(depths), samples=samples, seed=seed, digits=digits)
        rows += [("passkey", depth, value) for depth, value in grid.items()]
        rows.append(("passkey_mean", NO_DEPTH, sum(grid.values()) / len(grid)))
    return rows


def _settings(cfg: ContextConfig, *, steps: int, context: int, lr: float, seed: int, warmup: int,
              passkey_only: int = 0) -> TrainSettings:
    return TrainSettings(steps=steps, context=context, batch=cfg.batch, lr=lr, passkey_fraction=cfg.passkey_fraction,
                         digits=cfg.digits, seed=seed, warmup=warmup, passkey_only=passkey_only)


def _trained(cfg, name, store, folder, data, make, settings) -> nn.Module:
    """The model ``name`` from its checkpoint if stored, else ``make()`` trained with ``settings`` and saved."""
    if name in store.models(cfg.train_id) and is_checkpoint(folder):
        logger.info("context %s: %s loaded from %s", cfg.name, name, folder)
        return load_checkpoint(folder)[0]
    model = make()
    start = time.perf_counter()
    final_loss = train_steps(model, data, settings)
    seconds = time.perf_counter() - start
    meta = {"task": TASK, "config": {"task": "passkey", "context": settings.context}, "vocab": list(data.chars),
            "context_config": cfg.to_dict(), "final_loss": final_loss}
    save_checkpoint(model, folder, meta)
    facts = {"seconds": seconds, "final_loss": final_loss, "steps": settings.steps, "context": settings.context,
             "params": sum(p.numel() for p in model.parameters()), "checkpoint": str(folder)}
    store.put_model(cfg.train_id, name, facts)
    logger.info("context %s: trained %s in %.1f s (final loss %.3f)", cfg.name, name, seconds, final_loss)
    return model


def _evaluate(cfg, store, data, name, method, model_at) -> None:
    for length in cfg.lengths:
        if store.has(cfg.config_id, name, method, length):
            continue
        windows = cfg.lm_windows * max(cfg.lengths) // length  # the same held-out characters at every length
        rows = evaluate_rows(model_at(length), data, length, windows=windows, depths=cfg.depths,
                             samples=cfg.passkey_samples, seed=cfg.seed, digits=cfg.digits)
        store.put(cfg.config_id, name, method, length, rows)
        logger.info("context %s: %s / %s at %d: %s", cfg.name, name, method, length,
                    ", ".join(f"{m}={v:.3g}" for m, d, v in rows if d == NO_DEPTH and v is not None))


def run_context(cfg: ContextConfig, out: str | os.PathLike) -> Path:
    """Run (or resume) the study ``cfg`` into ``out``; returns the store's path."""
    out = Path(out)
    store = ContextStore(out / STORE_NAME)
    store.put_config(cfg.config_id, cfg.name, cfg.to_dict())
    data = ContextData.load(cfg.text)
    models = out / "models" / cfg.train_id
    base = _settings(cfg, steps=cfg.steps, context=cfg.context, lr=cfg.lr, seed=cfg.seed, warmup=cfg.warmup,
                     passkey_only=cfg.passkey_only_steps)
    trained = {
        scheme: _trained(cfg, scheme, store, models / scheme, data,
                         lambda s=scheme: build_context_model(cfg, s, data.vocab_size), base)
        for scheme in ("rope", *cfg.references)
    }
    rope, head_dim, theta = trained["rope"], cfg.dim // cfg.heads, rope_base(trained["rope"])
    for method in cfg.methods:
        _evaluate(cfg, store, data, "rope", method, lambda n, m=method: swap_scheme(rope, method_scheme(
            m, head_dim=head_dim, factor=n / cfg.context, original_len=cfg.context, base=theta)))
    for scheme in cfg.references:
        _evaluate(cfg, store, data, scheme, "none", lambda n, s=scheme: trained[s])
    scale = cfg.finetune_scale
    tune = _settings(cfg, steps=cfg.finetune_steps, context=cfg.context * scale, lr=cfg.finetune_lr,
                     seed=cfg.seed + 1, warmup=min(20, cfg.finetune_steps // 10))
    for method in cfg.finetune_methods if cfg.finetune_steps else ():
        name = finetuned_name(method, scale)
        scheme = method_scheme(method, head_dim=head_dim, factor=float(scale), original_len=cfg.context, base=theta)
        tuned = _trained(cfg, name, store, models / name.replace("@", "_"), data, lambda s=scheme: swap_scheme(rope, s), tune)
        _evaluate(cfg, store, data, name, method, lambda n, t=tuned: t)
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


def extend_checkpoint(
    folder: str | os.PathLike, method: str, factor: float, *, finetune_steps: int = 0, windows: int = 16,
    depths: int = 5, samples: int = 8, seed: int = 0, batch: int = 8, lr: float = 1e-3, save_to: str | os.PathLike | None = None,
) -> list[dict]:  # fmt: skip
    """Re-evaluate the RoPE lab checkpoint in ``folder`` with ``method`` at ``factor`` x its context L.

    Evaluates at L and ``round(factor * L)``: perplexity on the held-out split of its text, and
    passkey accuracy per depth when the checkpoint was trained on passkeys (a study's models).
    With ``finetune_steps`` the swapped model is first fine-tuned at the new length (and saved to
    ``save_to`` when given). Returns one dict per number.
    """
    model, meta = load_checkpoint(folder)
    config = meta.get("config") or {}
    if not isinstance(config.get("context"), int):
        raise ValueError(f"checkpoint {str(folder)!r} records no training context (meta['config']['context'])")
    if not factor >= 1:
        raise ValueError(f"factor must be >= 1, got {factor!r}")
    data, passkey = _checkpoint_data(meta)
    context, target = config["context"], round(config["context"] * factor)
    scheme = method_scheme(method, head_dim=rotary_head_dim(model), factor=float(factor), original_len=context,
                           base=rope_base(model))
    model = swap_scheme(model, scheme)
    if finetune_steps:
        settings = TrainSettings(steps=finetune_steps, context=target, batch=batch, lr=lr,
                                 passkey_fraction=0.25 if passkey else 0.0, seed=seed, warmup=min(20, finetune_steps // 10))
        train_steps(model, data, settings)
        if save_to is not None:
            save_checkpoint(model, save_to, {**meta, "config": {**config, "context": target},
                                             "extended": {"method": method, "factor": factor, "steps": finetune_steps}})
    found = []
    for length in sorted({context, target}):
        rows = evaluate_rows(model, data, length, windows=windows, depths=depths, samples=samples, seed=seed, digits=5,
                             passkey=passkey)
        found += [{"method": method, "factor": factor, "finetune_steps": finetune_steps, "length": length,
                   "metric": m, "depth": None if d == NO_DEPTH else d, "value": v} for m, d, v in rows]
    return found
