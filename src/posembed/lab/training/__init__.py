"""The lab's one training loop and what it needs (trials and the context study call it).

Files:

====================== ========================================================================
file                   what
====================== ========================================================================
``train``              ``train_model`` / ``train_trial``, ``make_optimizer``, ``compile_training``
``schedule``           the one warmup-cosine schedule
``ddp``                the process-group helpers
``trial_cost``         a trial's time estimate
``checkpoint``         a trial's checkpoint written and read
``checkpoint_checks``  its checks
====================== ========================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.lab.training.<file>: imported on first use
