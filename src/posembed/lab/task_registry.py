"""The lab's tasks by name: the one table a new task is added to.

Each :class:`TaskEntry` names a task, the model it trains (``"decoder"``: a causal LM scored on
its answer tokens; ``"encoder"``: a classifier), where its class is (``"module:Class"``, a file
of :mod:`posembed.lab.tasks`) and its main metric. Everything else derives from this table:
:data:`posembed.lab.config.TASKS` (the names a config accepts and the model each builds),
:func:`posembed.lab.tasks.make_task` (the task object of a config), the algorithmic tasks'
:func:`~posembed.lab.tasks.algorithmic.make_example` / ``sequence_length``, a trial's time
estimate (:mod:`posembed.lab.trial_cost`) and the metric ``posembed lab list`` shows
(:data:`posembed.lab.sweep.listing.MAIN_METRIC`).

The table imports nothing (the configs below the tasks read it); the classes are loaded by
:func:`posembed.lab.tasks.make_task` when a trial is built.

>>> TASKS["copy"], TASKS["order"], TASK_ENTRIES["sort"].where
('decoder', 'encoder', 'algorithmic:SortTask')
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TaskEntry", "ENTRIES", "TASK_ENTRIES", "TASKS", "MODELS"]

#: the models a task trains: a causal decoder LM or a bidirectional encoder classifier
MODELS = ("decoder", "encoder")


@dataclass(frozen=True)
class TaskEntry:
    """One lab task: its ``name`` (``TrialConfig.task``), the ``model`` it trains (one of
    :data:`MODELS`), ``where`` its class is, ``"module:Class"`` in :mod:`posembed.lab.tasks`
    (the class takes the :class:`~posembed.lab.config.TrialConfig`), and its main ``metric``
    (one its ``evaluate`` records)."""

    name: str
    model: str
    where: str
    metric: str = "exact_match"

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"task {self.name!r}: model must be one of {MODELS}, got {self.model!r}")
        module, _, cls = self.where.partition(":")
        if not (module.isidentifier() and cls.isidentifier()):
            raise ValueError(
                f"task {self.name!r}: where must be 'module:Class' in posembed.lab.tasks, got {self.where!r}"
            )


ENTRIES: tuple[TaskEntry, ...] = (
    TaskEntry("order", "encoder", "order:OrderTask", metric="accuracy"),
    TaskEntry("copy", "decoder", "algorithmic:CopyTask"),
    TaskEntry("reverse", "decoder", "algorithmic:ReverseTask"),
    TaskEntry("sort", "decoder", "algorithmic:SortTask"),
    TaskEntry("addition", "decoder", "algorithmic:AdditionTask"),
    TaskEntry("charlm", "decoder", "charlm:CharLMTask", metric="val_loss"),
)

#: task name -> its entry
TASK_ENTRIES: dict[str, TaskEntry] = {entry.name: entry for entry in ENTRIES}
#: task name -> model kind it trains ("decoder" causal LM, "encoder" classifier)
TASKS: dict[str, str] = {entry.name: entry.model for entry in ENTRIES}
