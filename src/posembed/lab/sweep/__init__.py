"""Sweeps of trials: the runner, its store, worker processes, Ray, a trial under ``torchrun``, the
lock, the listing.

=============== ===============================================================================
file            what
=============== ===============================================================================
``runner``      ``tasks x schemes x variants x seeds``, resumable, one stored trial at a time
``store``       the results store: one SQLite file per experiment, one transaction per trial
``store_file``  the store's file: refuse what SQLite would misread, create it whole
``lock``        one writer per out folder (an exclusive ``flock``)
``worker_plan`` how many trials train at once by default, from the work and the device
``workers``     trials side by side in worker processes, the parent the only writer
``ray_runner``  trials as Ray tasks on a cluster, the driver the only writer
``ddp_trial``   one trial of a preset, data-parallel under ``torchrun`` (helpers: :mod:`posembed.lab.training.ddp`)
``listing``     what an out folder holds (``posembed lab list``), and its exact-match rows
``progress``    the lab's progress lines and bars (:mod:`posembed._utils.progress`)
=============== ===============================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.lab.sweep.<file>: imported on first use
