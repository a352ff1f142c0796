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

Files:

=============== ======================================================================
file            what
=============== ======================================================================
``base``        what every task shares: :class:`Batch`, :class:`EvalPoint`, the
                :class:`Task` protocol, the loss, the evaluated lengths
``make``        :func:`make_task`: the task object of a config, by its registry entry
``order``       order classification (encoder)
``algorithmic`` copy, reverse, sort, addition (decoder, one small class each)
``charlm``      the character-level LM on a text file
``passkey``     passkey retrieval rows and their scoring (the context study's)
``perplexity``  the char LM's one validation loss and its matched-length losses
=============== ======================================================================

A new task is one file here with a class on the types of ``base`` (taking the
:class:`~posembed.lab.config.TrialConfig`) and one :class:`~posembed.lab.task_registry.TaskEntry`
in :mod:`posembed.lab.task_registry` (which also says each metric's display name and direction).
"""

from posembed._utils.names import submodules
from posembed.lab.tasks.base import IGNORE, TABLE_LIMIT, Batch, EvalPoint, Task, eval_lengths, loss_fn
from posembed.lab.tasks.make import make_task

__all__ = ["Batch", "EvalPoint", "Task", "make_task", "TABLE_LIMIT", "IGNORE", "loss_fn", "eval_lengths"]

__getattr__ = submodules(__name__)  # posembed.lab.tasks.<file>: imported on first use
