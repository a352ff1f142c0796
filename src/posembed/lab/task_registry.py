"""The lab's tasks by name: the one table a new task is added to.

Each :class:`TaskEntry` names a task, the model it trains (``"decoder"``: a causal LM scored on
its answer tokens; ``"encoder"``: a classifier), where its class is (``"module:Class"``, a file
of :mod:`posembed.lab.tasks`), its main metric, the metric its report tables show and what its
lengths count. Each :class:`Metric` a task records says its display name and its direction
(:data:`METRICS`). Everything else derives from these tables:
:data:`posembed.lab.config.TASKS` (the names a config accepts and the model each builds),
:func:`posembed.lab.tasks.make_task` (the task object of a config), the algorithmic tasks'
:func:`~posembed.lab.tasks.algorithmic.make_example` / ``sequence_length``, a trial's time
estimate (:mod:`posembed.lab.training.trial_cost`), the metric ``posembed lab list`` shows
(:data:`posembed.lab.sweep.listing.MAIN_METRIC`), the lab report's metrics, their names, directions
and axes (:mod:`posembed.lab.report`) and the inspector's training length of a lab checkpoint.
A stored task the registry no longer has reads as an exact-match decoder task (:func:`task_entry`).

The table imports nothing (the configs below the tasks read it); the classes are loaded by
:func:`posembed.lab.tasks.make_task` when a trial is built.

>>> TASKS["copy"] is Model.DECODER, TASKS["order"] is Model.ENCODER, TASK_ENTRIES["sort"].where
(True, True, 'algorithmic:SortTask')
>>> charlm = task_entry("charlm")
>>> charlm.metric, charlm.shown, METRICS[charlm.shown].label, METRICS[charlm.metric].higher_is_better
('val_loss', 'perplexity', 'perplexity', False)
>>> task_entry("retired").metric, metric_label("exact_match"), metric_label("bleu")
('exact_match', 'exact match', 'bleu')
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "TaskEntry",
    "ENTRIES",
    "TASK_ENTRIES",
    "TASKS",
    "MODELS",
    "Model",
    "Metric",
    "METRICS",
    "task_entry",
    "metric_label",
]


class Model(str, Enum):
    """The model a task trains: a causal decoder LM, or a bidirectional encoder classifier. Its value
    is the name a checkpoint's config stores (``"decoder"``, ``"encoder"``)."""

    DECODER = "decoder"
    ENCODER = "encoder"


#: the models' names, as configs and checkpoints write them
MODELS = tuple(model.value for model in Model)


@dataclass(frozen=True)
class Metric:
    """A metric a task records: its ``name`` (``EvalPoint.metric``), the ``label`` reports print,
    whether larger is better, whether it is a ``fraction`` (a value in [0, 1]) and its equivalence
    ``margin``: a report calls two groups "alike" on it only when the whole difference is within
    +/- this (``None``: never judged)."""

    name: str
    label: str
    higher_is_better: bool
    fraction: bool = False
    margin: float | None = None


#: metric name -> what it is
METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric("accuracy", "accuracy", higher_is_better=True, fraction=True, margin=0.05),  # 5 points
        Metric("exact_match", "exact match", higher_is_better=True, fraction=True, margin=0.05),
        Metric("val_loss", "validation loss", higher_is_better=False, margin=0.02),  # nats: perplexities within 2 %
        Metric("perplexity", "perplexity", higher_is_better=False),
        # the same characters at every length (the last L of each window): length ratios compare context, not text
        Metric("matched_loss", "validation loss on matched text", higher_is_better=False, margin=0.02),
    )
}


@dataclass(frozen=True)
class TaskEntry:
    """One lab task: its ``name`` (``TrialConfig.task``), the ``model`` it trains (one of
    :data:`MODELS`), ``where`` its class is, ``"module:Class"`` in :mod:`posembed.lab.tasks`
    (the class takes the :class:`~posembed.lab.config.TrialConfig`), its main ``metric`` (one its
    ``evaluate`` records, the one compared and listed), the metric its report tables and figures
    show (``shown``; ``None``: the main one) and what an evaluated length counts (``lengths``,
    the figures' axis)."""

    name: str
    model: Model
    where: str
    metric: str = "exact_match"
    shown: str | None = None
    lengths: str = "operand length"

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"task {self.name!r}: model must be one of {MODELS}, got {self.model!r}")
        object.__setattr__(self, "model", Model(self.model))
        module, _, cls = self.where.partition(":")
        if not (module.isidentifier() and cls.isidentifier()):
            raise ValueError(
                f"task {self.name!r}: where must be 'module:Class' in posembed.lab.tasks, got {self.where!r}"
            )
        for metric in (self.metric, self.shown or self.metric):
            if metric not in METRICS:
                raise ValueError(f"task {self.name!r}: metric {metric!r} is not one of {', '.join(METRICS)}")
        if self.shown is None:
            object.__setattr__(self, "shown", self.metric)


ENTRIES: tuple[TaskEntry, ...] = (
    TaskEntry("order", "encoder", "order:OrderTask", metric="accuracy", lengths="sequence length"),
    TaskEntry("copy", "decoder", "algorithmic:CopyTask"),
    TaskEntry("reverse", "decoder", "algorithmic:ReverseTask"),
    TaskEntry("sort", "decoder", "algorithmic:SortTask"),
    TaskEntry("addition", "decoder", "algorithmic:AdditionTask"),
    TaskEntry(
        "charlm",
        "decoder",
        "charlm:CharLMTask",
        metric="val_loss",
        shown="perplexity",
        lengths="evaluated context (characters)",
    ),
)

#: task name -> its entry
TASK_ENTRIES: dict[str, TaskEntry] = {entry.name: entry for entry in ENTRIES}
#: task name -> the model it trains
TASKS: dict[str, Model] = {entry.name: entry.model for entry in ENTRIES}


def task_entry(name: str) -> TaskEntry:
    """The entry of task ``name``; a name the registry lacks (a stored trial of a task since
    removed) reads as an exact-match decoder task."""
    return TASK_ENTRIES.get(name) or TaskEntry(name, "decoder", "algorithmic:AlgorithmicTask")


def metric_label(name: str) -> str:
    """How reports print metric ``name`` (an unknown name as it is)."""
    return METRICS[name].label if name in METRICS else name
