"""``posembed lab extend CHECKPOINT --method yarn --factor 4 [--finetune STEPS]``: a stored RoPE lab
checkpoint re-evaluated with another extension method, no retraining (:func:`reevaluate_checkpoint`)."""

from __future__ import annotations

import os

import torch

from posembed._utils.checks import check_number
from posembed._utils.devices import on_device, resolve_device
from posembed._utils.progress import Progress, progress_mode
from posembed.lab.context.corpus import ContextData
from posembed.lab.context.evaluate import evaluate_rows
from posembed.lab.context.methods import extended
from posembed.lab.context.presets import ContextConfig
from posembed.lab.context.store import NO_DEPTH
from posembed.lab.context.train import TASK, finetune_config, train_steps
from posembed.lab.training.checkpoint import load_checkpoint, save_checkpoint
from posembed.schemes.rotary.rope import MIN_FACTOR

__all__ = ["reevaluate_checkpoint"]


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
    depths: int = 5, samples: int = 8, seed: int = 0, batch: int = 8, lr: float = 1e-3,
    save_to: str | os.PathLike | None = None, device: str | torch.device | None = "auto",
    progress: bool | str | None = False,
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
    model = extended(model, method, float(factor), context)
    lengths = sorted({context, target})
    with Progress(
        len(lengths) + bool(finetune_steps), mode=progress_mode(progress), desc="lab extend", unit="step"
    ) as steps:
        if finetune_steps:
            steps.working_on(f"fine-tune {finetune_steps} steps at {target}")
            study = ContextConfig(name="lab extend", batch=batch, passkey_fraction=0.25 if passkey else 0.0)
            train_steps(model, data, finetune_config(study, steps=finetune_steps, context=target, lr=lr, seed=seed))
            if save_to is not None:
                save_checkpoint(
                    model,
                    save_to,
                    {
                        **meta,
                        "config": {**config, "context": target},
                        "extended": {"method": method, "factor": factor, "steps": finetune_steps},
                    },
                )
            steps.advance(f"fine-tuned {finetune_steps} steps at {target}")
        found = []
        for length in lengths:
            steps.working_on(f"{method} at {length}")
            rows = evaluate_rows(
                on_device(model),
                data,
                length,
                windows=windows,
                depths=depths,
                samples=samples,
                seed=seed,
                digits=5,
                passkey=passkey,
            )
            found += [
                {
                    "method": method,
                    "factor": factor,
                    "finetune_steps": finetune_steps,
                    "length": length,
                    "metric": m,
                    "depth": None if d == NO_DEPTH else d,
                    "value": v,
                }
                for m, d, v in rows
            ]
            steps.advance(f"evaluated {method} at {length}")
    return found
