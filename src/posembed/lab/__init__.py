"""posembed.lab: train small transformers side by side and answer the position questions with numbers.

The lab is in rooms, one folder per job:

=================== =====================================================================
module              what
=================== =====================================================================
``config``          :class:`TrialConfig` (one run), :class:`ExperimentConfig` (a sweep), overrides
``store_file``      the checks and atomic creation of a store's SQLite file, and its errors in one line
``ids``             the one id function (a SHA-256 of a config's JSON) of the sweep's and the context
                    study's stores
``task_registry``   the lab's tasks by name: the one table a new task is added to (``config.TASKS``
                    derives from it)
``presets``         ``smoke``, ``quick``, ``full``, ``calibration``, ``lengthgen``, looked up by exact name;
                    the questions each asks (``PRIMARY``)
``registration``    the questions, commit and seeds a preset declares; the runner records them in the
                    store before a run trains (which seeds explored, which confirm)
``tasks/``          order classification, copy/reverse/sort/addition, char-level LM, passkey
``data``            text files for the char LM (checked: exists, UTF-8, long enough)
``schedule``        the one learning-rate schedule: linear warmup, then cosine decay
``ddp``             the process-group helpers of data-parallel training (``torchrun``)
``trial_cost``      a trial's estimated seconds, from its size (the worker plan, the compile choice)
``train``           one deterministic trial: build (scheme via :mod:`posembed.schemes.factory`), train,
                    evaluate, position-table drift
``checkpoint``      per-trial safetensors checkpoints that ``posembed inspect`` opens; their checks
                    in ``checkpoint_checks``
``perplexity``      the one validation loss (mean next-token cross-entropy over held-out windows)
                    the char-LM task and the context study score with
``calibration``     nanoGPT's CPU recipe on tinyshakespeare (val loss ~1.886)
``verdicts``        the papers' thresholds and posembed.stats.verdict' one verdict rule, re-exported
``training/``       the one training loop and what it needs: ``train``, ``schedule``, ``ddp``,
                    ``trial_cost``, ``checkpoint``, ``checkpoint_checks``
``sweep/``          a sweep of trials: ``runner`` (resumable, one atomic store transaction per
                    finished trial, the out folder locked by ``lock``), ``store`` (``results.sqlite``;
                    its file checked by ``lab.store_file``, as the context study's is),
                    ``workers`` and ``worker_plan`` (trials side by side; how many), ``ray_runner``,
                    ``ddp_trial`` (``torchrun``), ``listing`` (``posembed lab list``), ``progress``
``context/``        the context-extension study: ``presets``, ``corpus``, ``methods``, ``swap``,
                    ``train``, ``evaluate``, ``store``, ``run``, ``extend``, ``published`` figures
``lengthgen/``      the length-generalisation preset and its ranking (mean reciprocal rank)
``report/``         ``posembed lab report`` (``write``) and its parts: ``tables``, ``decisions``,
                    ``questions``, ``rows``, ``plots``, ``calibration``, ``simulate``; the context study's
                    ``context`` and ``context_plots``
=================== =====================================================================

Command line: ``posembed lab run --preset quick --out lab-quick`` then ``posembed lab report lab-quick``;
``posembed lab list lab-quick`` lists the trials and their checkpoints; ``posembed lab context``
runs the context-extension study.
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.lab.<file>: imported on first use
