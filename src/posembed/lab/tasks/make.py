"""The task object of a config: :func:`make_task`, by the task registry's entry for its name.

The class an entry names (``"module:Class"``, :mod:`posembed.lab.task_registry`) is imported on
first use, so a trial loads only its own task's module (the char LM's text, say, stays unread
for copy).

>>> from posembed.lab.config import TrialConfig
>>> type(make_task(TrialConfig(task="reverse", context=4))).__name__
'ReverseTask'
"""

from __future__ import annotations

import importlib

from posembed._utils.checks import did_you_mean
from posembed.lab.config import TrialConfig
from posembed.lab.task_registry import TASK_ENTRIES
from posembed.lab.tasks.base import Task

__all__ = ["make_task", "task_class"]


def task_class(name: str) -> type:
    """The class the registry entry of task ``name`` names."""
    if name not in TASK_ENTRIES:
        raise ValueError(f"unknown task {name!r}{did_you_mean(name, TASK_ENTRIES)}; known: {', '.join(TASK_ENTRIES)}")
    module, _, cls = TASK_ENTRIES[name].where.partition(":")
    return getattr(importlib.import_module(f"posembed.lab.tasks.{module}"), cls)


def make_task(cfg: TrialConfig) -> Task:
    """The task object of ``cfg.task``."""
    return task_class(cfg.task)(cfg)
