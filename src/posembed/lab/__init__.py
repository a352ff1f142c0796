"""posembed.lab: train small transformers side by side and answer the position questions with numbers.

=================== =====================================================================
module              what
=================== =====================================================================
``config``          :class:`TrialConfig` (one run), :class:`ExperimentConfig` (a sweep), overrides
``presets``         ``smoke``, ``quick``, ``full``, ``calibration``, looked up by exact name
``tasks``           order classification, copy/reverse/sort/addition, char-level LM
``data``            text files for the char LM (checked: exists, UTF-8, long enough)
``train``           one deterministic trial: build (scheme via :mod:`posembed.schemes.factory`), train,
                    evaluate, position-table drift
``runner``          the sweep, resumable, one atomic store transaction per finished trial; the out
                    folder locked (:mod:`~posembed.lab.lock`)
``workers``         trials side by side in spawned worker processes (the parent alone writes)
``progress``        a bar on a terminal, one log line per finished trial otherwise
``listing``         ``posembed lab list``: the trials of an out folder, metrics and checkpoint paths
``store``           ``results.sqlite`` schema and reader (:func:`~posembed.lab.store.load_results`)
``checkpoint``      per-trial safetensors checkpoints that ``posembed inspect`` opens
``ddp``             process-group helpers: a sweep data-parallel under ``torchrun``
``ddp_trial``       one trial of a preset under ``torchrun`` (``python -m posembed.lab.ddp_trial``)
``calibration``     nanoGPT's CPU recipe on tinyshakespeare (val loss ~1.886)
``context*``        the context-extension study: passkey retrieval (``tasks.passkey``) and perplexity
                    at 1x-8x the training length for every RoPE scaling method, its store and report
=================== =====================================================================

Command line: ``posembed lab run --preset quick --out lab-quick`` then ``posembed lab report lab-quick``;
``posembed lab list lab-quick`` lists the trials and their checkpoints; ``posembed lab context``
runs the context-extension study.
"""
