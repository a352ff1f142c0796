"""Step 3 of the study: what it measures (the run stores what it returns; nothing here reads or
writes the store).

- :func:`evaluate_rows`: one model at one length: char-LM perplexity on consecutive held-out
  windows (:func:`posembed.lab.tasks.perplexity.lm_perplexity`, the loss the ``charlm`` task scores),
  passkey accuracy per depth (:func:`passkey_grid`) and their mean.
- :func:`evaluate_at`: :func:`evaluate_rows` as a study sets it, at one of its lengths.

The scores run on the CPU: a model elsewhere is scored through :func:`posembed._utils.devices.on_device`
(its outputs come back as fp32).
"""

from __future__ import annotations

import logging

from torch import nn

from posembed._utils.devices import on_device
from posembed.lab.context.corpus import ContextData
from posembed.lab.context.presets import ContextConfig
from posembed.lab.context.store import NO_DEPTH
from posembed.lab.tasks.passkey import depth_grid, min_length, passkey_accuracy
from posembed.lab.tasks.perplexity import lm_perplexity

__all__ = ["evaluate_rows", "evaluate_at", "passkey_grid"]

logger = logging.getLogger(__name__)


def passkey_grid(
    model: nn.Module, stoi: dict[str, int], length: int, depths: tuple[float, ...], *, samples: int, seed: int,
    digits: int = 5,
) -> dict[float, float]:  # fmt: skip
    """Passkey accuracy at ``length`` for each depth (``samples`` documents each, seeded per cell)."""
    return {
        depth: passkey_accuracy(
            model, stoi, length, depth, samples=samples, seed=seed * 7919 + length * 31 + index, digits=digits
        )
        for index, depth in enumerate(depths)
    }


def evaluate_rows(
    model: nn.Module,
    data: ContextData,
    length: int,
    *,
    windows: int,
    depths: int,
    samples: int,
    seed: int,
    digits: int,
    passkey: bool = True,
) -> list[tuple[str, float, float | None]]:
    """``(metric, depth, value)`` of one model at one length: perplexity, passkey per depth and mean."""
    grid = (
        passkey_grid(model, data.stoi, length, depth_grid(depths), samples=samples, seed=seed, digits=digits)
        if passkey and length >= min_length(digits)
        else {}
    )
    rows = [("perplexity", NO_DEPTH, lm_perplexity(model, data.val, length, windows=windows))]
    rows += [("passkey", depth, value) for depth, value in grid.items()]
    return rows + ([("passkey_mean", NO_DEPTH, sum(grid.values()) / len(grid))] if grid else [])


def evaluate_at(
    cfg: ContextConfig, data: ContextData, name: str, method: str, model: nn.Module, length: int
) -> list[tuple[str, float, float | None]]:
    """:func:`evaluate_rows` of the model ``name`` with ``method`` at ``length``, as the study ``cfg``
    sets it (the same held-out characters at every length: more windows at shorter lengths)."""
    windows = cfg.lm_windows * max(cfg.lengths) // length
    rows = evaluate_rows(
        on_device(model),
        data,
        length,
        windows=windows,
        depths=cfg.depths,
        samples=cfg.passkey_samples,
        seed=cfg.seed,
        digits=cfg.digits,
    )
    logger.info(
        "context %s seed %d: %s / %s at %d: %s",
        cfg.name,
        cfg.seed,
        name,
        method,
        length,
        ", ".join(f"{m}={v:.3g}" for m, d, v in rows if d == NO_DEPTH and v is not None),
    )
    return rows
