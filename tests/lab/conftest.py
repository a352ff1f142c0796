"""Lab test fixtures: tiny configs, one intra-op thread (the test machine is shared)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from posembed.lab.config import ExperimentConfig, TrialConfig


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TINY = dict(dim=16, depth=1, heads=2, batch=8, steps=6, eval_batches=1, log_every=2, warmup=0)


def tiny_trial(**overrides) -> TrialConfig:
    """A trial that trains in well under a second."""
    values = dict(TINY, task="copy", context=4, eval_scales=(1.0, 2.0))
    values.update(overrides)
    return TrialConfig(**values)


@pytest.fixture
def tiny_experiment(tinyshakespeare) -> ExperimentConfig:
    """2 tasks x 2 schemes x 1 variant x 2 seeds = 8 tiny trials (one charlm on tinyshakespeare)."""
    return ExperimentConfig(
        name="tiny",
        tasks=("copy", "charlm"),
        schemes=("learned", "alibi"),
        variants=("base",),
        seeds=(0, 1),
        bases=(tiny_trial(), tiny_trial(task="charlm", context=8, text=str(tinyshakespeare))),
    )


def replace(cfg, **kw):
    return dataclasses.replace(cfg, **kw)
