"""Lab tasks: what a trial trains on and how it is scored.

Every task produces :class:`Batch` es and scores a model with :meth:`Task.evaluate`, which
returns :class:`EvalPoint` s (one per metric and evaluated length). A length the model's
position table cannot reach is recorded as ``value=None, note="n/a (table limit)"``.

=========== ======= ==================================================== ===========
task        model   what                                                 metric
=========== ======= ==================================================== ===========
order       encoder is token A before token B? (bag of words at chance)  accuracy
copy        decoder ``x = y`` -> ``x``                                     exact_match
reverse     decoder ``x = y`` -> reversed ``x``                            exact_match
sort        decoder ``x = y`` -> sorted ``x``                              exact_match
addition    decoder ``a + b =`` -> ``a + b`` (digits least significant     exact_match
                    first)
charlm      decoder next character of a text file                       val_loss,
                                                                         perplexity
=========== ======= ==================================================== ===========
"""

from __future__ import annotations

from posembed.lab.config import TrialConfig
from posembed.lab.tasks.base import IGNORE, TABLE_LIMIT, Batch, EvalPoint, Task, eval_lengths, loss_fn

__all__ = ["Batch", "EvalPoint", "Task", "make_task", "TABLE_LIMIT", "IGNORE", "loss_fn", "eval_lengths"]


def make_task(cfg: TrialConfig) -> Task:
    """The task object of ``cfg.task``."""
    if cfg.task == "order":
        from posembed.lab.tasks.order import OrderTask

        return OrderTask(cfg)
    if cfg.task == "charlm":
        from posembed.lab.tasks.charlm import CharLMTask

        return CharLMTask(cfg)
    from posembed.lab.tasks.algorithmic import AlgorithmicTask

    return AlgorithmicTask(cfg)
